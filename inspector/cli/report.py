"""`graphtrain-inspect report DIR -o report.html`: one self-contained HTML page to share a finding
with someone who has no terminal on the capture: what `check` finds (same counts, a card per
finding numbered as `check --json` numbers it, a switch for info findings and one for the
shared-graph grading), each finding's pass and rank diff around its node, the generated code of
codegen findings, a rank x pass grid of graph agreement coloured by the worst finding in each
cell, each rank's compile time as a picture, compile events per rank and the capture's metadata
(inspector.cli.html_report).

`report BASE NEW -o page.html`: two runs compared, as `compare BASE NEW` compares them
(inspector.cli.html_report.compare_page): the passes that changed first, with their node changes,
then the findings that changed.

Exit status: 0 once written, whatever the findings; 2 when DIR cannot be read or the file written.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from graphtrain_inspect.inspector.cli.common import (
    CommandError,
    add_capture_argument,
    add_jobs_argument,
    jobs_of,
    open_or_fail,
    write_new,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_capture_argument(p)
    p.add_argument("new", nargs="?", metavar="NEW", help="a second run: the page compares DIR (the base) with it")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE|DIR",
        default="report.html",
        help="the page to write (default: report.html); a directory (existing, or named with a trailing /) gets "
        "DIR/report.html and the whole graphs behind its diffs in DIR/graphs/",
    )
    add_jobs_argument(p, "the checks' rank diffs")
    p.add_argument(
        "--source",
        choices=("auto", "capture", "torch"),
        default="auto",
        help="read our capture logs, or torch's TORCH_TRACE logs (a capture's torch_trace/ subdirectory)",
    )


def run(args: argparse.Namespace) -> int:
    from graphtrain_inspect.capture.shared.terminal_text import fmt_bytes
    from graphtrain_inspect.inspector.cli.html_report import render

    as_dir = os.path.isdir(args.output) or args.output.endswith(os.sep)
    page = Path(args.output) / "report.html" if as_dir else Path(args.output)
    if args.new:  # two runs: one page, no graphs folder
        html, as_dir = _compare_page(args), False
    cap = open_or_fail(args.dir, args.source) if not args.new else None
    try:
        if cap is not None:
            with cap:
                html = render(
                    cap,
                    jobs=jobs_of(args),
                    graphs_dir=page.parent / "graphs" if as_dir else None,
                )
        tmp = page.with_name(f"{page.name}.tmp{os.getpid()}")
        write_new(str(tmp), html.encode("utf-8"))  # made here: a link planted under the name is not followed
        os.replace(tmp, page)  # replaces a link named like the page, never writes through it
    except OSError as e:
        raise CommandError(f"{e.filename or page}: cannot write the report: {e.strerror or e}") from None
    print(
        f"wrote {page} ({fmt_bytes(len(html.encode()))})"
        + (f" and the graphs its diffs name in {page.parent / 'graphs'}" if as_dir else "")
    )
    return 0


def _compare_page(args: argparse.Namespace) -> str:
    from graphtrain_inspect.inspector.checks import check_report
    from graphtrain_inspect.inspector.checks.finding_changes import match_findings
    from graphtrain_inspect.inspector.checks.two_runs import TwoRuns
    from graphtrain_inspect.inspector.cli.compare import resolve_pair
    from graphtrain_inspect.inspector.cli.html_report.compare_page import render as render_compare

    base = open_or_fail(resolve_pair(args.dir), args.source)
    with base:
        new = open_or_fail(resolve_pair(args.new), args.source)
        with new:
            runs = TwoRuns(base, new)
            stages = runs.compare()
            jobs = jobs_of(args)
            found = [check_report(cap, jobs=jobs).findings for cap in (base, new)]
            return render_compare(runs, stages, match_findings(found[0], found[1], runs), args.dir, args.new)
