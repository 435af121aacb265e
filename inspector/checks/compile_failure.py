"""compile-failure: a torch.compile that failed (compilation_metrics' fail_type): an error,
whether torch fell back to eager (suppress_errors: the frame runs uncompiled, and on a rank where
the others compiled it issues its collectives differently) or raised. A failure of a graph-break
type (Unsupported ...) without a fallback is a graph break where fullgraph=True forbade one: the
message says so (it is this finding, not also a graph-break one). One raised in torch's own code and
handled there (FSDP2's `torch._dynamo.disable`d hook wrapper) is info with that reason."""

from __future__ import annotations

from graphtrain_inspect.inspector.checks.compile_findings import finding, fold, story, where_key, whose
from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.checks.findings import Finding
from graphtrain_inspect.inspector.read.compile_events import BREAK_FAIL_TYPES

KIND = "compile-failure"
DESCRIPTION = "a torch.compile that failed: fell back to eager or raised (a graph break under fullgraph=True included)"


def run(ctx: CheckContext) -> list[Finding]:
    out = []
    for e, ranks, _ in fold(story(ctx).events(kinds=("failure",)), where_key):
        fullgraph = e.fail_type in BREAK_FAIL_TYPES and not e.fell_back
        how = "fell back to eager" if e.fell_back else "raised" if e.fell_back is False else "fallback unknown"
        head = (
            f"graph break under fullgraph=True, compile {e.label} failed ({how})"
            if fullgraph
            else f"compile {e.label} failed ({how})"
        )
        sev, why, ev = whose(e, "error")
        out.append(finding(KIND, sev, e, ranks, f"{head}: {e.reason}{why}", ctx, fullgraph_break=fullgraph, **ev))
    return out


def evidence_lines(f: Finding) -> list[str]:
    """The finding's evidence as lines of text (`check`, `report`, the TUI and SARIF show them)."""
    from graphtrain_inspect.inspector.checks.compile_findings import evidence_line

    line = evidence_line(f)
    return [line] if line else []
