"""Pass 3: activation-checkpoint tagging and rematerialization.

Policy (selective AC, as in torchtitan's "op" SAC): inside each transformer
layer, forward nodes whose outputs are saved for backward are tagged

* ``CheckpointPolicy.MUST_SAVE`` for matmuls, collectives, nodes that bind
  unbacked symbols and everything not listed below;
* ``CheckpointPolicy.PREFER_RECOMPUTE`` for cheap pointwise ops (norm
  arithmetic, silu, softmax pieces, ...), within a recompute budget.

``meta['recompute']`` and ``meta['ac_graph_id']`` (the layer index) are set
on the chosen forward nodes; then the tagged nodes are rematerialized: each
is duplicated right before its first backward use and the backward users
are rewired to the copy (the forward value can then be freed early).  The
copies compute the same ops on the same inputs, so numerics are unchanged.

``--bug rank-divergent``: the budget is taken from a rank-local heuristic
(``_rank_local_budget``), so ranks recompute different node sets and end with
structurally different graphs.  Collectives are never recomputed, so the
collective sequence still matches and training does not hang.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.fx as fx

from graphtrain_inspect.samples import bugs
from graphtrain_inspect.samples.passes._util import finalize, is_collective

aten = torch.ops.aten

try:
    from torch.utils.checkpoint import CheckpointPolicy
except ImportError:  # pragma: no cover
    CheckpointPolicy = None

_CHEAP = {
    aten.silu.default,
    aten.mul.Tensor,
    aten.add.Tensor,
    aten.sub.Tensor,
    aten.div.Tensor,
    aten.rsqrt.default,
    aten.pow.Tensor_Scalar,
    aten.mean.dim,
    aten.neg.default,
    aten.exp.default,
    aten.unsqueeze.default,
    aten.expand.default,
    aten.view.default,
    aten.transpose.int,
    aten.t.default,
}


def _policy(name):
    if CheckpointPolicy is None:  # pragma: no cover
        return name
    return getattr(CheckpointPolicy, name)


def _layer_of_param(name: str, n_layers: int):
    if name.startswith("layers."):
        return int(name.split(".")[1])
    if name in ("final_norm", "output"):
        return n_layers  # the head
    return -1


def _assign_layers(gm):
    """Layer id of every node: max over inputs (parameters seed it)."""
    params = [n.meta.get("gti_input", "") for n in gm.graph.nodes if n.op == "placeholder"]
    n_layers = 1 + max([_layer_of_param(p, 0) for p in params if p.startswith("layers.")] or [-1])
    layer = {}
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            layer[node] = _layer_of_param(node.meta.get("gti_input", ""), n_layers)
        else:
            layer[node] = max([layer.get(a, -1) for a in node.all_input_nodes] or [-1])
    return layer, n_layers


def _is_bwd(node):
    return node.meta.get("phase") == "backward"


def _rank_local_budget(n_candidates: int) -> int:
    """BUG (rank-divergent): 'balance activation memory across ranks' by
    letting each rank's own position decide how much it recomputes."""
    rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    return (n_candidates * (rank + 1)) // (world + 1)


def tag_activation_checkpointing(gm: fx.GraphModule, example_inputs) -> fx.GraphModule:
    layer, n_layers = _assign_layers(gm)
    candidates = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or _is_bwd(node):
            continue
        lid = layer.get(node, -1)
        if not (0 <= lid < n_layers):
            continue
        if not any(_is_bwd(u) for u in node.users):
            continue  # not saved for backward
        node.meta["ac_graph_id"] = lid
        cheap = (
            node.target in _CHEAP
            and not is_collective(node)
            and not node.meta.get("unbacked_bindings")
            and isinstance(node.meta.get("val"), torch.Tensor)
        )
        if cheap:
            candidates.append(node)
        else:
            node.meta["recompute"] = _policy("MUST_SAVE")

    budget = len(candidates)
    if bugs.enabled("rank-divergent"):
        budget = _rank_local_budget(len(candidates))
    chosen = candidates[:budget]
    for node in candidates[budget:]:
        node.meta["recompute"] = _policy("MUST_SAVE")
    for node in chosen:
        node.meta["recompute"] = _policy("PREFER_RECOMPUTE")

    n_dups = _rematerialize(gm, set(chosen))
    gm.meta["gti_ac"] = {"candidates": len(candidates), "recomputed": len(chosen), "duplicated": n_dups}
    return finalize(gm)


def _rematerialize(gm, recompute: set) -> int:
    """Duplicate recompute-tagged forward nodes before their first backward
    use (recursively through recomputed inputs)."""
    g = gm.graph
    dup: dict = {}

    def clone(root, before):
        # post-order through recomputed inputs, inputs in argument order (what a recursive clone
        # does), with an explicit stack: a recompute chain runs through every layer, deeper than
        # Python's recursion limit on large models
        stack = [root]
        while stack:
            node = stack[-1]
            if node in dup:
                stack.pop()
                continue
            pending = [a for a in node.all_input_nodes if a in recompute and a not in dup]
            if pending:
                stack.extend(reversed(pending))
                continue
            stack.pop()
            args = fx.node.map_arg(node.args, lambda a: dup[a] if a in recompute else a)
            kwargs = fx.node.map_arg(node.kwargs, lambda a: dup[a] if a in recompute else a)
            with g.inserting_before(before):
                new = g.create_node("call_function", node.target, args, kwargs, name=node.name + "_recomputed")
            new.meta.update(node.meta)
            new.meta["phase"] = "backward"
            new.meta["autograd_backward"] = True
            new.meta["recomputed_from"] = node.name
            dup[node] = new
        return dup[root]

    for node in list(g.nodes):
        if not _is_bwd(node) or node.meta.get("recomputed_from"):
            continue
        if not any(a in recompute for a in node.all_input_nodes):
            continue
        node.args = fx.node.map_arg(node.args, lambda a: clone(a, node) if a in recompute else a)
        node.kwargs = fx.node.map_arg(node.kwargs, lambda a: clone(a, node) if a in recompute else a)
    return len(dup)
