"""Passes of tests/programs/inspector_planted.py, each planting one bug an inspector check must find.

Kept in their own module so a capture can wrap them by name (`--pass
tests.programs.inspector_planted_passes:PASSES`) while the program runs as `__main__`.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv

CLEAN = os.environ.get("GTI_PLANTED_CLEAN") == "1"


def program(static: bool):
    def f(x, y):
        nz = torch.ops.aten.nonzero_static.default(x, size=3) if static else torch.nonzero(x)

        def big(a, b):
            return a.sum() + b.float().sum()

        def small(a, b):
            return a.sum() - 1

        r = torch.cond(x.sum() > 0, big, small, (y, nz))
        out = r + y.sum()
        if dist.is_initialized():
            out = funcol.all_reduce(out, "sum", dist.group.WORLD)
        return out

    return f


def trace(static: bool = False) -> torch.fx.GraphModule:
    torch._dynamo.reset()
    fm = FakeTensorMode(shape_env=ShapeEnv())
    with fm:
        x = fm.from_tensor(torch.tensor([1, 0, 2]))
        y = fm.from_tensor(torch.randn(4))
        return make_fx(program(static))(x, y)


def _output_value(gm):
    out = next(n for n in gm.graph.nodes if n.op == "output")
    return out, out.args[0]


def remove_dead_code(gm, example_inputs):
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def bake_rank(gm, example_inputs):
    rank = int(os.environ.get("RANK", 0))
    out, val = _output_value(gm)
    with gm.graph.inserting_before(out):
        zero = gm.graph.call_function(torch.ops.aten.mul.Tensor, (val, 0))
        rk = gm.graph.call_function(torch.ops.aten.mul.Tensor, (zero, rank))  # BUG: the rank literal
        new = gm.graph.call_function(torch.ops.aten.add.Tensor, (val, rk))
    for n in (zero, rk, new):
        n.meta["val"] = val.meta.get("val")
    out.replace_input_with(val, new)
    gm.recompile()
    return gm


def pin_device(gm, example_inputs):
    local = int(os.environ.get("LOCAL_RANK", 0))
    out, val = _output_value(gm)
    with gm.graph.inserting_before(out):
        z = gm.graph.call_function(torch.ops.aten.zeros.default, ([2],), {"device": torch.device("cpu", local)})  # BUG
        s = gm.graph.call_function(torch.ops.aten.sum.default, (z,))
        new = gm.graph.call_function(torch.ops.aten.add.Tensor, (val, s))
    with FakeTensorMode():
        z.meta["val"] = torch.zeros(2)
        s.meta["val"] = torch.zeros(())
    new.meta["val"] = val.meta.get("val")
    out.replace_input_with(val, new)
    gm.recompile()
    return gm


def concretize_root_only(gm, example_inputs):
    """Root made static; the cond branches are the old ones (BUG: their placeholders keep u0)."""
    new = trace(static=True)
    for name, mod in list(gm.named_children()):
        if isinstance(mod, torch.fx.GraphModule) and hasattr(new, name):
            setattr(new, name, mod)
    new.recompile()
    return new


def rank_local_fusion(gm, example_inputs):
    """Rank 1 recomputes the input sum instead of sharing it (BUG: depends on the rank)."""
    if int(os.environ.get("RANK", 0)) == 1:
        for n in list(gm.graph.nodes):
            if n.op == "call_function" and n.target is torch.ops.aten.sum.default and n.users:
                with gm.graph.inserting_after(n):
                    dup = gm.graph.call_function(n.target, n.args, n.kwargs)
                dup.meta = dict(n.meta)
                user = next(iter(n.users))
                if user is not dup:
                    user.replace_input_with(n, dup)
                break
        gm.recompile()
    return gm


# concretize_root_only re-traces the root: it comes before the passes that edit the root
PASSES = (
    [remove_dead_code] if CLEAN else [remove_dead_code, concretize_root_only, bake_rank, pin_device, rank_local_fusion]
)
