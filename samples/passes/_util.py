"""Helpers shared by the sample passes (not passes themselves)."""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

aten = torch.ops.aten


def fake_mode_of(gm: fx.GraphModule):
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and hasattr(val, "fake_mode"):
            return val.fake_mode
    return None


def shape_env_of(gm: fx.GraphModule):
    env = getattr(gm, "shape_env", None)
    if env is not None:
        return env
    fm = fake_mode_of(gm)
    return fm.shape_env if fm is not None else None


def _meta_val(a):
    if isinstance(a, fx.Node):
        return a.meta.get("val")
    return a


def new_node(graph: fx.Graph, target, args, kwargs=None, *, fake_mode=None, like: fx.Node | None = None, name=None):
    """Create a call_function node and fill ``meta['val']`` by running
    ``target`` on the arguments' fake values."""
    kwargs = kwargs or {}
    node = graph.create_node("call_function", target, tuple(args), kwargs, name=name)
    if like is not None:
        for k in ("phase", "autograd_backward", "stack_trace", "seq_nr"):
            if k in like.meta:
                node.meta[k] = like.meta[k]
    if fake_mode is not None:
        fargs = torch.utils._pytree.tree_map(_meta_val, node.args)
        fkwargs = torch.utils._pytree.tree_map(_meta_val, node.kwargs)
        with fake_mode:
            node.meta["val"] = target(*fargs, **fkwargs)
    return node


def is_collective(node: fx.Node) -> bool:
    t = node.target
    ns = getattr(t, "namespace", None)
    return ns in ("_c10d_functional", "_c10d_functional_autograd", "c10d_functional")


def is_wait(node: fx.Node) -> bool:
    return node.op == "call_function" and getattr(node.target, "name", lambda: "")().endswith("wait_tensor")


def op_name(node: fx.Node) -> str:
    """'aten::silu', '_c10d_functional::all_gather_into_tensor', ..."""
    t = node.target
    name = getattr(t, "name", None)
    if callable(name):
        try:
            return name().split(".")[0]
        except Exception:  # noqa: BLE001 - a target's name() may raise anything; fall back to __name__
            pass
    return getattr(t, "__name__", str(t))


def nested_graph_modules(gm: fx.GraphModule):
    """(qualname, GraphModule) for every get_attr GraphModule reachable from gm."""
    seen = set()
    out = []

    def walk(mod, prefix):
        for node in mod.graph.nodes:
            if node.op != "get_attr":
                continue
            sub = getattr(mod, node.target, None)
            if isinstance(sub, fx.GraphModule) and id(sub) not in seen:
                seen.add(id(sub))
                q = f"{prefix}{node.target}"
                out.append((q, sub))
                walk(sub, q + ".")

    walk(gm, "")
    return out


def unbacked_symbols_of(val) -> set:
    try:
        return set(free_unbacked_symbols(val))
    except Exception:  # noqa: BLE001 - values free_unbacked_symbols does not understand have none
        return set()


def finalize(gm: fx.GraphModule) -> fx.GraphModule:
    """lint + recompile the root and every nested GraphModule."""
    for _, sub in nested_graph_modules(gm):
        sub.graph.lint()
        sub.recompile()
    gm.graph.lint()
    gm.recompile()
    return gm


GETITEM = operator.getitem
