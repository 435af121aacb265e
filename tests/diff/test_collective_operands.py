"""Collectives issued in another order (inspector/diff/collective_operands.py): each collective's
operand identity survives renaming and reordering, so ranks that send the same tensors in another
order are a collective-mismatch, and ranks that send different tensors (a rank's own literal) or
the same in the same order under other names are not. Hand-built graphs written as a capture."""

from __future__ import annotations

import torch
import torch.distributed  # registers the functional collectives
import torch.fx

from graphtrain_inspect.inspector.checks import run_checks
from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.diff.collective_operands import OperandOrder, describe_order, ordinal
from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.small_captures import CaptureWriter, mesh_rank_table

F = torch.ops._c10d_functional
aten = torch.ops.aten


def _grads(group: str, *, order=(0, 1, 2), prefix: str = "", scale: float = 2.0) -> torch.fx.GraphModule:
    """Three gradients (x * w_i * scale) all_reduced over `group` in `order`, nodes named with
    `prefix` (a pass that names nodes anew)."""
    g = torch.fx.Graph()
    ws = [g.placeholder(f"w{i}") for i in range(3)]
    x = g.placeholder("x")
    for p in (*ws, x):
        p.meta["val"] = torch.empty(8, 8)

    def node(target, args, name):
        n = g.create_node("call_function", target, args, name=prefix + name)
        n.meta["val"] = torch.empty(8, 8)
        return n

    prods = [node(aten.mul.Tensor, (x, w), f"mul{i}") for i, w in enumerate(ws)]
    grads = [node(aten.mul.Scalar, (p, scale), f"g{i}") for i, p in enumerate(prods)]
    outs = {}
    for k, i in enumerate(order):
        ar = node(F.all_reduce.default, (grads[i], "sum", group), f"all_reduce{k}")
        outs[i] = node(F.wait_tensor.default, (ar,), f"wait{k}")
    g.output(tuple(outs[i] for i in range(3)))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def _capture(tmp_path, after) -> str:
    w = CaptureWriter(tmp_path, world_size=2)
    for r in range(2):
        table = mesh_rank_table(r, (2,), ("dp",), group_base=1 + 3 * r)
        group = table["meshes"][0]["group_names"]["dp"]
        rw = w.rank(r, rank_table=table)
        rw.apply("schedule", _grads(group), after(r, group))
        rw.end()
    return w.finish()


def _parts(path: str):
    ctx = CheckContext(open_capture(path))
    return ctx.collective_parts(ctx.index.by_rank[1][-1].key, 0, 1), run_checks(open_capture(path))


def test_the_same_collectives_in_another_order_are_a_mismatch(tmp_path):
    path = _capture(tmp_path, lambda r, g: _grads(g, order=(2, 1, 0) if r else (0, 1, 2), prefix=f"r{r}_"))
    [p], fs = _parts(path)
    assert isinstance(p, OperandOrder) and [m["rank_position"] for m in p.moves] == [1, 3]
    assert describe_order(p, 0, 1).startswith(
        "rank 1 issues the all_reduce of r0_g2 (r0_all_reduce2; rank 1: r1_g2) 1st, rank 0 issues it 3rd"
    )
    [f] = [f for f in fs if f.kind == "collective-mismatch"]
    assert (f.severity, f.introduced_by, f.node) == ("error", "schedule", "r0_all_reduce2")
    assert "collectives pair by order, so each rank would reduce another rank's different tensor" in f.message
    assert f.evidence["parts"]["1"][0]["how"] == "order"
    # the structural divergence of the pass is the same root cause
    assert [(c.kind, c.severity) for c in f.consequences] == [("rank-divergent-graph", "info")]
    assert [f.kind for f in fs if f.severity == "error"] == ["collective-mismatch"]


def test_renamed_in_the_same_order_or_computing_other_tensors_is_quiet(tmp_path):
    # the same order under other names on each rank
    parts, fs = _parts(_capture(tmp_path / "renamed", lambda r, g: _grads(g, prefix=f"r{r}_")))
    assert parts == [] and not [f for f in fs if f.kind == "collective-mismatch"]
    # another order of tensors that differ per rank (a rank's own scale): not the same collectives
    other = _capture(tmp_path / "own", lambda r, g: _grads(g, order=(2, 1, 0) if r else (0, 1, 2), scale=1.0 + r))
    parts, fs = _parts(other)
    assert parts == [] and not [f for f in fs if f.kind == "collective-mismatch"]
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 102)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "102nd"
    ]  # fmt: skip
