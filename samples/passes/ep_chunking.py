"""Pass 4: expert-parallel token chunking.

Every expert's SwiGLU activation ``silu(h1) * h3`` runs on the tokens that
the all-to-all delivered to this rank: a data-dependent row count ``n``
(e.g. ``u6 + u8``).  This pass rewrites each such forward region as

    h1p, h3p = pad(h1, to cap rows), pad(h3, to cap rows)   # cap: static bound of n
    c0, c1   = chunk_plan.tolist()                           # NEW unbacked sizes
    parts_i  = invoke_subgraph(ep_chunk_body_i, ..., h1p[chunk i], h3p[chunk i])
    silu, act = cat(parts)[:n]

``cap`` is the upper bound of ``n`` from the ShapeEnv's value ranges.  The
chunk plan is a runtime tensor (``aten.full``), so its sizes enter the graph
as fresh unbacked SymInts bound by ``_local_scalar_dense``; the per-chunk
computation lives in a nested GraphModule (a ``get_attr`` body of
``torch.ops.higher_order.invoke_subgraph``) whose placeholders carry those
chunk symbols in ``meta['val']``.  ``concretize_symbolic_shapes`` later
folds the plan to constants.  Padding rows are zeros and the region is
elementwise, so numerics of real rows are bitwise unchanged.
"""

from __future__ import annotations

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from graphtrain_inspect.samples.passes._util import fake_mode_of, finalize, shape_env_of, unbacked_symbols_of

aten = torch.ops.aten

NUM_CHUNKS = 2


def _invoke_subgraph():
    hop = getattr(torch.ops.higher_order, "invoke_subgraph", None)
    if hop is None:  # pragma: no cover
        from torch._higher_order_ops.invoke_subgraph import invoke_subgraph as hop
    return hop


def _chunk_body(a, b):
    s = F.silu(a)
    return s, s * b


def _make_replacement(hop, ridx: int, cap: int, chunk: int):
    """The chunked region, traced by make_fx under the graph's FakeTensorMode."""

    def replacement(a, b):
        n = a.shape[0]
        ap = torch.cat([a, a.new_zeros(cap - n, a.shape[1])])
        bp = torch.cat([b, b.new_zeros(cap - n, b.shape[1])])
        # runtime chunk plan -> fresh unbacked chunk sizes
        plan = torch.full((NUM_CHUNKS,), chunk, dtype=torch.int64, device=a.device)
        sizes = plan.tolist()
        for s in sizes:
            torch._check(s >= 0)
            torch._check(s <= cap)
        torch._check(sum(sizes) == cap)
        silus, acts = [], []
        for i, (ca, cb) in enumerate(zip(ap.split(sizes), bp.split(sizes))):
            s, y = hop(_chunk_body, f"ep_chunk_r{ridx}_c{i}", ca, cb)
            silus.append(s)
            acts.append(y)
        silu_full = torch.cat(silus).split([n, cap - n])[0]
        act_full = torch.cat(acts).split([n, cap - n])[0]
        return silu_full, act_full

    return replacement


def _static_upper_bound(shape_env, expr) -> int | None:
    try:
        ub = shape_env.bound_sympy(expr).upper
        ub = int(ub)
    except Exception:  # noqa: BLE001 - bound_sympy may raise anything on odd exprs: no bound then
        return None
    return ub if 0 < ub < 1 << 20 else None


def _find_regions(gm):
    """forward (silu_node, mul_node, h1, h3) with an unbacked row count."""
    regions = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not aten.mul.Tensor:
            continue
        if node.meta.get("phase") == "backward":
            continue
        a, b = node.args[0], node.args[1]
        if not (isinstance(a, fx.Node) and a.target is aten.silu.default and isinstance(b, fx.Node)):
            continue
        h1 = a.args[0]
        val = h1.meta.get("val")
        if not isinstance(val, torch.Tensor) or val.dim() != 2:
            continue
        if not unbacked_symbols_of(val.shape[0]):
            continue
        regions.append((a, node, h1, b))
    return regions


def chunk_expert_tokens(gm: fx.GraphModule, example_inputs) -> fx.GraphModule:
    fake_mode = fake_mode_of(gm)
    shape_env = shape_env_of(gm)
    if fake_mode is None or shape_env is None:
        return gm
    hop = _invoke_subgraph()
    regions = _find_regions(gm)
    for ridx, (silu_node, mul_node, h1, h3) in enumerate(regions):
        n_expr = h1.meta["val"].shape[0]
        cap = _static_upper_bound(shape_env, n_expr.node.expr)
        if cap is None or cap % NUM_CHUNKS:
            continue
        chunk = cap // NUM_CHUNKS

        replacement = _make_replacement(hop, ridx, cap, chunk)
        sub = make_fx(replacement, tracing_mode="fake")(h1.meta["val"], h3.meta["val"])
        _inline(gm, sub, [h1, h3], [silu_node, mul_node], insert_before=mul_node, tag=f"ep_chunk_r{ridx}")

    gm.meta["gti_ep_chunks"] = NUM_CHUNKS
    return finalize(gm)


def _inline(gm, sub, inputs, replaced, *, insert_before, tag):
    """Copy ``sub``'s nodes into ``gm`` before ``insert_before``; its outputs
    replace the nodes in ``replaced`` (which are then erased)."""
    env = {}
    phs = [n for n in sub.graph.nodes if n.op == "placeholder"]
    for ph, inp in zip(phs, inputs):
        env[ph] = inp
    outs = None
    with gm.graph.inserting_before(insert_before):
        for node in sub.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "output":
                outs = torch.utils._pytree.tree_map(lambda a: env[a] if isinstance(a, fx.Node) else a, node.args[0])
                continue
            if node.op == "get_attr":
                attr = getattr(sub, node.target)
                new_name = _fresh_attr(gm, f"{tag}_body" if isinstance(attr, fx.GraphModule) else f"{tag}_const")
                if isinstance(attr, torch.nn.Module):
                    gm.add_submodule(new_name, attr)
                else:
                    setattr(gm, new_name, attr)
                new = gm.graph.get_attr(new_name)
                new.meta.update(node.meta)
                env[node] = new
                continue
            new = gm.graph.node_copy(node, lambda a: env[a])
            new.meta["phase"] = "forward"
            new.meta["gti_pass"] = "chunk_expert_tokens"
            env[node] = new
    for old, new in zip(replaced, outs):
        old.replace_all_uses_with(new)
    for old in reversed(replaced):
        if not old.users:
            gm.graph.erase_node(old)


def _fresh_attr(gm, base):
    i = 0
    while hasattr(gm, f"{base}{i if i else ''}"):
        i += 1
    return f"{base}{i if i else ''}"
