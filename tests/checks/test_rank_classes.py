"""Rank classes (checks.rank_classes): ranks whose graphs agree after normalization form one class,
found from hashes of their rows; the checks' rank diffs are made once per class, and the report is
the one every rank diff made gives."""

from __future__ import annotations

import torch
import torch.distributed  # registers the functional collectives
import torch.fx

from graphtrain_inspect.inspector.checks import check_report
from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.checks.differing_literals import literal_sites
from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.small_captures import CaptureWriter, mesh_rank_table

MESH = (4, 2)  # dp, tp: 8 ranks, two hosts of 4 GPUs


def _graph(tp: int, group: str, device: str, *, extra: bool = False, other_group: str | None = None):
    """select at the tp coordinate (a rank-baked literal), an all_reduce over the rank's own tp group
    name, a copy to `device`, a tp-sized buffer on it, and a broadcast over `other_group` (default:
    the tp group); `extra`: one more node (a structural difference)."""
    aten = torch.ops.aten
    g = torch.fx.Graph()
    x = g.placeholder("x")
    sel = g.create_node("call_function", aten.select.int, (x, 0, tp), name="select")
    src = g.create_node("call_function", aten.neg.default, (sel,), name="neg") if extra else sel
    red = g.create_node(
        "call_function", torch.ops._c10d_functional.all_reduce.default, (src, "sum", group), name="all_reduce"
    )
    wait = g.create_node("call_function", torch.ops._c10d_functional.wait_tensor.default, (red,), name="wait_tensor")
    out = g.create_node(
        "call_function", aten._to_copy.default, (wait,), {"device": torch.device(device)}, name="_to_copy"
    )
    # a tp-sized buffer on the device: a changed row between tp classes that names the device
    buf = g.create_node(
        "call_function", aten.full.default, ([tp + 1], 1.0), {"device": torch.device(device)}, name="full"
    )
    bc = g.create_node(
        "call_function", torch.ops._c10d_functional.broadcast.default, (buf, 0, other_group or group), name="broadcast"
    )
    g.output((out, bc))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def _capture(tmp_path, *, baked_device_rank: int | None = None, divergent_rank: int | None = None) -> str:
    """8 ranks; each copies to its own device (`cuda:<local rank>`), but `baked_device_rank` copies
    to cuda:0 (a baked device); `divergent_rank`'s pass adds a node."""
    w = CaptureWriter(tmp_path, world_size=8)
    for r in range(8):
        table = mesh_rank_table(r, MESH, ("dp", "tp"))
        tp = table["meshes"][0]["coordinate"][1]
        group = table["meshes"][0]["group_names"]["tp"]
        own = f"cuda:{r % 4}"
        dev = "cuda:0" if r == baked_device_rank else own
        rw = w.rank(r, local_rank=r % 4, own_device=own, rank_table=table)
        # tp 1 broadcasts over its dp group, tp 0 over its tp group: a site whose values are group
        # names, each rank's own
        other = table["meshes"][0]["group_names"]["dp"] if tp else group
        rw.apply("rewrite", _graph(0, group, own), _graph(tp, group, dev, extra=r == divergent_rank, other_group=other))
        rw.end()
    return w.finish()


def _classes(ctx: CheckContext) -> dict[str, list[tuple[int, ...]]]:
    return {k.label(): [c.ranks for c in ctx.rank_classes.at(k)] for k in ctx.index.keys}


def _report(path: str, classes: bool) -> dict:
    return check_report(open_capture(path), classes=classes).to_json()


def test_classes_follow_the_normalized_graph(tmp_path):
    """Group names and own devices differ on every rank; only the tp coordinate and a baked
    device make classes."""
    ctx = CheckContext(open_capture(_capture(tmp_path / "a", baked_device_rank=5)))
    assert _classes(ctx) == {"trace": [tuple(range(8))], "rewrite": [(0, 2, 4, 6), (1, 3, 7), (5,)]}
    line = ctx.rank_classes.summary_line()
    assert (
        line.startswith("ranks 0,2,4,6 agree")
        and "ranks 1,3,7 agree" in line
        and "rank 5 differs (from rewrite" in line
    )


def test_one_class_reads_as_agreement(tmp_path):
    w = CaptureWriter(tmp_path, world_size=8)
    for r in range(8):
        table = mesh_rank_table(r, MESH, ("dp", "tp"))
        rw = w.rank(r, local_rank=r % 4, own_device=f"cuda:{r % 4}", rank_table=table)
        rw.apply("rewrite", _graph(0, table["meshes"][0]["group_names"]["tp"], f"cuda:{r % 4}"))
        rw.end()
    ctx = CheckContext(open_capture(w.finish()))
    assert ctx.rank_classes.summary_line() == "ranks 0-7 agree at every stage"


def test_report_is_the_one_every_rank_diff_gives(tmp_path):
    """The findings (rank-baked tp coordinate with every rank's value, the baked device on its
    rank, a rank-divergent pass) are the same document whether the checks make a rank diff per
    class or one per rank; and a member's diff names its own node values, not its class's."""
    for i, kw in enumerate(({"baked_device_rank": 5}, {"divergent_rank": 3}, {})):
        path = _capture(tmp_path / str(i), **kw)
        with_classes = _report(path, True)
        assert with_classes == _report(path, False), kw
        kinds = sorted({f["kind"] for f in with_classes["findings"] if f["severity"] == "error"})
        # tp 1 broadcasts over its dp group where tp 0 broadcasts over its tp group: a hang
        assert "rank-baked-constant" in kinds and "collective-mismatch" in kinds
        if kw.get("divergent_rank"):
            # graded info: its collectives differ too, which collective-mismatch reports (its root cause)
            cm = [f for f in with_classes["findings"] if f["kind"] == "collective-mismatch"]
            assert "rank-divergent-graph" in {c["kind"] for f in cm for c in f.get("consequences") or []}


def test_a_members_diff_reads_with_its_own_device(tmp_path):
    """Ranks 1 and 3 are one class (tp 1) with own devices cuda:1 and cuda:3: rank 3's diff with
    rank 0 is made from rank 1's, and reads cuda:3 where rank 1's read cuda:1."""
    path = _capture(tmp_path)
    ctx = CheckContext(open_capture(path))
    key = ctx.index.by_rank[0][-1].key
    sites = {(s.node, s.where): s.values for s in literal_sites(ctx, key, list(range(8)))}
    d1, d3 = ctx.rank_diff(key, 0, 1), ctx.rank_diff(key, 0, 3)
    plain = CheckContext(open_capture(path), classes=False)
    assert {(s.node, s.where): s.values for s in literal_sites(plain, key, list(range(8)))} == sites
    assert sites[("select", "args[2]")] == {r: r % 2 for r in range(8)}
    names = {r: mesh_rank_table(r, MESH, ("dp", "tp"))["meshes"][0]["group_names"] for r in range(8)}
    assert sites[("broadcast", "args[2]")] == {r: names[r]["dp" if r % 2 else "tp"] for r in range(8)}
    p3 = plain.rank_diff(key, 0, 3)
    assert [(n.b, n.args, n.meta) for n in d3.changes()] == [(n.b, n.args, n.meta) for n in p3.changes()]
    full1, full3 = ({n.name: n.b for n in d.changes()}["full"] for d in (d1, d3))
    assert (full1["kwargs"], full3["kwargs"]) == ({"device": {"dev": "cuda:1"}}, {"device": {"dev": "cuda:3"}})


def _slice_graph(tp: int | None, group: str):
    """A slice of a dimension of 7 at the tp coordinate's chunk of it split in 2 ([0, 4) or [4, 7):
    each rank's own chunk; None: the whole of it), and an all_reduce over the tp group."""
    aten = torch.ops.aten
    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = torch.empty(7, 4)
    start, end = (0, 7) if tp is None else ((0, 4), (4, 7))[tp]
    sl = g.create_node("call_function", aten.slice.Tensor, (x, 0, start, end), name="slice_1")
    sl.meta["val"] = torch.empty(end - start, 4)
    red = g.create_node(
        "call_function", torch.ops._c10d_functional.all_reduce.default, (sl, "sum", group), name="all_reduce"
    )
    red.meta["val"] = torch.empty(end - start, 4)
    g.output((red,))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def test_geometry_and_collectives_read_one_table_per_class(tmp_path):
    """Each rank slices its own chunk of an uneven dimension (its tp coordinate's) and all_reduces
    it: the shard geometry and the collectives are read from one rank of each class (ranks 0 and
    1), and the report is the one reading every rank's table gives."""
    w = CaptureWriter(tmp_path, world_size=8)
    for r in range(8):
        table = mesh_rank_table(r, MESH, ("dp", "tp"))
        tp, group = table["meshes"][0]["coordinate"][1], table["meshes"][0]["group_names"]["tp"]
        rw = w.rank(r, local_rank=r % 4, own_device=f"cuda:{r % 4}", rank_table=table)
        rw.apply("shard", _slice_graph(None, group), _slice_graph(tp, group))
        rw.end()
    path = w.finish()
    cap = open_capture(path)
    read: set[int] = set()
    node_table = cap.node_table

    def counted(rank, gid):
        read.add(rank)
        return node_table(rank, gid)

    cap.node_table = counted
    report = check_report(cap).to_json()
    assert read <= {0, 1}
    assert report == _report(path, False)
    (f,) = [f for f in report["findings"] if f["kind"] == "rank-baked-constant"]
    geo = f["evidence"]["geometry"]
    assert (geo["own_chunk"], geo["dim_size"], geo["chunks"]) == (True, 7, 2)
    # tp 0 and tp 1 all_reduce 4 and 3 rows: a collective of two sizes (against rank 0: the tp 1s)
    (c,) = [x for x in report["findings"] if x["kind"] == "collective-mismatch"]
    assert f["severity"] == "info" and c["severity"] == "error" and c["ranks"] == [0, 1, 3, 5, 7]
