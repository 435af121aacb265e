"""The pass pipeline of the 3-D mesh sample (`samples/mesh3d.py`): plain `(gm, example_inputs) -> gm`
functions listed in PIPELINE, the one place a capture wraps them
(`--pass graphtrain_inspect.samples.mesh3d_passes:PIPELINE`)."""

from __future__ import annotations

import torch

from graphtrain_inspect.samples.passes.dce import remove_dead_code

aten = torch.ops.aten


def fold_scale_by_one(gm, example_inputs):
    """`x * 1.0` (the gradient scale 1 / dp of a world without data parallelism) -> x. Only the float
    scale: an int factor is the model's (and folding `* 1` on one rank only would make ranks diverge)."""
    for node in list(gm.graph.nodes):
        if (
            node.op == "call_function"
            and node.target is aten.mul.Tensor
            and len(node.args) == 2
            and isinstance(node.args[1], float)
            and node.args[1] == 1.0
        ):
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
    gm.graph.lint()
    gm.recompile()
    return gm


PIPELINE = [remove_dead_code, fold_scale_by_one]


def run_pipeline(gm, example_inputs):
    for p in PIPELINE:
        out = p(gm, example_inputs)
        gm = out if out is not None else gm
    return gm
