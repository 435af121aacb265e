"""`check -j N`: the checks' rank diffs made in N processes, then the checks run as with one.

What costs in a check of a capture whose ranks differ is the rank diffs: for every stage of a rank
group, the reference rank's graph against each other rank's (`CheckContext.rank_diff`). They are
independent of each other, so they are made first, spread over processes (this one included):
each process opens the capture itself, makes its share of the diffs, and sends them back. They
then fill the context's diff cache, and the checks run exactly as they do in one process, reading
the same diffs: the findings are the same by construction, whatever N.

The unit of work is one (stage, reference rank, other rank) diff; the shares are balanced by the
nodes of the graphs compared (largest first, each to the least loaded process). Graphs that are
the same on both ranks (same id and md5s) cost nothing and are left out.

What a process sends back is `compact(diff)`: the diff with the rows of unchanged nodes reduced
to their names (the checks read only the names of nodes that did not change), so that the
parent does not receive every row of both graphs again.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from typing import TYPE_CHECKING, Any

from graphtrain_inspect.inspector.diff.graph_diff import GraphDiff, NodeDiff, SubgraphDiff

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.checks.tables_and_blame import CheckContext

MAX_DEFAULT_JOBS = 16  # the default -j: the machine's cores, at most this many


def default_jobs() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_DEFAULT_JOBS))


def rank_diff_tasks(ctx: "CheckContext") -> list[tuple[Any, int, int, int]]:
    """(stage key, reference rank, other rank, weight) of every rank diff the checks will read
    that is not free (identical graphs), heaviest first."""
    tasks = []
    for group in ctx.rank_groups():
        ranks = [r for r in group if ctx.index.by_rank.get(r)]
        if len(ranks) < 2:
            continue
        ref = ranks[0]
        for st in ctx.index.by_rank[ref]:
            across = ctx.index.across(st.key)
            for other in ranks[1:]:
                if other not in across:
                    continue
                ga, gb = st.gid, across[other].gid
                if ctx.identical(ref, ga, other, gb):
                    continue
                weight = (ctx.cap.node_count(ref, ga) or 1) + (ctx.cap.node_count(other, gb) or 1)
                tasks.append((st.key, ref, other, weight))
    tasks.sort(key=lambda t: -t[3])
    return tasks


def shares(tasks: list, n: int) -> list[list]:
    """Tasks (heaviest first) dealt to n shares, each to the lightest so far."""
    out: list[list] = [[] for _ in range(n)]
    load = [0] * n
    for t in tasks:
        k = load.index(min(load))
        out[k].append(t)
        load[k] += t[3]
    return [s for s in out if s]


def compact(d: GraphDiff | None) -> GraphDiff | None:
    """The diff with each unchanged node's rows reduced to {"name": ...} (see the module doc)."""
    if d is None:
        return None
    subs = []
    for sub in d.subgraphs:
        nodes = []
        for n in sub.nodes:
            if n.status == "same":
                n = NodeDiff("same", n.subgraph, _name_only(n.a), _name_only(n.b), n.args, n.meta, n.structural)
            nodes.append(n)
        subs.append(SubgraphDiff(sub.path, sub.status, nodes))
    return GraphDiff(d.a_label, d.b_label, d.a_gid, d.b_gid, subs, unlisted_same=d.unlisted_same)


def _name_only(row: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if row is None else {"name": row["name"]}


_FORKED: "CheckContext | None" = None  # the parent's context, in a forked worker


def _work(path: str, source: str, tasks: list) -> list[tuple[Any, int, int, GraphDiff | None]]:
    from graphtrain_inspect.inspector.checks.tables_and_blame import CheckContext
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    if _FORKED is not None:
        ctx = _FORKED
        return [(key, ref, other, compact(ctx.rank_diff(key, ref, other))) for key, ref, other, _ in tasks]
    with open_capture(path, source=source) as cap:
        ctx = CheckContext(cap)
        return [(key, ref, other, compact(ctx.rank_diff(key, ref, other))) for key, ref, other, _ in tasks]


def prefetch_rank_diffs(ctx: "CheckContext", jobs: int) -> int:
    """Make the rank diffs the checks will read in `jobs` processes (this one makes a share too)
    and keep them in ctx's diff cache. Returns the number of processes used."""
    tasks = rank_diff_tasks(ctx)
    parts = shares(tasks, max(1, min(jobs, len(tasks))))
    if len(parts) < 2:
        return 1
    cap = ctx.cap
    source = "torch" if cap.kind == "torch_trace" else "capture"
    # fork where there is one (no re-import, the index is not rebuilt from nothing); spawn elsewhere
    method = "fork" if sys.platform.startswith("linux") else "spawn"
    mp = multiprocessing.get_context(method)
    global _FORKED
    _FORKED = ctx if method == "fork" else None
    try:
        with mp.Pool(len(parts) - 1) as pool:
            pending = [pool.apply_async(_work, (cap.path, source, p)) for p in parts[1:]]
            mine = [(key, ref, other, ctx.rank_diff(key, ref, other)) for key, ref, other, _ in parts[0]]
            results = [r for p in pending for r in p.get()]
    finally:
        _FORKED = None
    for key, ref, other, d in results:
        ctx.keep_rank_diff(key, ref, other, d)
    del mine  # already in the cache (rank_diff keeps what it makes)
    return len(parts)
