"""recompile: torch compiled a frame again because a guard failed (recompile_reasons); info, with
the guard. A recompile on some ranks only is rank-divergent-compile's error."""

from __future__ import annotations

from graphtrain_inspect.inspector.checks.compile_findings import finding, fold, story
from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.checks.findings import Finding

KIND = "recompile"
DESCRIPTION = "a frame compiled again because a guard failed (the guard)"


def run(ctx: CheckContext) -> list[Finding]:
    out = []
    for e, ranks, _ in fold(
        story(ctx).events(kinds=("recompile",)), lambda e: (e.compile_id, e.frame and e.frame.where(), e.guard)
    ):
        fn = e.frame.name if e.frame and e.frame.name else "a frame"
        why = f"guard failed: {e.guard}" if e.guard else e.reason
        out.append(finding(KIND, "info", e, ranks, f"{fn} recompiled {e.label}: {why}", ctx))
    return out


def evidence_lines(f: Finding) -> list[str]:
    """The finding's evidence as lines of text: its message and the evidence `--json` holds say it
    all (`report` lists the evidence by key)."""
    return []
