"""rank-divergent-compile: ranks that do not compile the same way: other compile ids, a graph
break, recompile or failure on some ranks and not on others, for the same frames. In distributed
training that is a bug of its own: a rank that breaks a graph, recompiles or falls back to eager
where the others do not issues its collectives in another order or count, and the job hangs or
silently desynchronizes. tlparse shows each rank alone; this compares them.

Each rank's compiles are read in the order torch started them, each as its compile id, the frame
compiled (function, file, first line), how it ended, its breaks (file:line) and failure type and
whether it is a recompile; what the guard or reason says is not compared (it may name each rank's
own sizes), only shown. The ranks that agree with most ranks (ties: the lowest rank) are the
reference; each other group of agreeing ranks is one error, naming the first compile where it
parts from the reference and what each side did there."""

from __future__ import annotations

from typing import Any

from graphtrain_inspect.inspector.checks.compile_findings import INTRODUCED_BY, pipeline_key, story
from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.checks.findings import Finding
from graphtrain_inspect.inspector.read.compile_events import CompileInfo, short_path

KIND = "rank-divergent-compile"
DESCRIPTION = "ranks whose compile ids, graph breaks, recompiles or failures differ for the same frames"


def _shape(c: CompileInfo) -> tuple:
    breaks = tuple(sorted({(e.frame.file, e.frame.line) for e in c.events if e.kind == "break" and e.frame}))
    fails = tuple(sorted({e.fail_type or "?" for e in c.events if e.kind == "failure"}))
    recompiled = any(e.kind == "recompile" for e in c.events)
    return (c.compile_id, c.function, c.file, c.firstlineno, c.status, breaks, fails, recompiled)


def _what(c: CompileInfo | None) -> str:
    """What a rank did at a compile, in words, with the guard or reason."""
    if c is None:
        return "no such compile"
    parts = [f"{c.label} {c.function}" if c.function else c.label]
    for e in c.events:
        if e.kind == "recompile":
            guard = f"guard failed: {e.guard}" if e.guard else "(guard: capture --torch-trace)"
            parts.append(f"recompiled, {guard}" if e.guard else f"recompiled {guard}")
        elif e.kind == "break":
            parts.append(
                f"graph break at {short_path(e.frame.file)}:{e.frame.line}: {e.reason}"
                if e.frame
                else f"graph break: {e.reason}"
            )
        elif e.kind == "failure":
            parts.append(f"failed ({'fell back to eager' if e.fell_back else 'raised'}): {e.reason}")
    if len(parts) == 1:
        parts.append(c.status if c.status != "ok" else "compiled, no break")
    return "; ".join(parts)


def run(ctx: CheckContext) -> list[Finding]:
    s = story(ctx)
    ranks = sorted(s.by_rank)
    if len(ranks) < 2:
        return []
    seqs = {r: tuple(_shape(c) for c in s.compiles(r)) for r in ranks}
    groups: dict[tuple, list[int]] = {}
    for r in ranks:
        groups.setdefault(seqs[r], []).append(r)
    if len(groups) < 2:
        return []
    ref_seq, ref_ranks = max(groups.items(), key=lambda kv: (len(kv[1]), -kv[1][0]))
    ref = ref_ranks[0]
    out = []
    for seq, members in groups.items():
        if seq is ref_seq:
            continue
        i = next(
            (
                k
                for k in range(max(len(seq), len(ref_seq)))
                if k >= len(seq) or k >= len(ref_seq) or seq[k] != ref_seq[k]
            ),
            0,
        )
        mine = s.compiles(members[0])
        theirs = s.compiles(ref)
        a = theirs[i] if i < len(theirs) else None
        b = mine[i] if i < len(mine) else None
        # where they part, each side as the other would look it up: the same compile id
        pivot = b or a
        assert pivot is not None
        msg = f"ranks part at compile {pivot.label}: " + _sides(s, ref, members[0], a, b)
        src = None
        ev = next((e for e in (pivot.events or []) if e.frame is not None), None)
        frame = ev.frame if ev is not None else pivot.frame
        if frame is not None:
            src = frame.to_json()
        out.append(
            Finding(
                kind=KIND,
                severity="error",
                message=msg,
                introduced_by=INTRODUCED_BY,
                ranks=sorted(set(members) | {ref}),
                node=pivot.function,
                pipeline=pipeline_key(ctx.cap, pivot.rank, pivot.compile_id),
                source=src,
                evidence={
                    "compile_id": pivot.compile_id,
                    "index": i,
                    "reference_ranks": ref_ranks,
                    "divergent_ranks": members,
                    "reference": _side(s.compiles(ref), i, pivot.compile_id, s, ref),
                    "divergent": _side(mine, i, pivot.compile_id, s, members[0]),
                },
            )
        )
    return out


def _sides(s: Any, ref: int, other: int, a: CompileInfo | None, b: CompileInfo | None) -> str:
    """Each side at the point where the ranks part, the compile id one side has looked up on the
    other ("rank 0: no compile [0/1]; rank 1: [0/1] step; recompiled, guard failed: ...")."""
    if b is not None and (a is None or s.compile(ref, b.compile_id) is None):
        return f"rank {ref}: no compile {b.label}; rank {other}: {_what(b)}"
    if a is not None and (b is None or s.compile(other, a.compile_id) is None):
        return f"rank {other}: no compile {a.label}; rank {ref}: {_what(a)}"
    return f"rank {ref}: {_what(a)}; rank {other}: {_what(b)}"


def _side(compiles: list[CompileInfo], i: int, cid: str, s: Any, rank: int) -> dict[str, Any]:
    at = compiles[i] if i < len(compiles) else None
    same = s.compile(rank, cid)
    return {
        "rank": rank,
        "at_index": at.to_json() if at else None,
        "same_compile_id": same.to_json() if same else None,
        "summary": _what(same or at),
    }


def evidence_lines(f: Finding) -> list[str]:
    """The finding's evidence as lines of text: its message and the evidence `--json` holds say it
    all (`report` lists the evidence by key)."""
    return []
