"""`check -j N`: the rank diffs and stale-symbol walks made in N processes give the report one
process gives, on real captures whose ranks differ (a rank-divergent pass on 2 and 4 ranks, a
rank-baked literal on 4) or that have stale symbols, and the work really is spread."""

from __future__ import annotations

import pytest

from graphtrain_inspect.inspector.checks import check_report, parallel
from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.read.capture_index import open_capture


@pytest.mark.parametrize(
    "name",
    [
        "h200x2-rank-divergent",
        "h200x4-rank-divergent",
        "h200x4-rank-baked",
        "h200x2-stale-symbol",
        "h200x2-rank-recompile-divergent",  # torch's logs beside it: read while the workers run
    ],
)
def test_jobs_give_the_same_report(bundled_capture, name):
    path = str(bundled_capture(name))
    one = check_report(open_capture(path), jobs=1).to_json()
    three = check_report(open_capture(path), jobs=3).to_json()
    assert one == three
    assert one["findings"]


def test_work_is_spread_and_kept(bundled_capture):
    cap = open_capture(str(bundled_capture("h200x4-rank-divergent")))
    ctx = CheckContext(cap)
    tasks = parallel.rank_diff_tasks(ctx)
    assert len(tasks) > 2  # stages whose graphs differ across ranks
    assert parallel.prefetch(ctx, 3) > 1
    assert ctx.prefetched["stale-unbacked-symbol"]  # the reference rank's graphs, walked elsewhere
    # every diff is in the cache, and the workers' diffs read as the ones made here
    fresh = CheckContext(open_capture(str(bundled_capture("h200x4-rank-divergent"))))
    for key, ref, other, _ in tasks:
        assert (key, ref, other) in ctx._rdiff
        got, want = ctx.rank_diff(key, ref, other), fresh.rank_diff(key, ref, other)
        assert got.counts == want.counts and got.structural == want.structural
        assert [c.summary() for c in got.changes()] == [c.summary() for c in want.changes()]
        assert [n.names for s in got.subgraphs for n in s.nodes] == [n.names for s in want.subgraphs for n in s.nodes]


def test_torch_logs_are_read_while_the_workers_run(bundled_capture):
    """The compile checks read torch's logs beside a capture in this process after the prefetch;
    the prefetch reads them once its own share is made, while the workers finish theirs."""
    cap = open_capture(str(bundled_capture("h200x2-rank-recompile-divergent")))
    assert cap.torch_trace_dir
    assert parallel.prefetch(CheckContext(cap), 2, ["rank-baked-constant"]) > 1
    assert getattr(cap, "_compile_story", None) is None  # no compile check asked for
    assert parallel.prefetch(CheckContext(cap), 2, ["rank-divergent-compile"]) > 1
    assert cap._compile_story.by_rank.keys() == {0, 1}


def test_what_this_process_reads_while_it_waits(bundled_capture):
    """Each step taken while the workers' results are pending (`_while_waiting`, whose steps the
    prefetch takes only while it waits: a race, so here every step is taken): the checks' modules
    (the step `check_report` hands it), then the reference rank's row digests of each graph a
    worker diffs, in stage order, once each; none of the run this process makes itself."""
    import sys

    from graphtrain_inspect.inspector.checks import CHECK_MODULES, check_modules

    cap = open_capture(str(bundled_capture("h200x4-rank-divergent")))
    ctx = CheckContext(cap)
    parts = parallel.contiguous(parallel.tasks_for(ctx), 3)
    assert len(parts) == 3
    read: list[tuple[int, str]] = []
    real = cap.row_digests
    cap.row_digests = lambda rank, gid: read.append((rank, gid)) or real(rank, gid)  # type: ignore[method-assign]
    steps = list(parallel._while_waiting(ctx, parts, 0, check_modules))
    assert all(f"graphtrain_inspect.inspector.checks.{m}" in sys.modules for m in CHECK_MODULES)
    want = []
    for part in parts[1:]:
        for task in part:
            if task[0] == "diff":
                gid = ctx.index.across(task[1])[task[2]].gid
                if (task[2], gid) not in want:
                    want.append((task[2], gid))
    assert want and read == want and len(steps) == 1 + len(want)

    # a step that fails only leaves its cache unfilled: the wait goes on, whenever it was taken
    def broken(rank, gid):
        raise ValueError("damaged digests")

    cap.row_digests = broken  # type: ignore[method-assign]
    assert len(list(parallel._while_waiting(ctx, parts, 0, check_modules))) == 1 + len(want)


def test_little_work_is_made_in_this_process(bundled_capture, monkeypatch):
    """Under the floor of work (`MIN_POOL_WEIGHT`) no pool is made: the checks make it as they go,
    as with -j 1; at or above it (the suite's floor is 0) the work is spread."""
    path = str(bundled_capture("h200x2-stale-symbol"))
    ctx = CheckContext(open_capture(path))
    weight = sum(t[-1] for g in parallel.tasks_for(ctx) for t in g)
    assert 0 < weight < parallel.MIN_POOL_WEIGHT
    monkeypatch.delenv(parallel.ENV_MIN_POOL_WEIGHT)
    assert parallel.prefetch(ctx, 4) == 1 and not ctx.prefetched
    monkeypatch.setenv(parallel.ENV_MIN_POOL_WEIGHT, str(weight))
    assert parallel.prefetch(ctx, 4) > 1 and ctx.prefetched


def test_stages_are_cut_into_consecutive_runs_of_about_equal_weight():
    groups = [[("diff", k, 0, 1, w)] for k, w in enumerate([10, 7, 5, 3, 1])]
    parts = parallel.contiguous(groups, 2)
    assert [[t[1] for t in p] for p in parts] == [[0], [1, 2, 3, 4]]  # 10 | 16: consecutive stages
    assert parallel.contiguous(groups[:1], 4) == [groups[0]]
    assert sum(len(p) for p in parallel.contiguous(groups, 3)) == 5


def test_a_stage_heavier_than_a_share_is_cut_into_its_rank_diffs():
    """8 ranks: a stage holds 7 rank diffs; kept together they would make one process do most of
    the work. Each process still gets consecutive tasks."""
    heavy = [("diff", 0, 0, r, 5) for r in range(1, 8)]
    light = [("diff", 1, 0, r, 1) for r in range(1, 8)]
    parts = parallel.contiguous([heavy, light], 4)
    assert len(parts) == 4
    assert [t for p in parts for t in p] == heavy + light  # every task once, in order
    assert max(sum(t[-1] for t in p) for p in parts) <= 15  # no part holds the whole heavy stage
    assert parallel.contiguous([heavy], 1) == [heavy]
