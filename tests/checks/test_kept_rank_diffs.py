"""The rank diffs the checks keep: made once per pair of graphs (a pass that returned its graph
unchanged on both ranks gets the diff of the stage before, which is the diff made for that stage
from scratch), and kept as their changes only (`GraphDiff.only_changes`), from which the literals
that differ across ranks are what the whole diffs say."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphtrain_inspect.inspector.checks import parallel
from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.checks.differing_literals import literal_sites
from graphtrain_inspect.inspector.diff.graph_diff import diff_tables
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


def _sites_from_whole_diffs(ctx: CheckContext, key, group: list[int]) -> dict:
    """(subgraph, node, where) -> ({rank: value}, {rank: node}) of every literal leaf that differs
    across the group, read from diffs listing every node: the second opinion, written plainly."""
    stages = ctx.index.across(key)
    ref, present = group[0], [r for r in group if r in stages]
    whole = {}
    for r in present[1:]:
        ta, tb = ctx.tables(ref, stages[ref].gid), ctx.tables(r, stages[r].gid)
        whole[r] = diff_tables(
            ta, tb, norm_a=ctx.normalizer(ref, stages[ref].gid), norm_b=ctx.normalizer(r, stages[r].gid)
        )
    sites: dict = {}
    for r, d in whole.items():
        for sub in d.subgraphs:
            for n in sub.nodes:
                if n.status != "changed":
                    continue
                for where, x, y in n.args:
                    if (
                        where in ("op", "target")
                        or isinstance(x, dict)
                        or isinstance(y, dict)
                        or isinstance(x, list)
                        or isinstance(y, list)
                    ):
                        continue
                    vals, names = sites.setdefault((sub.path, n.a["name"], where), ({ref: x}, {ref: n.a["name"]}))
                    vals[r], names[r] = y, n.b["name"]
    for (path, node, _), (vals, names) in sites.items():
        for r, d in whole.items():
            if r in vals:
                continue
            for sub in d.subgraphs:
                for n in sub.nodes:
                    if sub.path == path and n.a is not None and n.b is not None and n.a["name"] == node:
                        vals[r], names[r] = vals[ref], n.b["name"]
    return sites


DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize("name", ["h200x4-rank-baked", "h200x4-rank-divergent"])
def test_literal_sites_from_kept_diffs_are_what_whole_diffs_say(tmp_path, name):
    """4 ranks whose tables are diffed structurally (one line per table: no diff by position): a
    site's value and node on every rank, the third and fourth included, are those the whole
    diffs' alignment gives. On the GPU captures as first recorded, in log format 1
    (tests/data/format1/: the bundled ones are recorded anew in each format)."""
    import tarfile

    with tarfile.open(DATA / "format1" / f"{name}.tar.xz", "r:xz") as tf:
        tf.extractall(tmp_path, filter="data")
    ctx = CheckContext(open_capture(str(tmp_path / name)))
    group = ctx.rank_groups()[0]
    assert len(group) == 4
    compared = 0
    for st in ctx.index.by_rank[group[0]]:
        kept = {r: ctx.rank_diff(st.key, group[0], r) for r in group[1:]}
        assert all(d.unlisted_same and d.renamed is not None for d in kept.values())  # structural, kept small
        want = _sites_from_whole_diffs(ctx, st.key, group)
        got = {
            (s.subgraph, s.node, s.where): (s.values, s.nodes)
            for s in literal_sites(ctx, st.key, group)
            if all(not isinstance(v, (dict, list)) for v in s.values.values())
        }
        assert got == want, st.key.label()
        compared += len(got)
    assert compared or name.endswith("divergent"), "the rank-baked capture has literals that differ"


def _graph(rank: int):
    """rank 0: mul(neg(x), 2) + 7; rank 1 the same with 3 and 8 (rank literals); rank 2 computes
    a mul(x, 1) first, so its mul of neg is `mul_1`, and returns it without the add."""
    import torch
    import torch.fx

    aten = torch.ops.aten
    g = torch.fx.Graph()
    x = g.placeholder("x")
    src = g.create_node("call_function", aten.mul.Tensor, (x, 1), name="mul") if rank == 2 else x
    neg = g.create_node("call_function", aten.neg.default, (src,), name="neg")
    mul = g.create_node(
        "call_function", aten.mul.Tensor, (neg, 3 if rank == 1 else 2), name="mul_1" if rank == 2 else "mul"
    )
    out = (
        mul if rank == 2 else g.create_node("call_function", aten.add.Tensor, (mul, 8 if rank == 1 else 7), name="add")
    )
    g.output(out)
    return torch.fx.GraphModule(torch.nn.Module(), g)


def test_a_third_ranks_value_is_read_at_its_aligned_node(tmp_path):
    """Sites from kept diffs on 3 ranks: where the third rank's graph shifts names (a structural
    diff) its value is read at the aligned node under that node's own name (`renamed`), and where
    it lacks the node it has no value."""
    from tests.small_captures import CaptureWriter

    w = CaptureWriter(tmp_path, world_size=3)
    for r in range(3):
        rw = w.rank(r)
        rw.apply("identity", _graph(r), _graph(r))
        rw.end()
    w.finish()
    ctx = CheckContext(open_capture(str(tmp_path)))
    key = ctx.index.by_rank[0][-1].key
    assert ctx.rank_diff(key, 0, 1).renamed is None  # rows by position
    assert ctx.rank_diff(key, 0, 2).renamed == {("", "mul"): "mul_1"}  # structural, kept small
    sites = {(s.node, s.where): (s.values, s.nodes) for s in literal_sites(ctx, key, [0, 1, 2])}
    assert sites == {
        ("mul", "args[1]"): ({0: 2, 1: 3, 2: 2}, {0: "mul", 1: "mul", 2: "mul_1"}),
        ("add", "args[1]"): ({0: 7, 1: 8}, {0: "add", 1: "add"}),
    }
