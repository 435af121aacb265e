"""Passes of our own with a planted bug, added to torchtitan graph_trainer's pipeline without
editing torchtitan: each is registered in its `PASS_PIPELINE_REGISTRY` as a pipeline (the default
one with the pass inserted after `canonicalize_graph_pass`), selected with
`--compile.pass_pipeline NAME`. Imported by `samples.torchtitan_cpu --gti-bug NAME`.

- `bake_tp_coordinate_pass` (pipeline `gti_bug_tp_coordinate`): the tensor-parallel coordinate,
  read from the mesh while the pass is built (`parallel_dims.get_mesh("tp").get_local_rank()`),
  becomes a literal of the graph: the loss goes through `add(loss, tp)` then `sub(_, tp)`. The
  numbers do not change; the graph is no longer the same on every rank, which breaks a graph
  compiled once and shared (and is how a real coordinate-dependent rewrite starts).
- `ep_divergent_pass` (pipeline `gti_bug_ep_divergent`): runs differently on the last expert-
  parallel rank: there it adds a copy of the loss before the output (a structural difference).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torchtitan.experiments.graph_trainer.passes import construct_default_graph_passes
from torchtitan.experiments.graph_trainer.registry import register_pass_pipeline

aten = torch.ops.aten


def _loss_node(gm: torch.fx.GraphModule) -> tuple[torch.fx.Node, torch.fx.Node]:
    """(output node, the loss: the first value the traced step returns)."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    flat = out.args[0]
    loss = flat[0] if isinstance(flat, (list, tuple)) else flat
    return out, loss


def bake_tp_coordinate_pass(
    gm: torch.fx.GraphModule, example_inputs: Any, *, tp_coordinate: int
) -> torch.fx.GraphModule:
    out, loss = _loss_node(gm)
    with gm.graph.inserting_before(out):
        shifted = gm.graph.call_function(aten.add.Tensor, (loss, tp_coordinate))
        back = gm.graph.call_function(aten.sub.Tensor, (shifted, tp_coordinate))
    for n in (shifted, back):
        n.meta.update({k: v for k, v in loss.meta.items() if k in ("val", "tensor_meta")})
    out.replace_input_with(loss, back)
    gm.recompile()
    return gm


def ep_divergent_pass(
    gm: torch.fx.GraphModule, example_inputs: Any, *, ep_coordinate: int, ep_size: int
) -> torch.fx.GraphModule:
    if ep_coordinate != ep_size - 1:
        return gm
    out, loss = _loss_node(gm)
    with gm.graph.inserting_before(out):
        copy = gm.graph.call_function(aten.clone.default, (loss,))
    copy.meta.update({k: v for k, v in loss.meta.items() if k in ("val", "tensor_meta")})
    out.replace_input_with(loss, copy)
    gm.recompile()
    return gm


def _insert_after_canonicalize(passes: list, extra: Any) -> list:
    names = [getattr(getattr(p, "func", p), "__name__", "") for p in passes]
    # the capture's wrapper keeps the name (functools.wraps)
    at = names.index("canonicalize_graph_pass") + 1 if "canonicalize_graph_pass" in names else 0
    return [*passes[:at], extra, *passes[at:]]


def _coordinate(parallel_dims: Any, dim: str) -> tuple[int, int]:
    mesh = parallel_dims.get_optional_mesh(dim) if parallel_dims is not None else None
    if mesh is None:
        return 0, 1
    return mesh.get_local_rank(), mesh.size()


@register_pass_pipeline("gti_bug_tp_coordinate")
def tp_coordinate_pipeline(traced_result: Any, config: Any, *, parallel_dims: Any = None) -> list:
    tp, _ = _coordinate(parallel_dims, "tp")
    passes = construct_default_graph_passes(traced_result, config, parallel_dims=parallel_dims)
    # looked up at call time: the capture's wrapper when `--pass ...:bake_tp_coordinate_pass`
    return _insert_after_canonicalize(passes, functools.partial(globals()["bake_tp_coordinate_pass"], tp_coordinate=tp))


@register_pass_pipeline("gti_bug_ep_divergent")
def ep_divergent_pipeline(traced_result: Any, config: Any, *, parallel_dims: Any = None) -> list:
    ep, ep_size = _coordinate(parallel_dims, "ep")
    passes = construct_default_graph_passes(traced_result, config, parallel_dims=parallel_dims)
    return _insert_after_canonicalize(
        passes, functools.partial(globals()["ep_divergent_pass"], ep_coordinate=ep, ep_size=ep_size)
    )
