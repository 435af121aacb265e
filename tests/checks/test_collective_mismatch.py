"""collective-mismatch (inspector/checks/collective_mismatch.py) and the collective sequences it
compares (inspector/diff/collectives.py), on hand-built graphs written as a capture; and, on a real
2-rank torch.compile (tests/programs/partitioner_recompute.py), AOTAutograd's min-cut partitioner
recomputing the FSDP all-gather in one rank's backward only (the bug pytorch/pytorch#146707
reports) and its two upstream fixes."""

from __future__ import annotations

import json

import pytest
import torch
import torch.distributed  # registers the functional collectives
import torch.fx

from graphtrain_inspect.inspector.checks import run_checks
from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.diff.collectives import (
    Collective,
    code_collectives,
    compare,
    describe_part,
    group_label,
    is_communication_target,
)
from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.capture_utils import capture, every_finding, run_cli, torchrun
from tests.small_captures import CaptureWriter, mesh_rank_table

F = torch.ops._c10d_functional
aten = torch.ops.aten


def _graph(group: str, *, gather_in_bwd: bool = False, recompute: bool = False, size: int = 8, nested: bool = False):
    """A forward all_gather over `group` and a backward reduce_scatter; `gather_in_bwd`: the backward
    gathers again (a recomputed all-gather); `recompute`: the backward recomputes a neg (compute
    only); `nested`: the backward's reduce_scatter sits in a nested subgraph."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = torch.empty(size // 2, 4)

    def node(target, args, name, val, bwd=False):
        n = g.create_node("call_function", target, args, name=name)
        n.meta["val"] = val
        if bwd:
            n.meta["autograd_backward"] = True
        return n

    ag = node(F.all_gather_into_tensor.default, (x, 2, group), "all_gather_into_tensor", torch.empty(size, 4))
    w = node(F.wait_tensor.default, (ag,), "wait_tensor", torch.empty(size, 4))
    y = node(aten.neg.default, (w,), "neg", torch.empty(size, 4))
    src = w
    if gather_in_bwd:
        ag2 = node(F.all_gather_into_tensor.default, (x, 2, group), "all_gather_1", torch.empty(size, 4), True)
        src = node(F.wait_tensor.default, (ag2,), "wait_1", torch.empty(size, 4), True)
    if recompute:
        src = node(aten.neg.default, (src,), "neg_recomputed", torch.empty(size, 4), True)
    if nested:
        body = torch.fx.Graph()
        a = body.placeholder("a")
        rs_b = body.create_node("call_function", F.reduce_scatter_tensor.default, (a, "sum", 2, group), name="rs")
        rs_b.meta["val"] = torch.empty(size // 2, 4)
        body.output(rs_b)
        root = torch.nn.Module()
        root.body = torch.fx.GraphModule(torch.nn.Module(), body)
        attr = g.get_attr("body")
        half = torch.empty(size // 2, 4)
        rs = node(torch.ops.higher_order.invoke_subgraph, (attr, "body", src), "invoke", half, True)
        g.output((y, rs))
        return torch.fx.GraphModule(root, g)
    half = torch.empty(size // 2, 4)
    rs = node(F.reduce_scatter_tensor.default, (src, "sum", 2, group), "reduce_scatter", half, True)
    rw = node(F.wait_tensor.default, (rs,), "wait_2", torch.empty(size // 2, 4), True)
    g.output((y, rw))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def _capture(tmp_path, after, *, later: bool = False, mesh: tuple[int, ...] = (2,)) -> str:
    """The ranks of a dp (x tp) mesh, each naming its dp group its own way; `after(rank, group)`
    is the pass's output on that rank; `later`: one more pass that returns its input unchanged."""
    n = 1
    for s in mesh:
        n *= s
    w = CaptureWriter(tmp_path, world_size=n)
    for r in range(n):
        table = mesh_rank_table(r, mesh, ("dp", "tp")[: len(mesh)], group_base=1 + 3 * r)
        group = table["meshes"][0]["group_names"]["dp"]
        rw = w.rank(r, rank_table=table)
        out = after(r, group)
        rw.apply("partition", _graph(group), out)
        if later:
            rw.apply("tidy", after(r, group), after(r, group))
        rw.end()
    return w.finish()


def test_sequence_is_ordered_named_by_role_and_leaves_waits_out(tmp_path):
    cap = open_capture(_capture(tmp_path, lambda r, g: _graph(g, gather_in_bwd=True), mesh=(2, 2)))
    ctx = CheckContext(cap)
    seqs = {r: ctx.collectives(ctx.index.by_rank[r][-1]) for r in range(4)}
    # each rank names its dp group its own way; the sequence names it by its role
    names = {r: cap.rank_table(r)["meshes"][0]["group_names"]["dp"] for r in range(4)}
    assert len(set(names.values())) == 4
    assert seqs[0] is not None and all([c.kind for c in seqs[0]] == [c.kind for c in seqs[r]] for r in range(4))  # type: ignore[union-attr]
    assert [(c.op, c.group_label(), c.phase, c.shapes) for c in seqs[0]] == [
        ("all_gather_into_tensor", "dp", "forward", ((8, 4),)),
        ("all_gather_into_tensor", "dp", "backward", ((8, 4),)),
        ("reduce_scatter_tensor", "dp", "backward", ((4, 4),)),
    ]
    assert not is_communication_target("_c10d_functional.wait_tensor.default")
    assert not is_communication_target("device_mesh._runtime_compute_coordinate_on_dim.default")
    assert is_communication_target("c10d.allreduce_.default") and is_communication_target("_dtensor.shard_dim_alltoall")
    assert group_label("<pg:mesh.batch+fsdp[4]>") == "batch+fsdp" and group_label("<pg:world>") == "world"


def test_nested_subgraph_collectives_sit_where_the_subgraph_is_called(tmp_path):
    ctx = CheckContext(open_capture(_capture(tmp_path, lambda r, g: _graph(g, nested=True))))
    seq = ctx.collectives(ctx.index.by_rank[1][-1])
    assert seq is not None
    assert [(c.op, c.subgraph) for c in seq] == [("all_gather_into_tensor", ""), ("reduce_scatter_tensor", "body")]


def test_compare_sizes_as_far_as_symbols_allow():
    def c(op, shape, bwd=False):
        return Collective(op, "<pg:world>", (shape,), "float32", bwd, "n")

    assert compare([c("all_gather_into_tensor", (8, 4))], [c("all_gather_into_tensor", ("s0", 4))]) == []
    [p] = compare([c("all_gather_into_tensor", (8, 4))], [c("all_gather_into_tensor", (16, 4))])
    assert p.how == "size" and "[16, 4] float32 on rank 1 and [8, 4] float32 on rank 0" in describe_part(p, 0, 1)
    # all_to_all moves each rank's own amount: its sizes are not compared
    assert compare([c("all_to_all_single", (3, 4))], [c("all_to_all_single", (5, 4))]) == []
    [p] = compare([c("all_reduce", (4,))], [c("all_reduce", (4,)), c("all_reduce", (4,), True)])
    assert describe_part(p, 0, 1) == "rank 1's backward runs 1 all_reduce (group world) that rank 0's does not"
    assert code_collectives(
        [
            "buf0 = torch.ops._c10d_functional.all_gather_into_tensor.default(arg0_1, 2, '<group:world>')",
            "torch.ops._c10d_functional.wait_tensor.default(buf0)",
        ]
    ) == [("all_gather_into_tensor", ("<group:world>",))]


def test_a_pass_that_parts_the_collectives_is_one_error_at_that_pass(tmp_path):
    path = _capture(tmp_path, lambda r, g: _graph(g, gather_in_bwd=r == 1), later=True)
    fs = run_checks(open_capture(path))
    [f] = [f for f in fs if f.kind == "collective-mismatch"]
    got = (f.severity, f.introduced_by, f.pass_, f.ranks, f.node)
    assert got == ("error", "partition", "tidy", [0, 1], "all_gather_1")
    assert f.message.startswith(
        "rank 1's backward runs 1 all_gather_into_tensor (group world) that rank 0's does not: the ranks would hang"
    )
    assert f.evidence["differences"] == {"1": [f.message.split(":")[0]]}
    # the structural divergence is the same root cause: info, pointing at the collectives
    [d] = [f for f in fs if f.kind == "rank-divergent-graph"]
    assert d.severity == "info" and "see collective-mismatch" in d.message


def test_compute_only_divergence_is_info_per_rank_and_an_error_shared(tmp_path):
    path = _capture(tmp_path, lambda r, g: _graph(g, recompute=r == 1))
    fs = run_checks(open_capture(path))
    assert [f.kind for f in fs if f.kind == "collective-mismatch"] == []
    [d] = [f for f in fs if f.kind == "rank-divergent-graph"]
    assert d.severity == "info" and d.evidence["collectives_agree"] and d.evidence["severity_if_shared"] == "error"
    assert "only in what they compute" in d.message
    [d] = [f for f in run_checks(open_capture(path), shared_graph=True) if f.kind == "rank-divergent-graph"]
    assert d.severity == "error" and d.evidence["shared"]


# ---------------------------------------------------------------------------------------------
# the real partitioner on 2 gloo ranks


@pytest.fixture(scope="module")
def partitioner(tmp_path_factory):
    caps = {}
    # the bug and the no-recompute fix are about the partitioner's FX outputs: the same partitioner
    # without Inductor's code (a third of the CPU time); the synced fix under Inductor, whose code
    # still differs by rank (buffers reused from each rank's size hints)
    eager = ["--backend", "aot_eager_decomp_partition"]
    variants = (
        ("bug", eager),
        ("sync", ["--fix", "sync"]),
        ("no-recompute", ["--fix", "no-collective-recompute", *eager]),
    )
    for name, extra in variants:
        out = tmp_path_factory.mktemp("partitioner") / name
        r = capture(out, torchrun(2, "tests.programs.partitioner_recompute", *extra))
        assert r.returncode == 0, r.stderr[-4000:]
        caps[name] = out
    return caps


def _check(path):
    r = run_cli("check", str(path), "--json")
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, every_finding(json.loads(r.stdout))


def _harness(f) -> bool:
    """A literal of Inductor's benchmark harness (`get_args`: the rank's example sizes), which is
    not training: another check's business."""
    ev = f["evidence"]
    codegen_literal = f["kind"] == "rank-baked-constant" and f["layer"] == "codegen"
    return codegen_literal and ev.get("fx_node") is None and not ev.get("kernel")


@pytest.mark.slow
def test_partitioner_recomputing_an_all_gather_on_one_rank_would_hang(partitioner):
    rc, fs = _check(partitioner["bug"])
    serious = [f for f in fs if f["severity"] != "info" and not _harness(f)]
    assert rc == 1 and [(f["kind"], f["severity"]) for f in serious] == [("collective-mismatch", "error")], serious
    [f] = serious
    assert f["introduced_by"] == "min_cut_rematerialization_partition" and f["ranks"] == [0, 1]
    assert f["evidence"]["stage"] == "min_cut_rematerialization_partition:bw"
    assert f["message"].startswith(
        "rank 1's backward runs 1 all_gather_into_tensor (group world) that rank 0's does not: the ranks would hang"
    )
    assert f["node"].startswith("all_gather_into_tensor")
    # the forward's divergence (what each rank saves) changes no collective
    fw = [x for x in fs if x["kind"] == "rank-divergent-graph" and x["evidence"].get("collectives_agree")]
    assert fw and all(x["severity"] == "info" for x in fw)


@pytest.mark.slow
@pytest.mark.parametrize("fix", ["sync", "no-recompute"])
def test_partitioner_fixes_are_quiet(partitioner, fix):
    rc, fs = _check(partitioner[fix])
    assert [f for f in fs if f["severity"] != "info" and not _harness(f)] == []
    if fix == "no-recompute":
        # the ranks still recompute different compute: info, with why
        infos = [f for f in fs if f["kind"] == "rank-divergent-graph"]
        assert infos and all(f["severity"] == "info" and f["evidence"]["collectives_agree"] for f in infos)
    else:
        # one saved set on every rank: the FX graphs agree; Inductor's code may still differ by rank
        assert [f for f in fs if f["kind"] in ("rank-divergent-graph", "collective-mismatch")] == []
        code = [f for f in fs if f["kind"] == "codegen-divergent"]
        assert all(f["severity"] == "info" and f["evidence"]["collectives_agree"] for f in code)
