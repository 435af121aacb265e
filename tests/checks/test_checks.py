"""Each check on hand-built FX graphs written as a capture: true positives and true negatives."""

from __future__ import annotations

import torch
import torch.distributed  # registers the functional collectives
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from graphtrain_inspect.inspector.checks import check_report, run_checks
from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.small_captures import CaptureWriter, mesh_rank_table


def kinds(findings, severity=("error", "warning")):
    return sorted((f.kind, f.introduced_by) for f in findings if f.severity in severity)


def identity_pass(gm):
    return gm


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
# device-baked


def move_all(tensors, devices):
    return [t for t in tensors]


def list_device_graph(device_index: int):
    """A node whose list argument holds a device literal: args[1][0]."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    n = g.call_function(move_all, ([x], [torch.device("cuda", device_index)]))
    g.output(n)
    return torch.fx.GraphModule(torch.nn.Module(), g)


def test_device_literal_inside_a_list_argument(tmp_path):
    w = CaptureWriter(tmp_path, world_size=2)
    for r in (0, 1):
        rw = w.rank(r, own_device=f"cuda:{r}")
        base = torch.fx.GraphModule(torch.nn.Module(), _one_input_graph())
        rw.apply("hoist", base, list_device_graph(0))  # compiled on rank 0: cuda:0 everywhere
        rw.end()
    fs = run_checks(open_capture(w.finish()))
    dev = [f for f in fs if f.kind == "device-baked"]
    assert len(dev) == 1
    f = dev[0]
    assert f.ranks == [1] and f.severity == "error" and f.introduced_by == "hoist"
    assert f.evidence["where"] == "args[1][0]" and f.evidence["device"] == "cuda:0"
    assert f.evidence["own_device"] == "cuda:1"


def _one_input_graph():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output(x)
    return g


def test_device_constant_on_foreign_device(tmp_path):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("buf", torch.zeros(2, device="meta"))

    w = CaptureWriter(tmp_path, world_size=2)
    for r in (0, 1):
        rw = w.rank(r, own_device=f"cuda:{r}")
        g = torch.fx.Graph()
        x = g.placeholder("x")
        b = g.get_attr("buf")
        g.output((x, b))
        gm = torch.fx.GraphModule(M(), g)
        # the device table says where the buffer lives; simulate a .cuda() to cuda:0
        rw.own_device = f"cuda:{r}"
        gid = rw.graph(gm)
        _patch_devices(
            rw,
            gid,
            {"graph": "", "node": "buf", "kind": "buffer", "device": "cuda:0", "dtype": "float32", "shape": [2]},
        )
        rw.apply("to_cuda", torch.fx.GraphModule(torch.nn.Module(), _one_input_graph()), gm)
        rw.end()
    fs = [f for f in run_checks(open_capture(w.finish())) if f.kind == "device-baked"]
    assert [(f.ranks, f.node, f.evidence["source"]) for f in fs] == [([1], "buf", "buffer")]


def _patch_devices(rw, gid, value):
    """Rewrite the last gti_devices record of `gid` with one more value entry (a buffer on CUDA)."""
    import orjson

    from graphtrain_inspect.capture import logformat

    rw.f.flush()
    data = open(rw.path, "rb").read().split(b"\n")
    # records are: ... gti_devices envelope, payload line; find the envelope for gid
    for i in range(len(data) - 1, -1, -1):
        if b'"gti_devices"' in data[i] and gid.encode() in data[i]:
            payload = orjson.loads(data[i + 1][1:])
            payload["values"].append(value)
            rec = logformat.encode_record(logformat.DEVICES, payload, rank=rw.rank, meta={"gid": gid})
            data[i : i + 2] = rec.rstrip(b"\n").split(b"\n")
            break
    rw.f.close()
    with open(rw.path, "wb") as f:
        f.write(b"\n".join(data))
    rw.f = open(rw.path, "ab")


def _zeros_on(r):
    return lambda x: x + torch.zeros(2, device=torch.device("cpu", r))


def test_device_literal_differing_by_rank_on_cpu(tmp_path):
    w = CaptureWriter(tmp_path, world_size=2)
    for r in (0, 1):
        rw = w.rank(r)  # own device cpu: the literal cpu:<local rank> is only visible across ranks
        before = make_fx(lambda x: x + torch.zeros(2))(torch.randn(2))
        after = make_fx(_zeros_on(r))(torch.randn(2))
        rw.apply("place", before, after)
        rw.end()
    fs = [f for f in run_checks(open_capture(w.finish())) if f.kind == "device-baked"]
    assert len(fs) == 1 and fs[0].severity == "error" and fs[0].introduced_by == "place"
    assert fs[0].evidence["values"] == {"0": "cpu:0", "1": "cpu:1"}
    assert fs[0].evidence["matches"][0]["vector"] == "rank"


def test_own_device_literals_are_info_per_rank_and_once_fixed(tmp_path):
    """cuda:<own> on every rank (what make_fx records on GPUs): fine per rank (info), wrong if
    shared (tests/test_device_policy.py)."""
    w = CaptureWriter(tmp_path / "kept", world_size=2)
    for r in (0, 1):
        rw = w.rank(r, own_device=f"cuda:{r}")
        rw.apply("place", torch.fx.GraphModule(torch.nn.Module(), _one_input_graph()), list_device_graph(r))
        rw.end()
    fs = run_checks(open_capture(w.finish()))
    assert [(f.kind, f.severity, f.evidence["source"]) for f in fs] == [("device-baked", "info", "own-device")]
    assert fs[0].evidence["values"] == {"0": "cuda:0", "1": "cuda:1"}
    # a later pass that makes the device index-less repairs it: info, naming the pass
    w = CaptureWriter(tmp_path / "fixed", world_size=2)
    for r in (0, 1):
        rw = w.rank(r, own_device=f"cuda:{r}")
        rw.apply("trace_like", torch.fx.GraphModule(torch.nn.Module(), _one_input_graph()), list_device_graph(r))
        rw.apply("place_devices", list_device_graph(r), _indexless_device_graph())
        rw.end()
    fs = run_checks(open_capture(w.finish()))
    assert [(f.severity, f.introduced_by, f.pass_, f.evidence["fixed_by"]) for f in fs] == [
        ("info", "trace_like", "trace_like", "place_devices")
    ]


def _indexless_device_graph():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    n = g.call_function(move_all, ([x], [torch.device("cuda")]))
    g.output(n)
    return torch.fx.GraphModule(torch.nn.Module(), g)


# ---------------------------------------------------------------------------------------------
# stale-unbacked-symbol


def _cond_program(static: bool):
    def f(x, y):
        nz = torch.ops.aten.nonzero_static.default(x, size=3) if static else torch.nonzero(x)

        def t(a, b):
            return a.sum() + b.float().sum()

        def e(a, b):
            return a.sum() - 1

        return torch.cond(x.sum() > 0, t, e, (y, nz))

    return f


def traced_cond():
    torch._dynamo.reset()  # torch.cond compiles its branches; stale guards break a second trace
    fm = FakeTensorMode(shape_env=ShapeEnv())
    with fm:
        x = fm.from_tensor(torch.tensor([1, 0, 2]))
        y = fm.from_tensor(torch.randn(4))
        return make_fx(_cond_program(False))(x, y)


def concretize_root_only(gm):
    """The buggy concretization pass: rewrites the root (nonzero -> nonzero_static, concrete
    shapes) but leaves the cond branches, whose placeholders still carry u0."""
    torch._dynamo.reset()
    fm = FakeTensorMode(shape_env=ShapeEnv())
    with fm:
        x = fm.from_tensor(torch.tensor([1, 0, 2]))
        y = fm.from_tensor(torch.randn(4))
        new = make_fx(_cond_program(True))(x, y)
    for name in ("true_graph_0", "false_graph_0"):
        setattr(new, name, getattr(gm, name))
    new.recompile()
    return new


def test_stale_symbol_only_in_nested_subgraph_placeholder(tmp_path):
    w = CaptureWriter(tmp_path, world_size=1)
    rw = w.rank(0)
    gm = traced_cond()
    rw.apply("concretize", gm, concretize_root_only(gm))
    rw.end()
    fs = [f for f in run_checks(open_capture(w.finish())) if f.kind == "stale-unbacked-symbol"]
    assert fs, "u0 in the branches' placeholders is bound by nothing once the root no longer has it"
    assert {f.subgraph for f in fs} == {"true_graph_0", "false_graph_0"}
    for f in fs:
        assert f.severity == "error" and f.introduced_by == "concretize"
        assert f.evidence["symbol"] == "u0" and f.evidence["in_placeholder"] is True
        assert f.evidence["bindings"].startswith("captured")


def test_lifted_symbols_are_not_stale(tmp_path):
    w = CaptureWriter(tmp_path, world_size=1)
    rw = w.rank(0)
    gm = traced_cond()
    # the branches take u0 as a Sym(u0) placeholder and a tensor of shape (u0, 1): lifted, bound
    code = gm.print_readable(print_output=False)
    assert "Sym(u0)" in code
    rw.apply("noop", gm, identity_pass(gm))
    rw.end()
    assert kinds(run_checks(open_capture(w.finish()))) == []


def test_copied_meta_without_bindings_is_stale(tmp_path):
    """nonzero swapped for nonzero_static with the old meta copied: u0 now bound by nothing."""
    gm = traced_cond()
    after = traced_cond()
    for n in after.graph.nodes:
        if n.target is torch.ops.aten.nonzero.default:
            n.target = torch.ops.aten.nonzero_static.default
            n.kwargs = {"size": 3}
            n.meta.pop("unbacked_bindings", None)
    after.recompile()
    w = CaptureWriter(tmp_path, world_size=1)
    rw = w.rank(0)
    rw.apply("static_nonzero", gm, after)
    rw.end()
    fs = [f for f in run_checks(open_capture(w.finish())) if f.kind == "stale-unbacked-symbol"]
    root = [f for f in fs if f.subgraph is None]
    assert root and root[0].node == "nonzero" and root[0].introduced_by == "static_nonzero"


def test_stale_symbol_from_text_only_is_a_warning():
    from graphtrain_inspect.inspector.checks.stale_unbacked_symbol import stale_symbols
    from graphtrain_inspect.inspector.read.fxtext import parse_graph_code
    from graphtrain_inspect.inspector.read.graphmodel import GraphTables

    code = concretize_root_only(traced_cond()).print_readable(print_output=False)
    parsed, _ = parse_graph_code(code)
    obs = stale_symbols(GraphTables.from_payload("g", parsed, source="text"), None)
    assert {o.subgraph for o in obs} == {"true_graph_0", "false_graph_0"}
    assert all(o.severity == "warning" for o in obs)
    lifted, _ = parse_graph_code(traced_cond().print_readable(print_output=False))
    assert stale_symbols(GraphTables.from_payload("g", lifted, source="text"), None) == []


# ---------------------------------------------------------------------------------------------
# rank-divergent-graph


def test_rank_divergent_pass(tmp_path):
    before = lambda: make_fx(lambda x: (x * 2).sum())(torch.randn(4))  # noqa: E731
    w = CaptureWriter(tmp_path, world_size=2)
    for r in (0, 1):
        rw = w.rank(r)
        b = before()
        rw.apply("dce", b, before())
        # a pass whose decision depends on the rank: rank 1 fuses differently
        after = (
            make_fx(lambda x: (x * 2).sum())(torch.randn(4))
            if r == 0
            else make_fx(lambda x: (x + x).sum(0).sum())(torch.randn(4))
        )
        rw.apply("fuse", before(), after)
        rw.end()
    fs = run_checks(open_capture(w.finish()))
    div = [f for f in fs if f.kind == "rank-divergent-graph"]
    assert len(div) == 1
    assert div[0].introduced_by == "fuse" and div[0].severity == "error" and div[0].ranks == [0, 1]
    assert div[0].evidence["differences"]


def test_same_graphs_are_not_divergent(tmp_path):
    w = CaptureWriter(tmp_path, world_size=2)
    for r in (0, 1):
        rw = w.rank(r)
        g = make_fx(lambda x: (x * 2).sum())(torch.randn(4))
        rw.apply("p", g, make_fx(lambda x: (x + x).sum())(torch.randn(4)))
        rw.end()
    assert kinds(run_checks(open_capture(w.finish()))) == []


def test_pass_missing_on_a_rank(tmp_path):
    w = CaptureWriter(tmp_path, world_size=2)
    for r in (0, 1):
        rw = w.rank(r)
        g = make_fx(lambda x: (x * 2).sum())(torch.randn(4))
        rw.apply("p", g, make_fx(lambda x: (x + x).sum())(torch.randn(4)))
        if r == 0:
            rw.apply(
                "only_on_rank0",
                make_fx(lambda x: (x + x).sum())(torch.randn(4)),
                make_fx(lambda x: (x + x).sum(0))(torch.randn(4)),
            )
        rw.end()
    fs = [f for f in run_checks(open_capture(w.finish())) if f.kind == "rank-divergent-graph"]
    assert len(fs) == 1 and fs[0].evidence["not_on"] == [1]


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
