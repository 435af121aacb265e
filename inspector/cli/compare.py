"""`graphtrain-inspect compare BASE NEW [--pass NAME [--rank R]] [--json] [--severity LEVEL] [--all]`

Two runs of one program (a pass changed, torch upgraded, another mesh): their pipelines, passes
and ranks paired by identity (inspector.checks.two_runs), and for each pass whether its output
graph changed on each pair of ranks, normalized as a rank diff is (node names, process-group
names, own device): the same where the captures' digests agree, without decoding either graph.
A pass renamed, added or removed is said as such; a pass whose input had already changed says
so. Then the checks run on both runs and the findings that are new, gone, or changed in grade
or ranks are listed (inspector.checks.finding_changes).

BASE and NEW are capture directories, TORCH_TRACE directories or log files, or names of bundled
sample captures (`ls --list-samples`). Ranks pair by their mesh coordinates where both runs have
meshes of the same dimensions (2 ranks against 4: the ranks with no counterpart are named), else
by number.

* `--pass NAME [--rank R]`: the pass's output graph in BASE against NEW, node by node and as text,
  as `diff` prints a diff (R: a rank of BASE, with its counterpart in NEW; default: the ranks where
  it changed, else the lowest).
* `--json`: one document with the rank pairs, every paired pass and its status on each pair of
  ranks, and the findings that changed.

Exit status: 0 when nothing new is wrong, 1 when NEW has an error finding BASE has not (a new one,
or one graded up to error), 2 when a run cannot be read or the pass/rank does not exist.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

import orjson

from graphtrain_inspect.capture.shared.terminal_text import Style, truncate, want_color
from graphtrain_inspect.inspector.checks.findings import SEVERITIES
from graphtrain_inspect.inspector.cli.common import (
    CommandError,
    add_common_arguments,
    add_jobs_argument,
    diff_title,
    jobs_of,
    open_or_fail,
    print_read_errors,
    write_diffs,
)

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.checks.finding_changes import FindingChange
    from graphtrain_inspect.inspector.checks.two_runs import RankChange, StageChange, TwoRuns


def add_arguments(p: argparse.ArgumentParser) -> None:
    where = "capture directory, TORCH_TRACE directory or log file, or a bundled sample's name"
    p.add_argument("base", metavar="BASE", help=f"the run compared against: {where}")
    p.add_argument("new", metavar="NEW", help=f"the run compared: {where}")
    p.add_argument(
        "--pass", dest="pass_name", metavar="NAME", help="the pass's output in BASE against NEW (name, #SEQ, 'trace')"
    )
    p.add_argument("--rank", type=int, help="with --pass: this rank of BASE against its counterpart in NEW")
    p.add_argument("--pipeline", help="with --pass: only applications in this pipeline (index or compile id)")
    p.add_argument("--role", help="with --pass: only this output role (out, fw, bw ...)")
    p.add_argument("--occurrence", type=int, help="with --pass: only the N-th application of the pass (0-based)")
    p.add_argument("--nodes", action="store_true", help="with --pass: node changes only, no text diff")
    p.add_argument("--text", action="store_true", help="with --pass: text diff only, no node changes")
    p.add_argument("--side-by-side", action="store_true", help="with --pass: text diff in two columns")
    p.add_argument("--context", type=int, default=3, help="with --pass: lines of context in the text diff")
    p.add_argument("--stack", action="store_true", help="with --pass: also compare stack traces")
    p.add_argument("--width", type=int, help="line width (default: the terminal's)")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.add_argument(
        "--severity",
        choices=SEVERITIES,
        default=None,
        help="show changed findings of at least this severity (default: warning; all in --json)",
    )
    p.add_argument("--all", action="store_true", help="list every pass, also in pipelines where none changed")
    p.add_argument("--no-check", action="store_true", help="compare the graphs only: no checks, no findings")
    p.add_argument(
        "--shared-graph", action="store_true", help="run the checks as `check --shared-graph` does, on both runs"
    )
    add_jobs_argument(p, "the checks' rank diffs")
    add_common_arguments(p)


def resolve_pair(given: str) -> str:
    """A path as given, or a bundled sample's (unpacked) where no such path exists."""
    if os.path.exists(given):
        return given
    from graphtrain_inspect.inspector.read import bundled

    if given in bundled.names():
        return str(bundled.path_of(given))
    return given  # reading it says what is wrong with it


def run(args: argparse.Namespace) -> int:
    from graphtrain_inspect.inspector.checks.two_runs import TwoRuns

    base = open_or_fail(resolve_pair(args.base), args.source)
    with base:
        new = open_or_fail(resolve_pair(args.new), args.source)
        with new:
            print_read_errors(base)
            print_read_errors(new)
            runs = TwoRuns(base, new)
            if args.pass_name:
                return _pass_diffs(runs, args)
            return _compare(runs, args)


def _compare(runs: "TwoRuns", args: argparse.Namespace) -> int:
    from graphtrain_inspect.inspector.checks.finding_changes import match_findings

    stages = runs.compare()
    changes: list[FindingChange] = []
    if not args.no_check:
        from graphtrain_inspect.inspector.checks import check_report

        jobs = jobs_of(args)
        rb = check_report(runs.base, shared_graph=args.shared_graph, jobs=jobs)
        rn = check_report(runs.new, shared_graph=args.shared_graph, jobs=jobs)
        changes = match_findings(rb.findings, rn.findings, runs)
    code = 1 if any(c.adds_error() for c in changes) else 0
    if args.json:
        doc = _json(runs, stages, changes, args, code)
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n")
    else:
        import shutil

        width = args.width or (shutil.get_terminal_size((120, 40)).columns if want_color("auto") else 100_000)
        st = Style(want_color(args.color))
        sys.stdout.write("\n".join(_lines(runs, stages, changes, args, st, width, code)) + "\n")
    return code


# -- the text ---------------------------------------------------------------------------------


def _run_line(what: str, cap: Any, directory: str) -> str:
    ranks = cap.ranks
    return f"{what} {directory}  ({len(ranks)} rank{'s' if len(ranks) != 1 else ''}, {cap.kind})"


def rank_lines(runs: "TwoRuns", st: Style) -> list[str]:
    """How the ranks paired, and those with no counterpart."""
    style = {"note": ("dim",), "unpaired": ("yellow",)}
    return [st(text, *style.get(kind, ())) for text, kind in runs.pairing_lines()]


def stage_text(runs: "TwoRuns", s: "StageChange") -> tuple[str, str]:
    """What a paired pass did, in a few words, and its colour."""
    colour = {"added": "green", "removed": "red", "same": "dim", "input changed": "yellow"}
    return runs.describe(s), colour.get(s.status, "red")


def _lines(
    runs: "TwoRuns",
    stages: list["StageChange"],
    changes: list["FindingChange"],
    args: argparse.Namespace,
    st: Style,
    width: int,
    code: int,
) -> list[str]:
    from graphtrain_inspect.inspector.read.stages import pipeline_label

    out = [st(_run_line("base:", runs.base, args.base), "bold"), st(_run_line("new: ", runs.new, args.new), "bold")]
    out.extend(rank_lines(runs, st))
    out.append("")
    by_pl: dict[str, list[StageChange]] = {}
    for s in stages:
        by_pl.setdefault(s.pipeline, []).append(s)
    name_w = min(40, max((len(s.label()) for s in stages), default=10) + 2)
    for pl, ss in by_pl.items():
        label = pipeline_label(pl) or "pipeline"
        if not args.all and all(s.status == "same" and not s.renamed for s in ss):
            out.append(st(f"{label}: {len(ss)} stages, the same on every rank", "dim"))
            continue
        out.append(st(label, "bold", "cyan"))
        for s in ss:
            if not args.all and s.status == "same" and not s.renamed:
                continue
            text, colour = stage_text(runs, s)
            mark = {"added": "+", "removed": "-"}.get(s.status, " ")
            head = f"  {mark} {truncate(s.label(), name_w - 2):<{name_w}}"
            out.append(head + st(truncate(text, max(20, width - len(head))), colour))
        if not args.all:
            same = sum(1 for s in ss if s.status == "same" and not s.renamed)
            if same:
                out.append(st(f"    ({same} other stage{'s' if same != 1 else ''} the same on every rank)", "dim"))
    out.append("")
    out.append(st(stage_summary(stages), "bold"))
    if args.no_check:
        return out
    shown = _shown(changes, args.severity)
    out.append(st(finding_summary(changes, len(changes) - len(shown)), "bold"))
    out.extend(_finding_lines(shown, st, width))
    if code:
        n = sum(1 for c in changes if c.adds_error())
        out.append(st(f"{n} new error{'s' if n != 1 else ''} in the new run", "red"))
    else:
        out.append(st("nothing new is wrong", "green"))
    return out


def _counts(stages: list["StageChange"]) -> dict[str, int]:
    c: dict[str, int] = {}
    for s in stages:
        c[s.status] = c.get(s.status, 0) + 1
    c["renamed"] = sum(1 for s in stages if s.renamed)
    return c


def stage_summary(stages: list["StageChange"]) -> str:
    c = _counts(stages)
    words = {"input changed": "changed with their input"}
    parts = [
        f"{c[k]} {words.get(k, k)}"
        for k in ("changed", "input changed", "same", "added", "removed", "renamed")
        if c.get(k)
    ]
    return f"{len(stages)} stage{'s' if len(stages) != 1 else ''}: " + ", ".join(parts)


def _shown(changes: list["FindingChange"], severity: str | None) -> list["FindingChange"]:
    """The changes whose finding (in either run) is at least `severity` (default warning)."""
    limit = SEVERITIES.index(severity or "warning")

    def level(c: FindingChange) -> int:
        fs = [f for f in (c.base, c.new) if f is not None]
        return min((SEVERITIES.index(f.severity) if f.severity in SEVERITIES else 9) for f in fs)

    return [c for c in changes if level(c) <= limit]


def finding_summary(changes: list["FindingChange"], hidden: int) -> str:
    c: dict[str, int] = {}
    for x in changes:
        c[x.status] = c.get(x.status, 0) + 1
    if not changes:
        return "findings: the same in both runs"
    parts = ", ".join(f"{n} {k}" for k, n in c.items())
    more = f" ({hidden} about info findings not shown: --severity info shows them)" if hidden else ""
    return f"findings that changed: {parts}{more}"


def _finding_lines(changes: list["FindingChange"], st: Style, width: int) -> list[str]:
    from graphtrain_inspect.capture.shared.rank_ranges import format_ranks
    from graphtrain_inspect.inspector.read.stages import pipeline_label

    colours = {"error": "red", "warning": "yellow", "info": "blue"}
    out = []
    for c in changes:
        f = c.finding
        if c.status == "graded":
            sev = f"{c.base.severity} -> {f.severity}"  # type: ignore[union-attr]  # graded: both runs have it
        else:
            sev = f.severity
        node = (f"{f.subgraph}:" if f.subgraph else "") + (f.node or "-")
        ranks = format_ranks(f.ranks) if f.ranks else "-"
        if c.status in ("ranks", "graded", "moved") and c.base is not None and c.base.ranks != f.ranks:
            ranks = f"{format_ranks(c.base.ranks) if c.base.ranks else '-'} -> {ranks}"
        head = f"  {c.status.upper():<7} {sev:<16} {f.kind:<22} {truncate(node, 24):<24} ranks {ranks}"
        out.append(st(truncate(head, max(40, width)), colours.get(f.severity, "bold")))
        intro = f.introduced_by
        where = introduced_words(intro)
        if c.status == "moved" and c.base is not None:
            where = f"{introduced_words(c.base.introduced_by)}, now {where}"
        pl = f" [{pipeline_label(f.pipeline)}]" if f.pipeline else ""
        out.append(st(truncate(f"          {where}{pl}: {f.message}", max(40, width)), "dim"))
    return out


def introduced_words(intro: str | None) -> str:
    """Where a finding comes in, as `check` says it."""
    if intro is None:
        return "in the capture itself"
    return "already in the traced graph" if intro == "trace" else f"introduced by {intro}"


def _json(
    runs: "TwoRuns", stages: list["StageChange"], changes: list["FindingChange"], args: argparse.Namespace, code: int
) -> dict[str, Any]:
    shown = _shown(changes, args.severity or "info")
    fc: dict[str, int] = {}
    for x in changes:
        fc[x.status] = fc.get(x.status, 0) + 1
    return {
        "base": {"dir": args.base, "ranks": runs.base.ranks, "source": runs.base.kind},
        "new": {"dir": args.new, "ranks": runs.new.ranks, "source": runs.new.kind},
        "ranks": runs.ranks.to_json(),
        "stages": [s.to_json() for s in stages],
        "findings": None if args.no_check else [c.to_json() for c in shown],
        "summary": {
            "stages": _counts(stages),
            "findings": None if args.no_check else fc,
            "new_errors": sum(1 for c in changes if c.adds_error()),
            "exit": code,
        },
    }


# -- one pass's output, base against new ---------------------------------------------------------


def _pass_diffs(runs: "TwoRuns", args: argparse.Namespace) -> int:
    from graphtrain_inspect.inspector.checks.two_runs import SAME

    rp = runs.ranks
    if args.rank is not None:
        pairs = [(b, n) for b, n in rp.pairs if b == args.rank]
        if not pairs:
            raise CommandError(
                f"no rank {args.rank} of {args.base} with a counterpart in {args.new} "
                f"(paired base ranks: {[b for b, _ in rp.pairs]})"
            )
    else:
        pairs = list(rp.pairs)
    stages = _select(runs.find(args.pass_name, args.rank), args)
    if not stages:
        names = list(dict.fromkeys(k.pass_name for k in [*runs.base_index.keys, *runs.new_index.keys]))
        shown = ", ".join(names[:20]) + (f", ... ({len(names) - 20} more)" if len(names) > 20 else "")
        raise CommandError(f"no pass {args.pass_name!r} in {args.base} or {args.new} (passes: {shown})")
    runs.compare()
    st = Style(want_color(args.color))
    out: list[str] = []
    docs: list[dict] = []
    for s in stages:
        if s.base is None or s.new is None:
            which = "base" if s.base is not None else "new"
            out.append(st(f"{s.label()} ({s.pipeline}): ran in the {which} run only", "bold", "magenta"))
            docs.append({"stage": s.label(), "pipeline": s.pipeline, "only_in": which})
            continue
        chosen = [c for c in s.ranks if (c.base_rank, c.new_rank) in pairs]
        if args.rank is None:  # the ranks where it changed, else the lowest pair
            chosen = [c for c in chosen if c.status != SAME] or chosen[:1]
        if not chosen:
            out.append(st(f"{s.label()} ({s.pipeline}): on none of the ranks asked for", "dim"))
            continue
        for c in chosen:
            _one(runs, s, c, args, st, out, docs)
    write_diffs(docs, out, args.json)
    return 0


def _one(
    runs: "TwoRuns", s: "StageChange", c: "RankChange", args: argparse.Namespace, st: Style, out: list, docs: list
) -> None:
    from graphtrain_inspect.inspector.checks.two_runs import run_diff
    from graphtrain_inspect.inspector.cli.diff import node_lines, text_lines
    from graphtrain_inspect.inspector.diff import graph_diff as gdiff
    from graphtrain_inspect.inspector.read.stages import pipeline_label

    b, n = c.base_rank, c.new_rank
    where = runs.ranks.label(b, n)
    title = diff_title(f"{s.label()} on {where}", pipeline_label(s.pipeline), "base", "new")
    out.append(st(title, "bold", "magenta"))
    assert s.base is not None and s.new is not None  # a paired stage
    sb, sn = runs.base_index.across(s.base).get(b), runs.new_index.across(s.new).get(n)
    if sb is None or sn is None:
        which = "base" if sb is not None else "new"
        out.append(st(f"  ran on {where} in the {which} run only", "red"))
        docs.append({"stage": s.label(), "pipeline": s.pipeline, "base_rank": b, "new_rank": n, "only_in": which})
        return
    d = run_diff(runs.base, b, sb.gid, runs.new, n, sn.gid, stack=args.stack)
    if d is None:
        out.append(st("  graph tables unreadable in one of the runs", "red"))
        return
    if args.json:
        docs.append({"stage": s.label(), "pipeline": s.pipeline, "base_rank": b, "new_rank": n, **d.to_json()})
        return
    if d.empty:
        out.append(st("  the same in both runs (after normalization)", "green"))
        return
    if not args.text:
        out.extend(node_lines(d, st))
    if not args.nodes:
        la = gdiff.rank_text(runs.base, b, sb.gid) or []
        ln = gdiff.rank_text(runs.new, n, sn.gid) or []
        out.extend(text_lines(la, ln, f"base rank {b} {sb.gid}", f"new rank {n} {sn.gid}", args, st))


def _select(stages: list["StageChange"], args: argparse.Namespace) -> list["StageChange"]:
    if args.pipeline is not None:
        p = args.pipeline
        stages = [s for s in stages if s.pipeline.split("#")[0] == p or s.pipeline == p or s.pipeline.endswith("#" + p)]
    if args.role:
        stages = [s for s in stages if s.key.role == args.role]
    if args.occurrence is not None:
        stages = [s for s in stages if s.key.occurrence == args.occurrence]
    return stages
