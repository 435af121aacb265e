"""`graphtrain-inspect diff DIR --pass NAME [--rank R | --ranks A,B] [--side-by-side]`

* `--pass NAME [--rank R]`: what the pass did on rank R (default: the lowest rank): the graph it
  received against each graph it produced, node by node (aligned structurally: added, removed,
  changed args, changed metadata), then as text (unified diff of the code without stack comments).
* `--pass NAME --ranks A,B`: the pass's output graph on rank A against rank B, normalized (process
  group names through each rank's table, each rank's own device, no stack comments): empty when
  the ranks agree. `--pass trace` compares the traced graphs.

NAME is a pass name, `module:qualname`, or `#SEQ` (on the chosen rank). When a pass ran more than
once (several pipelines, fw and bw), every application is shown unless `--occurrence N`,
`--pipeline K` or `--role ROLE` picks one. Coloured in a terminal, plain when piped. Exit 0; 2 when
DIR cannot be read or the pass/rank does not exist.
"""

from __future__ import annotations

import argparse
import shutil
from typing import TYPE_CHECKING

from graphtrain_inspect.capture.shared.terminal_text import Style, truncate, want_color
from graphtrain_inspect.inspector.cli.common import (
    CommandError,
    add_capture_argument,
    add_common_arguments,
    add_jobs_argument,
    diff_title,
    jobs_of,
    open_or_fail,
    print_read_errors,
    rank_pair,
    write_diffs,
)

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.diff.node_diff import GraphDiff


# a graph of at least this many nodes has its text diff made in a forked child beside its node
# changes (cli/forked_work.py): on the 100k-node capture each half took most of a second; below, the
# fork costs more than it saves
BESIDE_NODES = 20_000


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_capture_argument(p, nodes=True)
    p.add_argument(
        "--pass",
        dest="pass_name",
        metavar="NAME",
        help="pass name, module:qualname, #SEQ, or 'trace' (required unless --output-code)",
    )
    p.add_argument(
        "--output-code",
        action="store_true",
        help="Inductor's generated code instead of a pass: --ranks A,B, or --compiles K1,K2 on one rank",
    )
    p.add_argument(
        "--compiles",
        metavar="K1,K2",
        help="with --output-code: two compiles' generated code on one rank (keys as 0/0#0)",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--rank", type=int, help="pass diff on this rank (default: lowest rank)")
    g.add_argument("--ranks", metavar="A,B", help="rank diff of the pass's output between ranks A and B")
    p.add_argument("--side-by-side", action="store_true", help="text diff in two columns")
    p.add_argument("--occurrence", type=int, help="only the N-th application of the pass (0-based)")
    p.add_argument("--pipeline", help="only applications in this pipeline (index or compile id)")
    p.add_argument("--role", help="only this output role (out, fw, bw ...)")
    p.add_argument("--nodes", action="store_true", help="node changes only, no text diff")
    p.add_argument("--text", action="store_true", help="text diff only, no node changes")
    p.add_argument("--stack", action="store_true", help="also compare stack traces")
    p.add_argument("--context", type=int, default=3, help="lines of context in the text diff")
    p.add_argument("--width", type=int, help="line width for --side-by-side (default: the terminal's)")
    p.add_argument("--json", action="store_true", help="node changes as one JSON document")
    add_jobs_argument(p, "a large graph's text diff, made beside its node changes")
    add_common_arguments(p)


def node_lines(d, st: Style, limit: int = 400) -> list[str]:
    out = []
    c = d.counts
    out.append(st(f"nodes: {c['added']} added, {c['removed']} removed, {c['changed']} changed", "bold"))
    n = 0
    for sub in d.subgraphs:
        changes = sub.changes()
        if not changes:
            continue
        if sub.path:
            out.append(
                st(
                    f"  subgraph {sub.path}" + (f" ({sub.status})" if sub.status in ("added", "removed") else ""),
                    "cyan",
                )
            )
        for ch in changes:
            n += 1
            if n > limit:
                out.append(st(f"  ... {sum(len(s.changes()) for s in d.subgraphs) - limit} more", "dim"))
                return out
            text = ch.summary()
            colour = {"added": "green", "removed": "red", "changed": "yellow"}[ch.status]
            out.append("  " + st(text, colour))
    return out


def text_lines(a_lines: list[str], b_lines: list[str], a_label: str, b_label: str, args, st: Style) -> list[str]:
    from graphtrain_inspect.inspector.diff.graph_diff import side_by_side, text_diff

    if args.side_by_side:
        width = args.width or shutil.get_terminal_size((160, 40)).columns
        col = max(20, (width - 3) // 2)
        a_lines, b_lines = _squeeze(a_lines), _squeeze(b_lines)
        out = [st(f"{truncate(a_label, col):<{col}} | {truncate(b_label, col)}", "bold")]
        rows = side_by_side(a_lines, b_lines, context=args.context)
        if not rows:
            out.append(st("(no text differences)", "dim"))
        for mark, left, right in rows:
            l_txt = f"{truncate(left, col):<{col}}"
            r_txt = truncate(right, col)
            if mark == "~":
                out.append(st(f"{l_txt} ~ {r_txt}", "dim"))
            elif mark == " ":
                out.append(f"{l_txt}   {r_txt}")
            elif mark == "|":
                out.append(st(l_txt, "red") + " | " + st(r_txt, "green"))
            elif mark == "<":
                out.append(st(l_txt, "red") + " <")
            else:
                out.append(f"{'':<{col}} > " + st(r_txt, "green"))
        return out
    lines = text_diff(a_lines, b_lines, a_label, b_label, context=args.context)
    if not lines:
        return [st("(no text differences)", "dim")]
    out = []
    for line in lines:
        if line.startswith("+++") or line.startswith("---"):
            out.append(st(line, "bold"))
        elif line.startswith("@@"):
            out.append(st(line, "cyan"))
        elif line.startswith("+"):
            out.append(st(line, "green"))
        elif line.startswith("-"):
            out.append(st(line, "red"))
        else:
            out.append(line)
    return out


def _squeeze(lines: list[str]) -> list[str]:
    """Halve leading indentation: two columns of FX code need the width."""
    out = []
    for line in lines:
        body = line.lstrip(" ")
        out.append(" " * ((len(line) - len(body)) // 2) + body)
    return out


def run(args: argparse.Namespace) -> int:
    if getattr(args, "output_code", False):
        from graphtrain_inspect.inspector.cli import diff_output_code

        return diff_output_code.run(args, text_lines)
    if not args.pass_name:
        raise CommandError("--pass NAME (or --output-code) is required")
    from graphtrain_inspect.inspector.read.stages import StageIndex

    cap = open_or_fail(args.dir, args.source)
    st = Style(want_color(args.color))
    out: list[str] = []
    docs: list[dict] = []
    with cap:
        print_read_errors(cap)
        if args.ranks:
            _rank_diffs(cap, StageIndex(cap), args, st, out, docs)
        else:
            _pass_diffs(cap, args, st, out, docs)
    write_diffs(docs, out, args.json)
    return 0


def _rank_diffs(cap, index, args: argparse.Namespace, st: Style, out: list[str], docs: list[dict]) -> None:
    """`--ranks A,B`: the graphs after the pass on two ranks."""
    from graphtrain_inspect.inspector.diff.rank_diffs import rank_diff

    ra, rb = rank_pair(cap, args.ranks, args.dir, "--ranks wants two ranks like 0,1")
    keys = index.find(args.pass_name, ra) or index.find(args.pass_name)
    keys = _select(keys, args)
    if not keys:
        raise CommandError(f"no pass {args.pass_name!r} on rank {ra} ({_pass_choices(cap, ra)})")
    for key in keys:
        stages = index.across(key)
        title = diff_title(key.label(), key.pipeline_label(), f"rank {ra}", f"rank {rb}")
        out.append(st(title, "bold", "magenta"))
        missing = [r for r in (ra, rb) if r not in stages]
        if missing:
            out.append(st(f"  rank {missing[0]} has no such graph (the pass did not run there, or raised)", "red"))
            docs.append({"stage": key.label(), "pipeline": key.pipeline, "missing_on": missing})
            continue
        ga, gb = stages[ra].gid, stages[rb].gid
        # the text diff started first, beside the node changes where the graph is large (graphs of
        # the same id agree: rank_diff says so without reading them). The child makes the whole
        # text diff: sending each rank's normalized code back instead (125k lines each on the
        # 100k-node capture) cost more than the matching it would leave to this process
        text = _text_beside(cap, ra, ga, args, ga != gb, 0, _rank_text, cap, ra, rb, ga, gb, args, st)
        d = rank_diff(cap, key, ra, rb, index=index)
        if d is None:
            text.cancel()
            out.append(st("  graph tables unreadable on one of the ranks", "red"))
            continue
        if args.json:  # what --json prints alone
            docs.append({"stage": key.label(), "pipeline": key.pipeline, **d.to_json()})
        if d.empty:
            text.cancel()  # no text diff is shown where the ranks agree
            out.append(st(f"  ranks {ra} and {rb} agree (after normalization)", "green"))
            continue
        if not args.text:
            out.extend(node_lines(d, st))
        out.extend(text.result())


def _rank_text(cap, ra: int, rb: int, ga: str, gb: str, args: argparse.Namespace, st: Style) -> list[str]:
    """The text diff of a stage's graphs on two ranks, normalized, as printed."""
    from graphtrain_inspect.inspector.diff import graph_diff as gdiff

    la = gdiff.rank_text(cap, ra, ga) or []
    lb = gdiff.rank_text(cap, rb, gb) or []
    return text_lines(la, lb, f"rank {ra} {ga}", f"rank {rb} {gb}", args, st)


def _pass_diffs(cap, args: argparse.Namespace, st: Style, out: list[str], docs: list[dict]) -> None:
    """`--pass NAME [--rank R]`: each run of the pass on one rank, before against after."""
    rank = args.rank if args.rank is not None else (cap.ranks[0] if cap.ranks else 0)
    if rank not in cap.ranks:
        raise CommandError(f"no rank {rank} in {args.dir} (ranks: {cap.ranks})")
    if args.pass_name == "trace":
        raise CommandError("the traced graph has no 'before': compare it across ranks with --ranks A,B")
    found = cap.find_passes(args.pass_name, rank)
    passes = _select_passes([p for p in found if p.before is not None], args)
    first = _select_passes([p for p in found if p.before is None and p.status == "ok"], args)
    if not passes and first:
        # the pass made the first graph of its pipeline (torch's dynamo): show that graph whole
        out.extend(_first_graph_lines(cap, rank, first, args, st))
    elif not passes:
        cut = [p for p in found if p.status == "incomplete"]
        if cut:  # listed by name below, so say why it cannot be diffed
            raise CommandError(
                f"pass #{cut[0].seq} {cut[0].name} started on rank {rank} and never finished "
                "(the rank stopped inside it): no graph after it to diff"
            )
        raise CommandError(f"no pass {args.pass_name!r} on rank {rank} ({_pass_choices(cap, rank)})")
    for p in passes:
        _one_pass(cap, rank, p, args, st, out, docs)


def _one_pass(cap, rank: int, p, args: argparse.Namespace, st: Style, out: list[str], docs: list[dict]) -> None:
    from graphtrain_inspect.inspector.diff import graph_diff as gdiff

    roles = [r for r in p.after if not args.role or r == args.role]
    title = diff_title(f"#{p.seq} {p.name} on rank {rank}", _where(p), "before", "after")
    out.append(st(title, "bold", "magenta"))
    if p.status != "ok":
        out.append(
            st(
                f"  {p.status}" + (f": {p.exception.get('type')}: {p.exception.get('message')}" if p.exception else ""),
                "red",
            )
        )
        if not p.after:
            return
    # the text diffs started first, each beside the node changes where the graph is large (a
    # graph the pass returned as it was, the same id before and after, has none; no more children
    # at once than -j leaves beside this process)
    texts: dict = {}
    for role in roles:
        gid, running = p.after[role], sum(t.forked for t in texts.values())
        made = (_pass_text, cap, rank, p, role, args, st)
        texts[role] = _text_beside(cap, rank, gid, args, p.before != gid, running, *made)
    pairs: list[tuple[str, GraphDiff | None]]
    if args.text and not args.json:
        pairs = [(role, None) for role in roles]  # the text alone: the node changes are not made
    else:
        pairs = [(role, d) for role, d in gdiff.pass_diffs(cap, rank, p, stack=args.stack) if role in texts]
    for role, d in pairs:
        if role != "out" or len(roles) > 1:
            out.append(st(f" output {role}: {p.before} -> {p.after[role]}", "cyan"))
        else:
            out.append(st(f" {p.before} -> {p.after[role]}", "cyan"))
        text = texts[role]
        if d is not None:
            if args.json:  # what --json prints alone
                docs.append({"pass": p.name, "seq": p.seq, "rank": rank, "role": role, **d.to_json()})
        elif not args.text:
            text.cancel()
            out.append(st("  graph tables unreadable", "red"))
            continue
        if p.before == p.after[role] and (d is None or d.empty):
            text.cancel()
            out.append(st("  the pass returned the graph unchanged", "dim"))
            continue
        if d is not None and not args.text:
            out.extend(node_lines(d, st))
        out.extend(text.result())


def _pass_text(cap, rank: int, p, role: str, args: argparse.Namespace, st: Style) -> list[str]:
    """The text diff of one output of a pass: its lines as printed (none where the code is not
    there)."""
    from graphtrain_inspect.inspector.diff import graph_diff as gdiff

    texts = gdiff.pass_text_diff(cap, rank, p, role)
    if texts is None:
        return []
    after = f"after #{p.seq} {p.name}" + ("" if role == "out" else f" [{role}]")
    return text_lines(texts[0], texts[1], f"before #{p.seq} {p.name}", after, args, st)


def _text_beside(cap, rank: int, gid: str, args: argparse.Namespace, wanted: bool, running: int, fn, *fn_args):
    """`fn(*fn_args)` (text lines) as a Beside: made in a forked child where the graph is large and
    -j leaves a process beside this one and the `running` children, else when asked; nothing made
    where not `wanted`, with --nodes or with --json."""
    from graphtrain_inspect.inspector.cli.forked_work import Beside

    if not wanted or args.nodes or args.json:
        return Beside(list, fork=False)
    return Beside(fn, *fn_args, fork=jobs_of(args) > 1 + running and _large(cap, rank, gid))


def _large(cap, rank: int, gid: str) -> bool:
    """The graph has at least BESIDE_NODES nodes, by its record (unknown: not large)."""
    ref = cap.graph(rank, gid)
    return ref is not None and isinstance(ref.nodes, int) and ref.nodes >= BESIDE_NODES


def _where(p) -> str:
    return f"pipeline {p.pipeline}" + (f", compile {p.compile_id}" if p.compile_id else "")


def _pass_choices(cap, rank: int) -> str:
    """What --pass accepts on the rank, for the error that names a pass it does not have."""
    names = list(dict.fromkeys(p.name for p in cap.passes(rank)))
    shown = ", ".join(["trace", *names[:20]]) + (f", ... ({len(names) - 20} more)" if len(names) > 20 else "")
    return f"passes: {shown}; or #SEQ, module:qualname"


def _first_graph_lines(cap, rank: int, passes, args, st: Style) -> list[str]:
    """A pass with no graph before it (it made its pipeline's first graph: torch's dynamo): its
    output graph in full, as lines added to nothing."""
    from graphtrain_inspect.inspector.diff.graph_diff import normalize_code

    out: list[str] = []
    for p in passes:
        for role, gid in p.after.items():
            if args.role and role != args.role:
                continue
            out.append(
                st(
                    diff_title(f"#{p.seq} {p.name} on rank {rank}", _where(p), "nothing", "its graph"),
                    "bold",
                    "magenta",
                )
            )
            out.append(
                st(
                    f"  #{p.seq} {p.name} made the first graph of its pipeline ({gid}, "
                    f"{cap.node_count(rank, gid)} nodes): "
                    "shown whole; --ranks A,B compares it across ranks",
                    "dim",
                )
            )
            code = cap.graph_code(rank, gid)
            if code is None:
                out.append(st("  graph code unreadable", "red"))
            elif not args.nodes:
                out.extend(text_lines([], normalize_code(code), "(nothing)", f"#{p.seq} {p.name} {gid}", args, st))
    return out


def _select(keys, args):
    if args.pipeline is not None:
        keys = [
            k
            for k in keys
            if k.pipeline.split("#")[0] == args.pipeline
            or k.pipeline == args.pipeline
            or k.pipeline.endswith("#" + args.pipeline)
        ]
    if args.role:
        keys = [k for k in keys if k.role == args.role]
    if args.occurrence is not None:
        keys = [k for k in keys if k.occurrence == args.occurrence]
    return keys


def _select_passes(passes, args):
    if args.pipeline is not None:
        passes = [p for p in passes if str(p.pipeline) == args.pipeline or p.compile_id == args.pipeline]
    if args.role:
        passes = [p for p in passes if args.role in p.after]
    if args.occurrence is not None:
        passes = passes[args.occurrence : args.occurrence + 1]
    return passes
