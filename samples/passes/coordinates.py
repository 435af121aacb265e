"""Pass 6: mesh-coordinate resolution.

Compile-on-one-rank tracing emits one
``torch.ops.device_mesh._runtime_compute_coordinate_on_dim(full_mesh, dim)``
per ``DeviceMesh._sym_get_coordinate`` call, each with its own rank-map
constant and its own unbacked symbol (the tokens and the labels each ask for
the coordinate).  This pass resolves them to one canonical runtime
coordinate per (mesh, dim):

* calls with the same rank map (constant-evaluated) and dim are merged into
  the first one, whose symbol replaces the duplicates' symbols in every
  node's metadata (root and nested graphs);
* the canonical call and its constant chain are hoisted right after the
  placeholders;
* ``gm.meta['gti_mesh_coordinates']`` records dim -> node/symbol.

The coordinate stays a runtime value, so the graph stays rank-agnostic.  A
graph traced with ``--bug rank-baked`` has no coordinate op (the rank is a
literal already), so there is nothing to resolve.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from graphtrain_inspect.samples.passes._util import fake_mode_of, finalize, nested_graph_modules, shape_env_of
from graphtrain_inspect.samples.passes.concretize import rewrite_meta

aten = torch.ops.aten


def _coord_op():
    ns = getattr(torch.ops, "device_mesh", None)
    pkt = getattr(ns, "_runtime_compute_coordinate_on_dim", None) if ns is not None else None
    return pkt.default if pkt is not None else None


def _eval_const(gm, node, memo):
    if node in memo:
        return memo[node]
    memo[node] = None
    if node.op == "get_attr":
        v = getattr(gm, node.target, None)
        memo[node] = v if isinstance(v, torch.Tensor) else None
        return memo[node]
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return None
    if node.target.namespace != "aten":
        return None
    ok = True

    def arg(a):
        nonlocal ok
        if isinstance(a, fx.Node):
            v = _eval_const(gm, a, memo)
            ok = ok and v is not None
            return v
        return a

    args = fx.node.map_aggregate(node.args, arg)
    kwargs = fx.node.map_aggregate(dict(node.kwargs), arg)
    if not ok:
        return None
    try:
        memo[node] = node.target(*args, **kwargs)
    except Exception:  # noqa: BLE001 - an arbitrary op on concrete values: any failure means not foldable
        return None
    return memo[node]


def _chain(node):
    """node and its transitive inputs, in graph order."""
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n in seen or n.op == "placeholder":
            continue
        seen.add(n)
        stack.extend(n.all_input_nodes)
    return [n for n in node.graph.nodes if n in seen]


def _symbol(node):
    ub = node.meta.get("unbacked_bindings") or {}
    if len(ub) == 1:
        return next(iter(ub))
    v = node.meta.get("val")
    if isinstance(v, torch.SymInt):
        return v.node.expr
    return None


def resolve_coordinates(gm: fx.GraphModule, example_inputs) -> fx.GraphModule:
    op = _coord_op()
    if op is None:
        return gm
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is op]
    if not calls:
        gm.meta["gti_mesh_coordinates"] = {}
        return gm
    memo: dict = {}
    canonical: dict = {}
    mapping = {}
    for call in calls:
        mesh_val = _eval_const(gm, call.args[0], memo)
        key = (
            tuple(mesh_val.flatten().tolist()) if mesh_val is not None else id(call),
            tuple(mesh_val.shape) if mesh_val is not None else (),
            call.args[1],
        )
        if key not in canonical:
            canonical[key] = call
            continue
        keep = canonical[key]
        s_old, s_new = _symbol(call), _symbol(keep)
        call.replace_all_uses_with(keep)
        gm.graph.erase_node(call)
        if s_old is not None and s_new is not None:
            mapping[s_old] = s_new

    # hoist canonical calls (with their constant chains) after the placeholders
    last_ph = [n for n in gm.graph.nodes if n.op == "placeholder"][-1]
    anchor = last_ph
    for call in canonical.values():
        for n in _chain(call):
            anchor.append(n)
            anchor = n

    # drop the now-dead constant chains of the merged duplicates
    changed = True
    while changed:
        changed = False
        for n in reversed(list(gm.graph.nodes)):
            if n.users or n.op in ("placeholder", "output"):
                continue
            if n.op == "get_attr" or (
                n.op == "call_function"
                and isinstance(n.target, torch._ops.OpOverload)
                and n.target.namespace == "aten"
                and not n.target._schema.is_mutable
                and not n.meta.get("unbacked_bindings")
            ):
                gm.graph.erase_node(n)
                changed = True

    if mapping:
        fm, env = fake_mode_of(gm), shape_env_of(gm)
        rewrite_meta(gm, mapping, fm, env)
        for _, sub in nested_graph_modules(gm):
            rewrite_meta(sub, mapping, fm, env)

    gm.meta["gti_mesh_coordinates"] = {
        int(c.args[1]): {"node": c.name, "symbol": str(_symbol(c))} for c in canonical.values()
    }
    gm.meta["gti_coordinates_merged"] = {str(k): str(v) for k, v in mapping.items()}
    return finalize(gm)
