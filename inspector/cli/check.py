"""`graphtrain-inspect check DIR [--json] [--severity LEVEL] [--check KIND]... [-j N]`

Runs every check (inspector.checks.CHECKS) on every graph state of every rank and prints the
findings: a table grouped by kind and by the pass that introduced them, one line each with the
node, the ranks and one line of evidence; then the checks that could not run and why.

`--json` prints one document `{"findings": [...], "summary": {...}}`; each finding has `kind`,
`severity` (error, warning, info), `introduced_by` (the first pass after which it appears, or
"trace" when the traced graph already has it), `pass` (the last pass where it is still present),
`ranks`, `graph`, `subgraph` (nested path or null), `node`, `message`, `evidence`.
A finding is a root cause (checks.root_causes): the findings that follow from it are its
`consequences` (a list of findings in the same shape, only where there are some), counted in
`summary.consequences`; the table counts them under each root and `--all` lists them.

`--sarif FILE` also writes the findings the table shows as SARIF 2.1.0 (inspector.cli.sarif), each
located at its source line, for code scanning.

`-j N` makes the rank diffs (the cost of a capture whose ranks differ) in N processes first
(default: the machine's cores, at most 16); the findings do not depend on N.

Exit status: 0 without error findings, 1 with error findings, 2 when DIR cannot be read.

Device policy (device-baked; docs/inspector.md): a device literal or constant naming another
rank's device, or an accelerator on a rank that computes on the CPU, is an error in the graph
that runs and a warning when a later pass removed it (the model code still has it). A literal
equal to each rank's own device is right for a graph each rank compiles for itself (info); in a
shared graph (compiled on one rank and loaded by the others: a compile-on-one-rank capture, or
`--shared-graph`) it is the compiling rank's device, wrong on the others: an error. Rank literals
from the trace (rank-baked-constant) follow the same rule; one a pass put there is always an error.
"""

from __future__ import annotations

import argparse
import os
import sys

import orjson

from graphtrain_inspect.capture.shared.rank_ranges import format_ranks
from graphtrain_inspect.capture.shared.terminal_text import Style, truncate, want_color
from graphtrain_inspect.inspector.checks.findings import SEVERITIES, SEVERITY_RANK
from graphtrain_inspect.inspector.cli.common import (
    add_capture_argument,
    add_common_arguments,
    add_jobs_argument,
    jobs_of,
    open_or_fail,
    print_read_errors,
)

DEVICE_POLICY = """\
device policy (device-baked):
  a device literal or constant naming another rank's device, or an accelerator
  on a rank that computes on the CPU: an error in the graph that runs, a warning
  when a later pass removed it (the model code still has it).
  a literal equal to each rank's own device (cuda:0 on rank 0, cuda:1 on rank 1):
  right for a graph each rank compiles for itself (ordinary torch.compile,
  per-rank make_fx): info. In a shared graph (compiled on one rank, loaded by the
  others: recognised in a compile-on-one-rank capture, or --shared-graph) it is
  the compiling rank's device, wrong on every other rank: an error.
rank literals (rank-baked-constant) follow the same rule where the literal comes
  from model code that read the rank as an int: already in the traced graph,
  carried on by torch's own passes (Dynamo, AOTAutograd, Inductor) or into the
  code Inductor generated from it: info in per-rank graphs, an error in a shared
  graph. One that a pass of yours put there (--pass, record_pass, a framework's
  pipeline) is an error either way: it makes the pipeline's output rank-specific.
  A literal that differs across ranks but equals no rank-derived value: a warning.
  each rank's own chunk of a dimension (a split's chunk index, a slice's bounds,
  a local size; uneven splits included), whoever wrote it: info per rank, an
  error in a shared graph. A slice that is no chunk of the dimension on some
  rank: an error naming the chunk it should take.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from graphtrain_inspect.inspector.checks import CHECKS

    p.epilog = DEVICE_POLICY
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    add_capture_argument(p, nodes=True)
    p.add_argument("--json", action="store_true", help="one JSON document: findings and summary")
    p.add_argument(
        "--severity",
        choices=SEVERITIES,
        default=None,
        help="show findings of at least this severity (default: warning in the table, all in --json)",
    )
    p.add_argument(
        "--sarif",
        metavar="FILE",
        default=None,
        help="also write the findings as SARIF 2.1.0 to FILE (code scanning), each at its source line; "
        "the findings the table shows (errors and warnings unless --severity)",
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="list each finding's consequences under it (the findings that follow from the same root cause; "
        "by default counted under it; --json always lists them)",
    )
    p.add_argument("--check", action="append", choices=list(CHECKS), help="run only this check (repeatable)")
    p.add_argument("--width", type=int, default=None, help="line width of the table (default: the terminal's)")
    p.add_argument(
        "--shared-graph",
        action="store_true",
        help="every graph is shared: compiled on one rank and loaded by the others (device literals equal to a "
        "rank's own device and rank literals from the trace become errors; a compile-on-one-rank "
        "capture is recognised without this)",
    )
    add_jobs_argument(p, "the rank diffs")
    add_common_arguments(p)


def source_line_groups(findings: list) -> dict[str, int]:
    """`file:line` -> how many of the findings point there (pass-made nodes by their pass), most
    first: 51 literals are often 5 lines of model code, each traced into many nodes."""
    counts: dict[str, int] = {}
    for f in findings:
        src = f.source or {}
        if src.get("created_by"):
            key = f"pass {src['created_by']}"
        elif src.get("file") is not None:
            key = f"{os.path.basename(str(src['file']))}:{src.get('line')}"
        else:
            continue
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


ROW_INDENT = 4 + 8 + 29 + 6 + 11  # where a row's message starts: evidence and source lines align there
COLOURS = {"error": "red", "warning": "yellow", "info": "blue"}


def render(
    report, st: Style, width: int, hidden: int = 0, checked: str | None = None, every: bool = False
) -> list[str]:
    """The table: findings by kind (the most serious first), then by where they appear; each
    root cause's consequences counted under it, or (`every`) listed under it."""
    from graphtrain_inspect.inspector.checks.severity_filter import summary

    lines: list[str] = []
    findings = report.findings
    root = ((getattr(report.cap, "manifest", None) or {}).get("cwd")) or None  # the recorded program's
    by_kind: dict[str, list] = {}
    for f in findings:
        by_kind.setdefault(f.kind, []).append(f)
    for kind in _kinds_in_order(by_kind):
        lines.extend(_kind_block(kind, by_kind[kind], st, width, root, every))
    lines.extend(_trailer(report, st, checked))
    head, more = summary(findings, hidden, "--severity info shows them")
    errors = sum(1 for f in findings if f.severity == "error")
    lines.append(st(head, "red" if errors else ("yellow" if findings else "green")))
    if more:
        lines.append(st(more, "dim"))
    return lines


def _kinds_in_order(by_kind: dict[str, list]) -> list[str]:
    """The kinds found, the most serious first (an error must not scroll away under pages of
    info), in the checks' order within a severity."""
    from graphtrain_inspect.inspector.checks import CHECKS

    kinds = [k for k in list(CHECKS) + [k for k in by_kind if k not in CHECKS] if by_kind.get(k)]
    rank = SEVERITY_RANK
    kinds.sort(key=lambda k: min((rank[f.severity] for f in by_kind[k] if f.severity in rank), default=9))
    return kinds


def _kind_block(kind: str, fs: list, st: Style, width: int, root: str | None, every: bool) -> list[str]:
    from graphtrain_inspect.inspector.read.stages import pipeline_label

    c = {s: sum(1 for f in fs if f.severity == s) for s in SEVERITIES}
    counts = ", ".join(f"{n} {s}{'s' if n != 1 and s != 'info' else ''}" for s, n in c.items() if n)
    lines = [st(f"{kind}  ({counts})", "bold")]
    groups: dict[tuple, list] = {}
    for f in fs:
        groups.setdefault((f.pipeline, f.introduced_by, f.pass_), []).append(f)
    for (pipeline, intro, last), gfs in groups.items():
        pl = f"  [{pipeline_label(pipeline)}]" if pipeline else ""
        if any(getattr(f, "layer", "graph") == "codegen" for f in gfs):
            pl += "  [generated code]"
        lines.append(st(f"  {where_found(kind, intro, last)}{pl}", "cyan"))
        for f in gfs:
            lines.extend(_row(f, st, width, root))
            lines.extend(_consequence_rows(f, st, width, root) if every else _consequence_count(f, st, width))
    by_line = source_line_groups(fs)
    if len(fs) >= 4 and by_line and len(by_line) < len(fs):
        top = ", ".join(f"{where} ({n})" for where, n in list(by_line.items())[:5])
        rest = f", and {len(by_line) - 5} more" if len(by_line) > 5 else ""
        lines.append(st(f"  {len(fs)} {kind} findings at {len(by_line)} source line(s): {top}{rest}", "dim"))
    lines.append("")
    return lines


def where_found(kind: str, intro: str | None, last: str | None) -> str:
    """Where a group of findings appears: the pass that introduced them and the last that kept them."""
    if intro is None and kind == "training-failed":
        where = "in the run itself (how the training ended)"
    elif intro is None:
        where = "in the capture itself (not in a graph)"
    else:
        where = f"introduced by {intro}" if intro != "trace" else "already in the traced graph"
    if last and last != intro:
        where += f", still present after {last}"
    return where


def _row(f, st: Style, width: int, root: str | None, indent: str = "    ") -> list[str]:
    """A finding's line (severity, node, ranks, message), its first evidence line and its source line."""
    from graphtrain_inspect.inspector.checks.evidence import evidence_line
    from graphtrain_inspect.inspector.checks.root_causes import in_backward
    from graphtrain_inspect.inspector.read.source_lines import source_text

    sev = st(f"{f.severity.upper():<7}", COLOURS.get(f.severity, "bold"))
    node = (f"{f.subgraph}:" if f.subgraph else "") + (f.node or "-")
    ranks = format_ranks(f.ranks) if f.ranks else "-"
    pad = len(indent) - 4  # a consequence's row sits further in, its columns with it
    head = f"{indent}{sev} {truncate(node, 28 - pad):<{28 - pad}} ranks {truncate(ranks, 10):<10} "
    room = max(20, width - ROW_INDENT)
    lines = [head + truncate(f.message, room)]
    ev = evidence_line(f)
    if ev:
        lines.append(st(" " * ROW_INDENT + truncate(ev, room), "dim"))
    src = source_text(f.source, root)
    if src:
        # the model's line reads "at model.py:42 ..."; a pass-made node's "created by pass X [at ...]";
        # a backward node's stack is the forward op's it differentiates: "at backward of model.py:42"
        at = "at " if f.source.get("file") and not f.source.get("created_by") else ""
        if at and in_backward(f):
            at = "at backward of "
        lines.append(" " * ROW_INDENT + st(at, "dim") + truncate(src, max(20, width - ROW_INDENT - len(at))))
    return lines


def _consequence_count(f, st: Style, width: int) -> list[str]:
    from graphtrain_inspect.inspector.checks.root_causes import consequence_label

    if not f.consequences:
        return []
    n = len(f.consequences)
    text = f"+ {n} consequence{'s' if n != 1 else ''} (check --all lists them): " + ", ".join(
        consequence_label(c, f.kind) for c in f.consequences
    )
    return [st(" " * ROW_INDENT + truncate(text, max(20, width - ROW_INDENT)), "dim")]


def _consequence_rows(f, st: Style, width: int, root: str | None) -> list[str]:
    from graphtrain_inspect.inspector.checks.root_causes import consequence_label

    lines: list[str] = []
    for i, c in enumerate(f.consequences, 1):
        lines.append(st(f"      consequence {i} of {len(f.consequences)}: {consequence_label(c, f.kind)}", "dim"))
        lines.extend(_row(c, st, width, root, indent="      "))
    return lines


def _trailer(report, st: Style, checked: str | None) -> list[str]:
    """The checks that could not run (one line per reason), the notes and what was checked."""
    lines: list[str] = []
    reasons: dict[str, list[str]] = {}
    for n in report.not_run:  # checks skipped for one reason on one line
        reasons.setdefault(n.reason, []).append(n.check)
    for reason, checks in reasons.items():
        sep = " " if reason.startswith("raised ") else ": "  # "not run: recompile raised KeyError: 'x'"
        lines.append(st(f"not run: {', '.join(checks)}{sep}{reason}", "yellow"))
    for n in report.notes:
        lines.append(st(f"note: {n}", "dim"))
    if checked:
        lines.append(st(checked, "dim"))
    return lines


def _write_sarif(path: str, report, findings: list) -> None:
    from dataclasses import replace
    from importlib.metadata import PackageNotFoundError, version

    from graphtrain_inspect.inspector.cli.common import CommandError
    from graphtrain_inspect.inspector.cli.sarif import to_sarif

    try:
        v = version("graphtrain-inspect")
    except PackageNotFoundError:
        v = None
    doc = to_sarif(replace(report, findings=findings), v)
    try:
        with open(path, "wb") as fh:
            fh.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) + b"\n")
    except OSError as e:
        raise CommandError(f"{path}: cannot write the SARIF file: {e.strerror or e}") from None


def run(args: argparse.Namespace) -> int:
    import shutil

    from graphtrain_inspect.inspector.checks import check_report
    from graphtrain_inspect.inspector.checks.severity_filter import at_least, hidden_info
    from graphtrain_inspect.inspector.read.capture_files import integrity_notes
    from graphtrain_inspect.inspector.read.simulated import simulated_line

    cap = open_or_fail(args.dir, args.source)
    with cap:
        report = check_report(cap, args.check, shared_graph=args.shared_graph, jobs=jobs_of(args))
        from graphtrain_inspect.inspector.checks.coverage import checked_line

        checked = checked_line(cap, report, args.check)
        sim = simulated_line(getattr(cap, "manifest", None))
        if sim:  # findings compare only the ranks that ran; say which, of how many
            report.notes.append(sim)
        report.notes.extend(integrity_notes(cap))  # files replay would not read without --trust
        has_error = any(f.severity == "error" for f in report.findings)
        everything = report.findings
        report.findings = at_least(everything, args.severity or ("info" if args.json else None))
        hidden = hidden_info(everything, args.severity) if not args.json else 0
        if args.sarif:
            _write_sarif(args.sarif, report, at_least(everything, args.severity))
        print_read_errors(cap)
        if args.json:
            sys.stdout.write(
                orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n"
            )
        else:
            tty = want_color("auto")
            width = args.width or (shutil.get_terminal_size((120, 40)).columns if tty else 100_000)
            st = Style(want_color(args.color))
            lines = render(report, st, width, hidden, checked, every=args.all)
            sys.stdout.write("\n".join(lines) + "\n")
    return 1 if has_error else 0
