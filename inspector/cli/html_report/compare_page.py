"""`report BASE NEW`'s page: two runs compared (`compare BASE NEW`) as one self-contained HTML file,
the passes that changed first with the node changes of each pass whose own output changed (its
input the same), then the findings that changed, then the passes that stayed the same.

Rendered by Jinja2 with autoescape on: names from a capture are text whatever they hold.
"""

from __future__ import annotations

from importlib.resources import files
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.checks.finding_changes import FindingChange
    from graphtrain_inspect.inspector.checks.two_runs import StageChange, TwoRuns

# node changes listed per diff, and diffs made: a page to read, not a dump
NODE_LINES = 200
DIFFS = 20


def render(
    runs: "TwoRuns", stages: list["StageChange"], changes: list["FindingChange"] | None, base: str, new: str
) -> str:
    import jinja2

    from graphtrain_inspect.capture.shared.rank_ranges import format_ranks
    from graphtrain_inspect.capture.shared.terminal_text import Style
    from graphtrain_inspect.inspector.cli import compare as cmd
    from graphtrain_inspect.inspector.read.stages import pipeline_label

    plain = Style(False)
    order = {"changed": 0, "input changed": 1, "added": 2, "removed": 3}
    moved = [s for s in stages if s.status != "same" or s.renamed]
    moved.sort(key=lambda s: order.get(s.status, 4))
    new_errors = sum(1 for c in changes or [] if c.adds_error())
    findings = None
    if changes is not None:
        findings = []
        for c in changes:
            f = c.finding
            grade = f"{c.base.severity} -> {f.severity}" if c.status == "graded" and c.base else f.severity
            ranks = format_ranks(f.ranks) if f.ranks else "-"
            if c.base is not None and c.new is not None and c.base.ranks != f.ranks:
                ranks = f"{format_ranks(c.base.ranks) if c.base.ranks else '-'} -> {ranks}"
            where = cmd.introduced_words(f.introduced_by) + (f" [{pipeline_label(f.pipeline)}]" if f.pipeline else "")
            findings.append(
                {
                    "status": c.status,
                    "grade": grade,
                    "severity": f.severity,
                    "kind": f.kind,
                    "node": (f"{f.subgraph}:" if f.subgraph else "") + (f.node or "-"),
                    "ranks": ranks,
                    "where": where,
                    "message": f.message,
                }
            )
    here = files("graphtrain_inspect.inspector.cli.html_report")
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    template = env.from_string(here.joinpath("compare.html.j2").read_text(encoding="utf-8"))
    rows = lambda ss: [  # noqa: E731
        {"pipeline": pipeline_label(s.pipeline), "label": s.label(), "text": cmd.stage_text(runs, s)[0]} for s in ss
    ]
    return template.render(
        base=base,
        new=new,
        base_ranks=f"{len(runs.base.ranks)} rank(s), {runs.base.kind}",
        new_ranks=f"{len(runs.new.ranks)} rank(s), {runs.new.kind}",
        rank_lines=cmd.rank_lines(runs, plain),
        verdict=(
            f"{new_errors} new error{'s' if new_errors != 1 else ''} in the new run"
            if new_errors
            else ("nothing new is wrong" if changes is not None else "graphs compared (no checks run)")
        ),
        new_errors=new_errors,
        stage_summary=cmd.stage_summary(stages),
        finding_summary=cmd.finding_summary(changes, 0) if changes is not None else "",
        changed=rows(moved),
        same=rows([s for s in stages if s.status == "same" and not s.renamed]),
        diffs=_diffs(runs, moved, plain),
        findings=findings,
        css=jinja2.utils.markupsafe.Markup(here.joinpath("page.css").read_text(encoding="utf-8")),
        version=_version(),
    )


def _diffs(runs: "TwoRuns", moved: list["StageChange"], plain: Any) -> list[dict[str, Any]]:
    """The node changes of each pass whose output changed while its input did not, on each pair
    of ranks where it did (at most DIFFS)."""
    from graphtrain_inspect.inspector.checks.two_runs import CHANGED, run_diff
    from graphtrain_inspect.inspector.cli.common import diff_title
    from graphtrain_inspect.inspector.cli.diff import node_lines
    from graphtrain_inspect.inspector.read.stages import pipeline_label

    out: list[dict[str, Any]] = []
    for s in moved:
        if s.base is None or s.new is None:
            continue
        for c in s.ranks:
            if c.status != CHANGED or c.input_changed or len(out) >= DIFFS:
                continue
            sb = runs.base_index.across(s.base).get(c.base_rank)
            sn = runs.new_index.across(s.new).get(c.new_rank)
            d = run_diff(runs.base, c.base_rank, sb.gid, runs.new, c.new_rank, sn.gid) if sb and sn else None
            where = runs.ranks.label(c.base_rank, c.new_rank)
            title = diff_title(f"{s.label()} on {where}", pipeline_label(s.pipeline), "base", "new")
            lines = node_lines(d, plain, NODE_LINES) if d is not None else ["graph tables unreadable"]
            out.append({"title": title, "lines": lines})
    return out


def _version() -> str:
    from graphtrain_inspect.inspector.cli.main import version

    return version()
