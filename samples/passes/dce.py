"""Pass 1: dead-code removal and canonicalization.

* drops no-op nodes: ``aten.detach`` / ``aten.alias`` / ``aten.lift_fresh_copy``
  (this graph never mutates), and ``aten.view`` to the tensor's own shape;
* removes dead nodes with an explicit purity policy that is identical on
  every rank (collectives count as pure so a dead all-gather goes away
  everywhere; nodes binding an unbacked symbol still used in metadata stay).
"""

from __future__ import annotations

import torch
import torch.fx as fx
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from graphtrain_inspect.samples.passes._util import finalize, is_collective

aten = torch.ops.aten

_NOOPS = (aten.detach.default, aten.alias.default, aten.lift_fresh_copy.default)


def _is_identity_view(node: fx.Node) -> bool:
    if node.target not in (aten.view.default, aten._unsafe_view.default, aten.reshape.default):
        return False
    src = node.args[0]
    if not isinstance(src, fx.Node):
        return False
    a, b = src.meta.get("val"), node.meta.get("val")
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    try:
        return tuple(a.shape) == tuple(b.shape) and all(isinstance(s, int) for s in a.shape)
    except Exception:  # noqa: BLE001 - symbolic shapes may raise anything when compared
        return False


def _used_symbols(gm) -> set:
    used = set()
    for node in gm.graph.nodes:
        for key in ("val", "example_value"):
            if key in node.meta:
                try:
                    used |= set(free_unbacked_symbols(node.meta[key]))
                except Exception:  # noqa: BLE001 - values free_unbacked_symbols does not understand have none
                    pass
    return used


def _impure(node: fx.Node, used_syms: set) -> bool:
    if node.op in ("placeholder", "output"):
        return True
    if node.op != "call_function":
        return False
    if is_collective(node):
        return False
    ub = node.meta.get("unbacked_bindings")
    if ub and set(ub.keys()) & used_syms:
        return True
    t = node.target
    if isinstance(t, torch._ops.OpOverload) and t._schema.is_mutable:
        return True
    try:
        return node.is_impure()
    except Exception:  # noqa: BLE001 - is_impure may raise anything on odd targets: then keep the node
        return True


def remove_dead_code(gm: fx.GraphModule, example_inputs) -> fx.GraphModule:
    removed = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        if node.target in _NOOPS or _is_identity_view(node):
            src = node.args[0]
            if isinstance(src, fx.Node):
                node.replace_all_uses_with(src)
                gm.graph.erase_node(node)
                removed += 1

    used = _used_symbols(gm)
    changed = True
    while changed:
        changed = False
        for node in reversed(list(gm.graph.nodes)):
            if node.users or _impure(node, used):
                continue
            if node.op == "get_attr":
                continue
            gm.graph.erase_node(node)
            removed += 1
            changed = True
    # drop constants nobody reads anymore
    for node in list(gm.graph.nodes):
        if node.op == "get_attr" and not node.users:
            gm.graph.erase_node(node)
    gm.meta["gti_dce_removed"] = removed
    return finalize(gm)
