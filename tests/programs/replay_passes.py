"""Small passes for the replay tests, captured in-process (tests/replay/test_replay_small.py)."""

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


def pad_rows(gm, example_inputs):
    """Appends a zero row to the output, with its fake value computed under the graph's fake
    mode (on the graph's device: a GPU capture's fake cuda tensors, replayed on a CPU machine)."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    val = out.args[0][0]
    fake = val.meta["val"]
    with gm.graph.inserting_before(out):
        zeros = gm.graph.call_function(
            torch.ops.aten.new_zeros.default, (val, [1, fake.shape[1]]), {"device": fake.device}
        )
        cat = gm.graph.call_function(torch.ops.aten.cat.default, ([val, zeros],))
    with fake.fake_mode:
        zeros.meta["val"] = torch.ops.aten.new_zeros.default(fake, [1, fake.shape[1]], device=fake.device)
        cat.meta["val"] = torch.ops.aten.cat.default([fake, zeros.meta["val"]])
    out.replace_input_with(val, cat)
    gm.recompile()
    return gm
