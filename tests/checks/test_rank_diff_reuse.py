"""A rank diff is made once per pair of graphs: a pass that returned its graph unchanged on both
ranks gets the diff of the stage before, which is the diff made for that stage from scratch."""

from __future__ import annotations

from graphtrain_inspect.inspector.checks import parallel
from graphtrain_inspect.inspector.checks.tables_and_blame import CheckContext
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.samples.bugs import ALL as ALL_BUGS


def _unchanged_stages(ctx: CheckContext) -> list[tuple]:
    """(stage key, its parent's key) where both ranks' graphs are the parent stage's."""
    out = []
    for st in ctx.index.by_rank[0]:
        if st.parent is None:
            continue
        here, before = ctx.index.across(st.key).get(1), ctx.index.across(st.parent.key).get(1)
        if here is not None and before is not None and (st.gid, here.gid) == (st.parent.gid, before.gid):
            out.append((st.key, st.parent.key))
    return out


def test_a_pass_that_changed_nothing_reuses_the_rank_diff(sample_capture):
    path = str(sample_capture(*ALL_BUGS))  # the capture test_fast_paths makes: ranks differ
    ctx = CheckContext(open_capture(path))
    stages = _unchanged_stages(ctx)
    assert stages, "the sample has a pass that returns its graph unchanged (resolve_coordinates without --coor)"
    differing = 0
    for key, parent in stages:
        d = ctx.rank_diff(key, 0, 1)
        assert d is ctx.rank_diff(parent, 0, 1)
        fresh = CheckContext(open_capture(path)).rank_diff(key, 0, 1)  # this stage first, nothing before it
        assert [c.summary() for c in d.changes()] == [c.summary() for c in fresh.changes()]
        assert d.counts == fresh.counts and d.structural == fresh.structural
        differing += not d.empty
    assert differing, "the ranks differ at such a stage: the reused diff is not an empty one"
    # check -j makes each such diff once too
    tasks = {(k, r, o) for k, r, o, _ in parallel.rank_diff_tasks(ctx)}
    assert not any((key, 0, 1) in tasks for key, _ in stages)
