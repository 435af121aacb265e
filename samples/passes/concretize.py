"""Pass 5: symbolic-shape concretization.

Finds unbacked symbols whose value is a compile-time constant (their binding
``_local_scalar_dense`` reads a tensor computed only from literals, such as
the chunk plan of ``chunk_expert_tokens``), evaluates them, and substitutes
the concrete sizes everywhere:

* root graph: uses of the binding nodes become int literals, the binding
  nodes and their constant producers are erased, every node's
  ``meta['val']`` / ``example_value`` / ``tensor_meta`` is rewritten;
* every nested GraphModule reachable through ``get_attr`` (the
  ``invoke_subgraph`` bodies): placeholder and node metadata are rewritten,
  ``sym_size`` nodes that became constant are folded, and runtime asserts
  that became trivially true are dropped.

With ``--bug stale-symbol`` the nested subgraphs are skipped: their
placeholders keep ``f32[u16, 128]`` although nothing binds ``u16`` anymore.
"""

from __future__ import annotations

import operator

import sympy
import torch
import torch.fx as fx

from graphtrain_inspect.samples import bugs
from graphtrain_inspect.samples.passes._util import fake_mode_of, finalize, nested_graph_modules, shape_env_of

aten = torch.ops.aten

_SYM_OPS = {
    operator.add,
    operator.sub,
    operator.mul,
    operator.floordiv,
    operator.mod,
    operator.neg,
    operator.truediv,
    operator.eq,
    operator.ne,
    operator.ge,
    operator.gt,
    operator.le,
    operator.lt,
    aten.sym_size.int,
    aten.sym_numel.default,
    aten.sym_stride.int,
}
_ASSERTS = {aten._assert_scalar.default, aten.sym_constrain_range_for_size.default, aten.sym_constrain_range.default}


# ---------------------------------------------------------------------------
# constant evaluation of binding chains
# ---------------------------------------------------------------------------


def _const_eval(node: fx.Node, memo: dict):
    """Evaluate ``node`` on real CPU tensors if it depends only on literals
    through deterministic aten ops; ``None`` when it cannot be folded."""
    if node in memo:
        return memo[node]
    memo[node] = None
    if node.op != "call_function":
        return None
    t = node.target
    if t is operator.getitem:
        pass
    elif not isinstance(t, torch._ops.OpOverload) or t.namespace != "aten":
        return None
    elif any(tag in t.tags for tag in (torch.Tag.nondeterministic_seeded,)):
        return None

    ok = True

    def arg(a):
        nonlocal ok
        if isinstance(a, fx.Node):
            v = _const_eval(a, memo)
            if v is None:
                ok = False
            return v
        if isinstance(a, torch.device):
            return torch.device("cpu")
        return a

    args = torch.utils._pytree.tree_map(arg, node.args, is_leaf=lambda x: isinstance(x, fx.Node))
    kwargs = torch.utils._pytree.tree_map(arg, dict(node.kwargs), is_leaf=lambda x: isinstance(x, fx.Node))
    if not ok:
        return None
    try:
        val = t(*args, **kwargs)
    except Exception:  # noqa: BLE001 - an arbitrary op on concrete values: any failure means not foldable
        return None
    memo[node] = val
    return val


def _bound_symbols(node: fx.Node):
    ub = node.meta.get("unbacked_bindings") or {}
    return list(ub.keys())


def find_constant_symbols(gm: fx.GraphModule) -> dict:
    """{symbol: int} for unbacked symbols bound by constant-foldable nodes."""
    memo: dict = {}
    out = {}
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not aten._local_scalar_dense.default:
            continue
        syms = _bound_symbols(node)
        if len(syms) != 1:
            continue
        val = _const_eval(node, memo)
        if isinstance(val, int):
            out[syms[0]] = val
            node.meta["gti_concrete_value"] = val
    return out


# ---------------------------------------------------------------------------
# substitution in metadata
# ---------------------------------------------------------------------------


def _subst_int(x, mapping, shape_env):
    if isinstance(x, torch.SymInt):
        expr = x.node.expr
        if not (expr.free_symbols & mapping.keys()):
            return x
        new = sympy.sympify(expr.xreplace({k: sympy.sympify(v) for k, v in mapping.items()}))
        if new.is_number:
            return int(new)
        return shape_env.create_symintnode(new, hint=None) if shape_env is not None else x
    return x


def subst_val(val, mapping, fake_mode, shape_env):
    """``val`` (FakeTensor / SymInt / containers) with ``mapping`` applied."""
    if isinstance(val, (list, tuple)):
        return type(val)(subst_val(v, mapping, fake_mode, shape_env) for v in val)
    if isinstance(val, torch.SymInt):
        return _subst_int(val, mapping, shape_env)
    if isinstance(val, torch.Tensor) and fake_mode is not None:
        syms = set()
        for s in list(val.shape) + list(val.stride()) + [val.storage_offset()]:
            if isinstance(s, torch.SymInt):
                syms |= s.node.expr.free_symbols
        if not (syms & mapping.keys()):
            return val
        size = [_subst_int(s, mapping, shape_env) for s in val.shape]
        stride = [_subst_int(s, mapping, shape_env) for s in val.stride()]
        offset = _subst_int(val.storage_offset(), mapping, shape_env)
        with fake_mode:
            new = None
            if not (isinstance(offset, int) and offset == 0):
                try:  # keep the storage offset (it may mention the symbols too)
                    extent = 1 + sum((s - 1) * st for s, st in zip(size, stride))
                    base = torch.empty(offset + extent, dtype=val.dtype, device=val.device)
                    new = base.as_strided(size, stride, offset)
                except Exception:  # noqa: BLE001 - any layout as_strided refuses: keep the node
                    new = None
            if new is None:
                new = torch.empty_strided(size, stride, dtype=val.dtype, device=val.device)
        if val.requires_grad:
            new.requires_grad_(True)
        return new
    return val


def rewrite_meta(gm, mapping, fake_mode, shape_env) -> int:
    changed = 0
    for node in gm.graph.nodes:
        for key in ("val", "example_value"):
            if key in node.meta:
                old = node.meta[key]
                new = subst_val(old, mapping, fake_mode, shape_env)
                if new is not old:
                    node.meta[key] = new
                    changed += 1
                    if key == "val" and "tensor_meta" in node.meta and isinstance(new, torch.Tensor):
                        try:
                            from torch.fx.passes.shape_prop import _extract_tensor_metadata

                            node.meta["tensor_meta"] = _extract_tensor_metadata(new)
                        except Exception:  # noqa: BLE001 - metadata it cannot extract is dropped, not guessed
                            node.meta.pop("tensor_meta", None)
    return changed


def _replace_with_constant(node: fx.Node, value):
    for user in list(node.users):
        user.args = fx.node.map_arg(user.args, lambda a: value if a is node else a)
        user.kwargs = fx.node.map_arg(user.kwargs, lambda a: value if a is node else a)


def _fold_concrete_sym_nodes(gm) -> None:
    """Sym nodes whose value became an int are replaced by the int; asserts on
    constants are dropped."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        if (
            node.target in _SYM_OPS
            and isinstance(node.meta.get("val"), (int, bool))
            and not isinstance(node.meta.get("val"), torch.SymInt)
        ):
            _replace_with_constant(node, node.meta["val"])
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in _ASSERTS:
            a = node.args[0] if node.args else None
            if not isinstance(a, fx.Node):
                gm.graph.erase_node(node)
    _dce_pure(gm)


def _dce_pure(gm):
    changed = True
    while changed:
        changed = False
        for node in reversed(list(gm.graph.nodes)):
            if node.op in ("placeholder", "output", "get_attr") or node.users:
                continue
            if node.meta.get("unbacked_bindings"):
                continue  # binds a symbol other metadata may still use
            if node.op == "call_function" and (
                node.target in _SYM_OPS
                or node.target is operator.getitem
                or (
                    isinstance(node.target, torch._ops.OpOverload)
                    and node.target.namespace == "aten"
                    and not node.target._schema.is_mutable
                    and node.target not in _ASSERTS
                )
            ):
                gm.graph.erase_node(node)
                changed = True


# ---------------------------------------------------------------------------
# the pass
# ---------------------------------------------------------------------------


def concretize_symbolic_shapes(gm: fx.GraphModule, example_inputs) -> fx.GraphModule:
    fake_mode = fake_mode_of(gm)
    shape_env = shape_env_of(gm)
    mapping = find_constant_symbols(gm)
    if not mapping:
        return gm
    # root: binding nodes -> literals
    for node in list(gm.graph.nodes):
        v = node.meta.get("gti_concrete_value")
        if v is not None and node.target is aten._local_scalar_dense.default:
            _replace_with_constant(node, v)
            gm.graph.erase_node(node)
    rewrite_meta(gm, mapping, fake_mode, shape_env)
    _fold_concrete_sym_nodes(gm)

    graphs = [("", gm)]
    if not bugs.enabled("stale-symbol"):
        # nested subgraphs (invoke_subgraph / cond bodies): placeholders too
        for qual, sub in nested_graph_modules(gm):
            rewrite_meta(sub, mapping, fake_mode, shape_env)
            _fold_concrete_sym_nodes(sub)
            graphs.append((qual, sub))
    gm.meta["gti_concretized"] = {str(k): int(v) for k, v in mapping.items()}
    return finalize(gm)
