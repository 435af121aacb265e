"""What the torch.compile checks share: one finding per event, the same event on several ranks
folded into one finding (a graph break on all 64 ranks is one finding naming ranks 0-63).

Compile findings are not in a graph: `introduced_by` is `dynamo` (torch's tracer), `pipeline`
the compile id (`"0/1#0"`, printed `compile 0/1`), `node` the compiled function, `source` the
user frame of the event (file, line, code, fn), `evidence` the event as `ls --json` has it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphtrain_inspect.inspector.checks.findings import Finding
from graphtrain_inspect.inspector.read.compile_events import (
    CompileEvent,
    CompileStory,
    base_compile_id,
    capture_compiles,
    compile_story,
    missing_note,
    torch_own,
)

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.checks.context import CheckContext

INTRODUCED_BY = "dynamo"


def story(ctx: CheckContext) -> CompileStory:
    """torch's own compile story; without torch's logs, the compiles the capture's own records
    show (`capture_compiles`: compile ids and recompiles, enough for rank-divergent-compile and
    recompile), and graph breaks and failures are not checked."""
    why = missing_note(ctx.cap)
    if why:
        ctx.skip("compile-failure, graph-break", why)
        return capture_compiles(ctx.cap)
    return compile_story(ctx.cap)


def fold(events: list[CompileEvent], key: Any) -> list[tuple[CompileEvent, list[int], list[CompileEvent]]]:
    """Events grouped by `key(event)`, in first-seen order: (first event, ranks, all events)."""
    groups: dict[Any, tuple[CompileEvent, list[int], list[CompileEvent]]] = {}
    for e in events:
        k = key(e)
        g = groups.get(k)
        if g is None:
            groups[k] = (e, [e.rank], [e])
        else:
            if e.rank not in g[1]:
                g[1].append(e.rank)
            g[2].append(e)
    return list(groups.values())


def where_key(e: CompileEvent) -> tuple:
    f = e.frame
    return (e.kind, e.compile_id, e.attempt, f.file if f else None, f.line if f else None, e.reason)


TORCH_OWN_NOTE = (
    "raised inside torch's own code ({where}) and handled there: torch ran the frame uncompiled; not the user's"
)


def whose(e: CompileEvent, severity: str) -> tuple[str, str, dict[str, Any]]:
    """(severity, message suffix, evidence) for an event by where it happened: in torch's own
    code (FSDP2's hook wrapper is `torch._dynamo.disable`d, so compiling it fails and torch falls
    back, training healthy) it is info with why; in the user's code it keeps its severity."""
    where = torch_own(e.frame)
    if where is None:
        return severity, "", {}
    return "info", "; " + TORCH_OWN_NOTE.format(where=where), {"torch_own": where, "severity_if_user": severity}


def pipeline_key(cap: Any, rank: int, compile_id: str) -> str:
    """The key of the compile's first graph (pipeline) on the rank, as the stage index names it
    ("0/0_1#0" when torch's graph came from attempt 1), so that the TUI badges that graph; the
    bare compile id when torch logged no graph for it (a failed compile)."""
    for pl in cap.pipelines(rank) if rank in cap.ranks else []:
        cid = pl.key.rpartition("#")[0]
        if cid and base_compile_id(cid) == compile_id:
            return pl.key
    return f"{compile_id}#0"


def finding(
    kind: str,
    severity: str,
    e: CompileEvent,
    ranks: list[int],
    message: str,
    ctx: CheckContext | None = None,
    **extra: Any,
) -> Finding:
    st = compile_story_fn_name(e)
    src = e.frame.to_json() if e.frame is not None else None
    return Finding(
        kind=kind,
        severity=severity,
        message=message,
        introduced_by=INTRODUCED_BY,
        ranks=sorted(ranks),
        node=st,
        pipeline=pipeline_key(ctx.cap, min(ranks), e.compile_id) if ctx is not None else f"{e.compile_id}#0",
        source=src,
        evidence={**e.to_json(), **extra},
    )


def compile_story_fn_name(e: CompileEvent) -> str | None:
    return e.frame.name if e.frame is not None and e.frame.name else None


def evidence_line(f: Finding) -> str:
    """The line `check` prints under a compile finding's message."""
    ev = f.evidence or {}
    if f.kind == "graph-break":
        parts = [f"resumes in {ev['resume']}" if ev.get("resume") else "no resume function compiled"]
        if ev.get("restarts"):
            parts.append("analysis restarted " + " ".join(ev["restarts"]))
        return "; ".join(parts)
    if f.kind == "compile-failure":
        return f"{ev.get('fail_type')}: " + (
            "fell back to eager"
            if ev.get("fell_back")
            else "raised to the caller"
            if ev.get("fell_back") is False
            else "fallback unknown"
        )
    return ""
