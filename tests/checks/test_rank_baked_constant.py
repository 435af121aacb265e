"""rank-baked-constant (inspector/checks/rank_baked_constant.py) on hand-built FX graphs written as a
capture: literals equal to a rank-derived value, per-rank graphs and graphs compiled on one rank.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.distributed  # registers the functional collectives
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

from graphtrain_inspect.inspector.checks import check_report, run_checks
from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.capture_utils import every_finding, run_cli, torchrun
from tests.small_captures import CaptureWriter, identity_pass, kinds, mesh_rank_table

# ---------------------------------------------------------------------------------------------
# rank-baked-constant


def tp_graph(coord: int, group: str):
    """select/slice at a mesh coordinate (the bug) and an all_reduce over a per-rank group name."""

    def f(x):
        y = torch.ops.aten.select.int(x, 0, coord)
        z = torch.ops.aten.slice.Tensor(x, 0, 2 * coord, 2 * coord + 2)
        r = torch.ops._c10d_functional.all_reduce.default(y + z.sum(0), "sum", group)
        return torch.ops._c10d_functional.wait_tensor.default(r)

    return make_fx(f, tracing_mode="fake")(torch.randn(8, 4))


def clean_graph(group: str):
    def f(x):
        y = x * 2
        r = torch.ops._c10d_functional.all_reduce.default(y, "sum", group)
        return torch.ops._c10d_functional.wait_tensor.default(r)

    return make_fx(f, tracing_mode="fake")(torch.randn(8, 4))


def write_mesh_capture(tmp_path, build, *, bug_in_pass: bool):
    """4 ranks on a (dp=2, tp=2) mesh; the tp group name differs per rank as torch numbers it."""
    w = CaptureWriter(tmp_path, world_size=4)
    for r in range(4):
        table = mesh_rank_table(r, (2, 2), ("dp", "tp"))
        tp = table["meshes"][0]["coordinate"][1]
        group = table["meshes"][0]["group_names"]["tp"]
        rw = w.rank(r, rank_table=table)
        traced = clean_graph(group)
        if bug_in_pass:
            rw.apply("rewrite", traced, build(tp, group))
        else:
            rw.apply("noop", build(tp, group), identity_pass(build(tp, group)))
        rw.end()
    return w.finish()


def test_rank_baked_int_equal_to_mesh_coordinate(tmp_path):
    cap = open_capture(write_mesh_capture(tmp_path, tp_graph, bug_in_pass=True))
    fs = [f for f in run_checks(cap) if f.kind == "rank-baked-constant"]
    assert fs, "the coordinate literals must be found"
    assert all(f.severity == "error" and f.introduced_by == "rewrite" for f in fs)
    by_where = {(f.evidence["target"], f.evidence["where"]): f for f in fs}
    sel = by_where[("aten.select.int", "args[2]")]
    assert sel.evidence["values"] == {"0": 0, "1": 1, "2": 0, "3": 1}
    assert {"vector": "coordinate[tp]", "relation": "equal"} in sel.evidence["matches"]
    assert sel.ranks == [0, 1, 2, 3]
    start = by_where[("aten.slice.Tensor", "args[2]")]
    assert any(
        m["vector"] == "coordinate[tp]" and m["relation"] == "multiple" and m["factor"] == "2"
        for m in start.evidence["matches"]
    )
    end = by_where[("aten.slice.Tensor", "args[3]")]
    assert any(
        m["vector"] == "coordinate[tp]" and m.get("form") == "2 * (coordinate[tp] + 1)" for m in end.evidence["matches"]
    )
    # the per-rank group names of the all_reduce are not a finding
    assert not any("all_reduce" in str(f.evidence.get("target")) for f in fs)


def test_rank_baked_in_traced_graph_is_blamed_on_trace(tmp_path):
    cap = open_capture(write_mesh_capture(tmp_path, tp_graph, bug_in_pass=False))
    fs = [f for f in run_checks(cap) if f.kind == "rank-baked-constant"]
    assert fs and all(f.introduced_by == "trace" and f.pass_ == "noop" for f in fs)


def test_group_names_differing_only_by_numbering_are_not_findings(tmp_path):
    # with rank tables
    w = CaptureWriter(tmp_path / "a", world_size=4)
    for r in range(4):
        table = mesh_rank_table(r, (2, 2), ("dp", "tp"))
        g = clean_graph(table["meshes"][0]["group_names"]["dp"])
        rw = w.rank(r, rank_table=table)
        rw.apply("noop", g, identity_pass(g))
        rw.end()
    cap = open_capture(w.finish())
    assert kinds(run_checks(cap)) == []
    # without rank tables (TORCH_TRACE-like): group names numbered by first appearance
    w = CaptureWriter(tmp_path / "b", world_size=2)
    for r, name in ((0, "1"), (1, "5")):
        g = clean_graph(name)
        rw = w.rank(r)
        rw.apply("noop", g, identity_pass(g))
        rw.end()
    cap = open_capture(w.finish())
    assert kinds(run_checks(cap)) == []


def test_tensor_constant_value_and_nested_list_literal(tmp_path):
    def graph(rank):
        def f(x):
            t = torch.tensor([rank, 7])
            return x.sum() + t.sum() + torch.ops.aten.constant_pad_nd.default(x, [0, rank])

        return make_fx(f)(torch.randn(4, 4))

    w = CaptureWriter(tmp_path, world_size=2)
    for r in (0, 1):
        rw = w.rank(r)
        base = make_fx(lambda x: x.sum())(torch.randn(4, 4))
        rw.apply("bake", base, graph(r))
        rw.end()
    cap = open_capture(w.finish())
    fs = [f for f in run_checks(cap) if f.kind == "rank-baked-constant"]
    wheres = {f.evidence["where"] for f in fs}
    assert "attr.value[0]" in wheres  # the constant tensor([rank, 7])
    assert "args[1][1]" in wheres  # the pad list [0, rank]
    assert all(f.severity == "error" and f.introduced_by == "bake" for f in fs)


def _mul_by(v):
    return lambda x: x * v


def test_literal_not_matching_any_rank_vector_is_a_warning(tmp_path):
    w = CaptureWriter(tmp_path, world_size=2)
    for r, v in ((0, 5), (1, 9)):
        g = make_fx(_mul_by(v))(torch.randn(2))
        rw = w.rank(r)
        rw.apply("p", make_fx(lambda x: x * 1)(torch.randn(2)), g)
        rw.end()
    fs = run_checks(open_capture(w.finish()))
    assert [(f.kind, f.severity) for f in fs] == [("rank-baked-constant", "warning")]


# ---------------------------------------------------------------------------------------------
# compile on one rank


def coordinate_of(mesh, dim):  # stands in for torch.ops.device_mesh._runtime_compute_coordinate_on_dim
    return 0


coordinate_of.__module__ = "device_mesh"
coordinate_of.__qualname__ = coordinate_of.__name__ = "_runtime_compute_coordinate_on_dim"


def coor_graph(backward_literal: int | None):
    """Forward slices at a runtime coordinate; the backward node either does too, or has a literal."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    mesh = g.placeholder("mesh")
    c = g.call_function(coordinate_of, (mesh, 0))
    start = g.call_function(__import__("operator").mul, (c, 2))
    fw = g.call_function(torch.ops.aten.slice.Tensor, (x, 0, start, 4))
    bw_start = start if backward_literal is None else backward_literal
    bw = g.call_function(torch.ops.aten.slice.Tensor, (x, 0, bw_start, 4))
    bw.meta["autograd_backward"] = True
    g.output((fw, bw))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def write_coor(tmp_path, backward_literal):
    w = CaptureWriter(tmp_path, world_size=2, env={"TORCH_DISTRIBUTED_COMPILE_ON_ONE_RANK": "1"})
    for r in (0, 1):
        rw = w.rank(r, rank_table=mesh_rank_table(r, (2,), ("tp",)))
        if r == 0:  # only the compiling rank runs passes
            rw.apply("trace_joint", coor_graph(None), coor_graph(backward_literal))
        rw.end()
    return open_capture(w.finish())


def test_rank_agnostic_graph_from_compile_on_one_rank(tmp_path):
    report = check_report(write_coor(tmp_path, None))
    assert kinds(report.findings) == []
    assert any("compile on one rank" in n for n in report.notes)


def test_compile_on_one_rank_flags_the_compiling_ranks_value(tmp_path):
    fs = run_checks(write_coor(tmp_path, 0))  # rank 0's coordinate * 2 == 0, baked into backward
    rb = [f for f in fs if f.kind == "rank-baked-constant"]
    assert len(rb) == 1 and rb[0].severity == "error" and rb[0].introduced_by == "trace_joint"
    assert rb[0].evidence["runtime_twin"] == "slice_1" or rb[0].evidence["runtime_twin"].startswith("slice")
    assert rb[0].evidence["backward"] is True and rb[0].evidence["value"] == 0


def chunk_graph(index: int | None, enumerate_all: bool = False):
    """x viewed as [2, 4]: select chunk `index` of the mesh-sized dimension (literal), or all."""

    def f(x):
        v = x.view(2, 4)
        if enumerate_all:
            return torch.ops.aten.select.int(v, 0, 0) + torch.ops.aten.select.int(v, 0, 1)
        return torch.ops.aten.select.int(v, 0, index)

    return make_fx(f)(torch.randn(8))


def write_coor_chunk(tmp_path, gm):
    w = CaptureWriter(tmp_path, world_size=2, env={"TORCH_DISTRIBUTED_COMPILE_ON_ONE_RANK": "1"})
    for r in (0, 1):
        rw = w.rank(r, rank_table=mesh_rank_table(r, (2,), ("dp",)))
        if r == 0:
            rw.apply("noop", gm, identity_pass(gm))
        rw.end()
    return open_capture(w.finish())


def test_compile_on_one_rank_chunk_at_the_compiling_ranks_coordinate(tmp_path):
    fs = run_checks(write_coor_chunk(tmp_path / "bug", chunk_graph(0)))
    assert [(f.kind, f.introduced_by, f.node) for f in fs] == [("rank-baked-constant", "trace", "select")]
    assert fs[0].evidence["equals"] == "coordinate[dp]" and fs[0].evidence["chunks"] == 2
    # enumerating every chunk of the dimension is rank-agnostic
    assert run_checks(write_coor_chunk(tmp_path / "enum", chunk_graph(None, enumerate_all=True))) == []
    # chunk 1 is not the compiling rank's (rank 0) chunk
    assert run_checks(write_coor_chunk(tmp_path / "other", chunk_graph(1))) == []


def _const_program(rank):
    return lambda x: x.sum() + torch.tensor([rank, 7]).sum()


def test_tensor_constant_whose_value_never_shows_in_the_code(tmp_path):
    """torch.tensor([rank, 7]) becomes a real constant: the two ranks print the same code."""
    w = CaptureWriter(tmp_path, world_size=2)
    for r in (0, 1):
        rw = w.rank(r)
        rw.apply("bake", make_fx(lambda x: x.sum())(torch.randn(4)), make_fx(_const_program(r))(torch.randn(4)))
        rw.end()
    cap = open_capture(w.finish())
    gids = {r: cap.passes(r)[0].after["out"] for r in (0, 1)}
    # the same code; the graph ids differ because they cover the node table, which holds the value
    assert cap.graph_code(0, gids[0]) == cap.graph_code(1, gids[1]) and gids[0] != gids[1]
    fs = run_checks(cap)
    assert [(f.kind, f.evidence["where"], f.evidence["values"]) for f in fs] == [
        ("rank-baked-constant", "attr.value[0]", {"0": 0, "1": 1})
    ]


# ---------------------------------------------------------------------------------------------
# A rank literal planted only in the backward (an autograd.Function's backward under torch.compile,
# 2 gloo ranks): after the partitioner, the literals of one op and value are split over the forward
# and backward graphs; each is blamed in the graph it lives in, an error there, none "gone after" the
# partitioner (tests/programs/backward_literal_compile.py).


@pytest.mark.slow
def test_backward_only_literal_is_an_error_in_the_backward_graph(tmp_path):
    out = tmp_path / "cap"
    r = run_cli(
        "capture", "--out", str(out), "--", *torchrun(2, "tests.programs.backward_literal_compile"), timeout=600
    )
    assert r.returncode == 0, r.stderr[-4000:]
    # each rank compiled for itself: info there; the grading below is that of a shared graph
    assert run_cli("check", str(out)).returncode == 0
    r = run_cli("check", str(out), "--json", "--shared-graph")
    assert r.returncode == 1, r.stderr
    every = every_finding(json.loads(r.stdout))
    fs = [f for f in every if f["kind"] == "rank-baked-constant" and f["layer"] == "graph"]
    assert not [f["message"] for f in fs if "gone after" in f["message"] or f["severity"] != "error"]
    bwd = [f for f in fs if f["evidence"].get("lives_in") == "backward"]
    assert bwd and all("lives in the backward graph" in f["message"] for f in bwd)
    # graded in the graph it lives in: the backward's final graph is the one its chain ends in
    assert all(
        f["evidence"]["graph_now"] != f["graph"] and f["pass"] != "min_cut_rematerialization_partition" for f in bwd
    )
    lines = {f["source"]["line"] for f in bwd if f["source"]}
    src = open("tests/programs/backward_literal_compile.py").read().splitlines()
    assert any("* (dist.get_rank() + 1)" in src[n - 1] for n in lines)


def test_a_mesh_coordinate_matched_exactly_is_named_before_an_offset_of_the_rank():
    from graphtrain_inspect.inspector.checks.rank_baked_constant import match_vectors

    vectors = {"rank": {2: 2, 3: 3}, "coordinate[pp]": {2: 1, 3: 1}, "coordinate[dp]": {2: 0, 3: 1}}
    matches = match_vectors({2: 0, 3: 1}, vectors)
    assert [m.get("form") or m["vector"] for m in matches] == ["coordinate[dp]", "rank - 2"]
    # a multiple of the coordinate still before the rank's offset
    matches = match_vectors({2: 0, 3: 4}, vectors)
    assert (matches[0]["vector"], matches[0]["relation"]) == ("coordinate[dp]", "multiple")


def test_a_coordinate_times_a_shard_length_names_the_shard_size(tmp_path):
    def shard_offset(coord: int, group: str):
        def f(x, w):  # w: this rank's 4 rows; the offset of its shard baked as an int
            return torch.ops.aten.sub.Tensor(x, 4 * coord) + w.sum()

        return make_fx(f, tracing_mode="fake")(torch.randint(0, 8, (6,)), torch.randn(4, 2))

    cap = open_capture(write_mesh_capture(tmp_path, shard_offset, bug_in_pass=True))
    (f,) = [f for f in run_checks(cap) if f.kind == "rank-baked-constant"]
    assert f.message.endswith("equals 4 * coordinate[tp] (shard size 4)")
