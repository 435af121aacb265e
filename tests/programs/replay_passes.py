"""Small passes for the replay tests, captured in-process (tests/test_replay_small.py)."""

from __future__ import annotations

import functools
import os

import torch


def scale_output(gm, example_inputs, *, factor):
    """Multiplies the output by `factor` (configuration bound with functools.partial, as
    torchtitan-style registries do)."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    val = out.args[0][0]
    with gm.graph.inserting_before(out):
        new = gm.graph.call_function(torch.ops.aten.mul.Tensor, (val, factor))
    new.meta["val"] = val.meta.get("val")
    out.replace_input_with(val, new)
    gm.recompile()
    return gm


def add_rank(gm, example_inputs):
    """Adds torch.distributed's rank and LOCAL_RANK to the output (rank-dependent on purpose)."""
    import torch.distributed as dist

    rank = dist.get_rank() if dist.is_initialized() else -1
    local = int(os.environ.get("LOCAL_RANK", "-1"))
    out = next(n for n in gm.graph.nodes if n.op == "output")
    val = out.args[0][0]
    with gm.graph.inserting_before(out):
        a = gm.graph.call_function(torch.ops.aten.add.Tensor, (val, rank))
        b = gm.graph.call_function(torch.ops.aten.add.Tensor, (a, local))
    a.meta["val"] = b.meta["val"] = val.meta.get("val")
    out.replace_input_with(val, b)
    gm.recompile()
    return gm


def explode(gm, example_inputs):
    raise ValueError("explode always raises")


PASSES = [functools.partial(scale_output, factor=3)]
