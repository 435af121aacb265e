"""`check -j N`: the checks' heavy, independent work made in N processes, then the checks run
as with one.

What costs in a check is per graph and independent of the rest: the rank diffs (for every stage
of a rank group, the reference rank's graph against each other rank's: the cost of a capture
whose ranks differ) and the stale-symbol walk of each distinct graph (the cost of one whose ranks
agree). These are made first, spread over processes (this one included): each process makes its
share and sends it back; the results fill the context's caches (`CheckContext.keep_rank_diff`,
`CheckContext.prefetched`), and the checks then run exactly as in one process, reading the same
diffs and observations: the findings are the same by construction, whatever N.

The unit of work is one rank diff (stage, reference rank, other rank) or one graph's stale-symbol
walk. Each process takes a run of consecutive stages (every task of a stage together), the runs
about equal in the nodes of the graphs involved: consecutive graphs share most of their rows, and
each process decodes each distinct row once, so cutting by stage keeps that sharing. Graphs that are the same on both
ranks (same id and md5s) cost nothing and
are left out. Workers are forked from this process (Linux), so they start with its index; where
there is no fork they open the capture again.

What a worker sends back of a diff is what `CheckContext.rank_diff` keeps of it: its changes
(`GraphDiff.only_changes`), so that the parent does not receive every row of both graphs again.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Iterator

from graphtrain_inspect.inspector.checks import compile_failure, graph_break, rank_divergent_compile, recompile
from graphtrain_inspect.inspector.checks.rank_classes import diff_of_its_own
from graphtrain_inspect.inspector.read import compile_events
from graphtrain_inspect.inspector.read.collector import no_gc

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.checks.context import CheckContext

MAX_DEFAULT_JOBS = 16  # the default -j: the machine's cores, at most this many
# What a task costs per node of its graphs, as a multiple of a row-by-row rank diff's, so that
# the runs cut for the processes are about equal in time (each task timed alone in a fresh
# context, on the 30k-node benchmark capture whose ranks differ, a 2-core machine): a structural
# diff (graphs of different sizes, made
# from row digests and refs: diff/anchored.py) costs ~5x per node (142-151 ms for 57-69k nodes
# against 22-25 ms for 53-56k; it was 7x when such diffs decoded every row), a stale-symbol walk
# about the same as a row diff (1.5 us per node from the capture's `gti_symbol_rows`),
# and a graph whose scope events (`gti_symbol_scopes`) the check reads instead of its rows ~1/10
# of that (1-6 ms for 27-35k nodes).
STRUCTURAL_COST = 5
SCOPES_COST_DIVISOR = 10
# Below this much work (in the weights above: ~20 ms of it) the checks make it in this process:
# the pool's processes, forked, and their results taken back cost as much. On the 30k-node
# capture whose ranks agree (7 stale-symbol walks, ~21,000 in all) `-j 8` took 0.290 s against
# `-j 1`'s 0.260 s (medians of 5, a 32-core host). The environment
# may set another floor (the test suite sets 0: its captures are small, and its `-j` tests must
# make their work in the pool).
MIN_POOL_WEIGHT = 50_000
ENV_MIN_POOL_WEIGHT = "GTI_CHECK_MIN_POOL_WEIGHT"


def min_pool_weight() -> int:
    raw = os.environ.get(ENV_MIN_POOL_WEIGHT)
    try:
        return int(raw) if raw else MIN_POOL_WEIGHT
    except ValueError:
        return MIN_POOL_WEIGHT


def default_jobs() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_DEFAULT_JOBS))


def rank_diff_tasks(ctx: "CheckContext") -> list[tuple[Any, int, int, int]]:
    """(stage key, reference rank, other rank, weight) of every rank diff the checks will read
    that is not free (identical graphs, the same two graphs as an earlier stage, or answered from
    the rank classes), heaviest first. (The first three are also rank_diff's arguments.)"""
    tasks = []
    seen: set[tuple] = set()  # a pass that returned its graph unchanged: the same diff as before it
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
                if (
                    ctx.identical(ref, ga, other, gb)
                    or (ref, ga, other, gb) in seen
                    or not diff_of_its_own(ctx, st.key, ref, other)
                ):
                    continue
                seen.add((ref, ga, other, gb))
                na, nb = ctx.cap.node_count(ref, ga) or 1, ctx.cap.node_count(other, gb) or 1
                # graphs of different sizes cannot be diffed row by row: a structural diff
                weight = (na + nb) * (STRUCTURAL_COST if na != nb else 1)
                tasks.append((st.key, ref, other, weight))
    tasks.sort(key=lambda t: -t[3])
    return tasks


def contiguous(groups: list[list[tuple]], n: int) -> list[list[tuple]]:
    """Groups of tasks (each task's weight last), in stage order, cut into at most n runs of
    consecutive groups of about equal weight: a process then reads consecutive graphs, which share
    most of their rows (each distinct row is decoded once per process). A group heavier than a
    run's share is cut into its tasks first: with many ranks one stage holds several rank diffs
    (7 with 8 ranks), and kept together they would bound the whole by one process's work."""
    total = sum(t[-1] for g in groups for t in g)
    groups = [
        part for g in groups for part in ([[t] for t in g] if len(g) > 1 and sum(t[-1] for t in g) > total / n else [g])
    ]
    out: list[list[tuple]] = [[]]
    acc = 0
    for g in groups:
        w = sum(t[-1] for t in g)
        # a new run where this group's middle passes the next cut
        if out[-1] and len(out) < n and acc + w / 2 >= total * len(out) / n:
            out.append([])
        out[-1].extend(g)
        acc += w
    return [x for x in out if x]


_FORKED: "CheckContext | None" = None  # the parent's context, in a forked worker
_STALE = "stale-unbacked-symbol"
# the checks that read torch's compile story (checks/compile_findings.py `story`)
_COMPILE_CHECKS = {m.KIND for m in (compile_failure, graph_break, rank_divergent_compile, recompile)}


def _while_waiting(
    ctx: "CheckContext", parts: list[list[tuple]], own: int, first: Callable[[], object] | None = None
) -> Iterator[bool]:
    """What the checks after the prefetch read first in this process and no worker can hand it,
    read a step at a time while the workers' results are pending (the caller stops taking steps
    once they are all in, so a process with no time to spare does none of it): `first` (the
    checks' modules imported: checks/__init__.py hands it), then the reference rank's row
    digests of each graph a worker diffs, in stage order (`attach_sources` finds a finding's row
    by them, on the first of its ranks, in the graph where it first appears: an early stage). On
    a 32-core host this process waits 0.15 s for the structural diffs (the 30k-node capture);
    each step is cached, so one taken is not made again after."""
    steps: list[Callable[[], object]] = [first] if first is not None else []
    seen: set[tuple[int, str]] = set()
    for i, part in enumerate(parts):
        if i == own:
            continue  # made here: its digests are read already
        for task in part:
            st = ctx.index.across(task[1]).get(task[2]) if task[0] == "diff" else None
            if st is not None and (task[2], st.gid) not in seen:
                seen.add((task[2], st.gid))
                steps.append(partial(ctx.cap.row_digests, task[2], st.gid))
    for step in steps:
        try:
            step()
        except Exception:  # noqa: BLE001 - a step only fills a cache: whatever stops it meets the
            pass  # checks again where they read it, handled there as without -j (never by timing)
        yield True


def _do(ctx: "CheckContext", task: tuple) -> tuple:
    from graphtrain_inspect.inspector.checks import stale_unbacked_symbol

    if task[0] == "diff":
        _, key, ref, other, _ = task
        return (task, ctx.rank_diff(key, ref, other))
    _, rank, gid, ckey, _ = task
    return (task, stale_unbacked_symbol.graph_observations(ctx, rank, gid))


def _work(path: str, source: str, classes: bool, strategies: tuple, tasks: list) -> list[tuple]:
    from graphtrain_inspect.inspector.checks.context import CheckContext
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    with no_gc():
        if _FORKED is not None:
            return [_do(_FORKED, t) for t in tasks]
        with open_capture(path, source=source) as cap:
            ctx = CheckContext(cap, classes=classes, strategies=strategies)
            return [_do(ctx, t) for t in tasks]


def tasks_for(ctx: "CheckContext", only: list[str] | None = None) -> list[list[tuple]]:
    """Every task for the checks in `only` (default all), grouped by stage, in stage order:
    ("diff", stage key, reference rank, other rank, weight) and ("stale", rank, gid, content
    key, weight)."""
    from graphtrain_inspect.inspector.checks import stale_unbacked_symbol

    groups: dict[Any, list[tuple]] = {}
    if not only or set(only) - {"incomplete-capture"}:
        for key, ref, other, w in rank_diff_tasks(ctx):
            groups.setdefault(key, []).append(("diff", key, ref, other, w))
    if not only or _STALE in only:
        for rank, gid, ckey, key in stale_unbacked_symbol.prefetch_tasks(ctx):
            weight = ctx.cap.node_count(rank, gid) or 1
            if stale_unbacked_symbol.scopes_record(ctx, rank, gid) is not None:
                weight = 1 + weight // SCOPES_COST_DIVISOR
            groups.setdefault(key, []).append(("stale", rank, gid, ckey, weight))
    order = {k: i for i, k in enumerate(ctx.index.keys)}
    return [groups[k] for k in sorted(groups, key=lambda k: order.get(k, len(order)))]


def prefetch(
    ctx: "CheckContext", jobs: int, only: list[str] | None = None, waiting: Callable[[], object] | None = None
) -> int:
    """Make the checks' rank diffs and stale-symbol walks in `jobs` processes (this one makes a
    share too) and keep them in ctx; `waiting`: made first while the workers' results are pending
    (`_while_waiting`). Returns the number of processes used (1: nothing done here,
    the checks make everything as they go)."""
    groups = tasks_for(ctx, only)
    if sum(t[-1] for g in groups for t in g) < min_pool_weight():
        return 1  # less work than starting the processes and taking their results back costs
    parts = contiguous(groups, max(1, jobs))
    if len(parts) < 2:
        return 1
    cap = ctx.cap
    source = "torch" if cap.kind == "torch_trace" else "capture"
    # fork where there is one (the workers start with this index); spawn elsewhere
    method = "fork" if sys.platform.startswith("linux") else "spawn"
    mp = multiprocessing.get_context(method)
    global _FORKED
    _FORKED = ctx if method == "fork" else None
    # this process makes the lightest run: it also reads torch's logs, and takes the others'
    # results as they come (on the 30k-node capture whose ranks differ it was the first run, the
    # three lightest row diffs, and with the logs it was often the last to end)
    own = min(range(len(parts)), key=lambda i: sum(t[-1] for t in parts[i]))
    # the cyclic collector off while the results are made and arrive (many small objects, no
    # cycles to free: it would rescan every table held so far again and again), as diffs do
    try:
        with no_gc(), mp.Pool(len(parts) - 1) as pool:
            made_as = (cap.path, source, ctx.classes, ctx.strategies)
            pending = [pool.apply_async(_work, (*made_as, p)) for i, p in enumerate(parts) if i != own]
            results = [_do(ctx, t) for t in parts[own]]
            if not only or set(only) & _COMPILE_CHECKS:
                # torch's logs beside the capture, read while the workers finish (the compile
                # checks read them after the prefetch, in this process alone); cached on the capture
                compile_events.compile_story(cap)
            warm = _while_waiting(ctx, parts, own, waiting)
            for p in pending:
                while not p.ready() and next(warm, None) is not None:
                    pass
                results.extend(p.get())
    finally:
        _FORKED = None
    stale = ctx.prefetched.setdefault(_STALE, {})
    for task, value in results:
        if task[0] == "diff":
            ctx.keep_rank_diff(task[1], task[2], task[3], value)
        else:
            stale[task[3]] = value
    return len(parts)
