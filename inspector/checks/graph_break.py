"""graph-break: a graph break torch logged (dynamo_graph_break_reason), with its reason, the user
line and the function torch resumes in; a warning (the step runs as several graphs, with eager
code between them). A restart of the analysis that no logged break explains (older torch logs
only the restart) is a break too, but for torch's own re-traces (compiler collectives'
`CompileCollectiveRestartAnalysis`, an nn.Module unspecialized: `compile_events.is_retrace`).
Restarts caused by a logged break are named in its evidence (`restarts`). Breaks under
fullgraph=True fail the compile: compile-failure reports them. A break in torch's own code (a
frame torch disabled, as FSDP2's hooks) is info: torch runs it uncompiled by design."""

from __future__ import annotations

from graphtrain_inspect.inspector.checks.compile_findings import finding, fold, story, where_key, whose
from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.checks.findings import Finding
from graphtrain_inspect.inspector.read.compile_events import is_retrace

KIND = "graph-break"
DESCRIPTION = "a graph break in a compiled function (reason, user line, resume function)"


def run(ctx: CheckContext) -> list[Finding]:
    s = story(ctx)
    out = []
    explained: set[tuple] = set()
    breaks = s.events(kinds=("break",))
    restarts = s.events(kinds=("restart",))
    for e, ranks, evs in fold(breaks, where_key):
        mine = sorted(
            {
                r.label
                for b in evs
                for r in restarts
                if r.rank == b.rank and r.compile_id == b.compile_id and r.attempt > b.attempt and r.reason == b.reason
            }
        )
        explained.update(
            (r.rank, r.compile_id, r.reason)
            for b in evs
            for r in restarts
            if r.rank == b.rank and r.compile_id == b.compile_id and r.reason == b.reason
        )
        resume = f"; resumes in {e.resume}" if e.resume else ""
        sev, why, ev = whose(e, "warning")
        out.append(
            finding(
                KIND,
                sev,
                e,
                ranks,
                f"graph break in {e.frame.name if e.frame and e.frame.name else 'compiled code'} {e.label}: "
                f"{e.reason}{resume}{why}",
                ctx,
                restarts=mine,
                **ev,
            )
        )
    # torch's own re-traces (compiler collectives ...) are no break
    lone = [r for r in restarts if (r.rank, r.compile_id, r.reason) not in explained and not is_retrace(r)]
    for e, ranks, _ in fold(lone, where_key):
        out.append(
            finding(
                KIND,
                "warning",
                e,
                ranks,
                f"analysis restarted {e.label} (graph break): {e.reason}",
                ctx,
                restarts=[e.label],
            )
        )
    return out


def evidence_lines(f: Finding) -> list[str]:
    """The finding's evidence as lines of text (`check`, `report`, the TUI and SARIF show them)."""
    from graphtrain_inspect.inspector.checks.compile_findings import evidence_line

    line = evidence_line(f)
    return [line] if line else []
