"""Passes of tests/programs/precompile_load.py, in their own module so a capture can wrap them by
name while the program runs as `__main__`.

COMPILE_TIME run on the compiling rank only (rank 0), LOAD_TIME on every rank after it loaded the
broadcast graph (as torchtitan's precompile hoists the device at load), PER_LAYER on each layer's
graph of the per-layer compile.
"""

from __future__ import annotations

import torch
import torch.fx

from tests.programs import inspector_planted_passes as planted

PLANT_SECOND_LAYER = False
_concretized = 0


def remove_detach(gm, example_inputs):
    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target is torch.ops.aten.detach.default:
            n.replace_all_uses_with(n.args[0])
            gm.graph.erase_node(n)
    gm.recompile()
    return gm


def fold_views(gm, example_inputs):
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target is not torch.ops.aten.view.default:
            continue
        src = n.args[0].meta.get("val")
        if src is not None and list(src.shape) == list(n.args[1]):
            n.replace_all_uses_with(n.args[0])
            gm.graph.erase_node(n)
    gm.recompile()
    return gm


def remove_dead_code(gm, example_inputs):
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def hoist_device(gm, example_inputs):
    """Every device literal to this process's device (torchtitan's `_hoist_graph_device_to_current`)."""
    here = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    for n in gm.graph.nodes:
        if isinstance(n.kwargs.get("device"), torch.device):
            n.update_kwarg("device", here)
    gm.recompile()
    return gm


def trace_layer() -> torch.fx.GraphModule:
    """One MoE-style layer: token routing by `nonzero` (an unbacked count) under a cond."""
    return planted.trace(static=False)


def concretize(gm, example_inputs):
    """Every graph static, the cond branches included; with PLANT_SECOND_LAYER the second call
    rewrites the root only (BUG: the old branches' placeholders keep the unbacked symbol)."""
    global _concretized
    _concretized += 1
    if PLANT_SECOND_LAYER and _concretized == 2:
        return planted.concretize_root_only(gm, example_inputs)
    return planted.trace(static=True)


COMPILE_TIME = [remove_detach, fold_views, remove_dead_code]
LOAD_TIME = [hoist_device]
PER_LAYER = [remove_dead_code, concretize]
