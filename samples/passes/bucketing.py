"""Pass 2: collective bucketing of FSDP parameter all-gathers.

The traced graph all-gathers every parameter shard separately.  This pass
merges, per bucket (one transformer layer, the embeddings, the head; split
further by process group and dtype), the ``all_gather_into_tensor`` +
``wait_tensor`` pairs into

    flat   = cat([shard.view(-1) for shard in bucket])      # (N,)
    gather = wait_tensor(all_gather_into_tensor(flat, W, group))   # (W*N,)
    rows   = gather.view(W, N)
    full_i = rows[:, off_i:off_i+n_i].contiguous().view(W*d0_i, ...)

which is pure data movement (bitwise the same values) with one collective per
bucket.  The bucket plan depends only on parameter names and shapes, so it
is identical on every rank.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from graphtrain_inspect.samples.passes._util import fake_mode_of, finalize, is_wait, new_node

aten = torch.ops.aten


def _all_gather_ops():
    ops = []
    for ns in ("_c10d_functional", "_c10d_functional_autograd"):
        pkt = getattr(getattr(torch.ops, ns, None), "all_gather_into_tensor", None)
        if pkt is not None:
            ops.append(pkt.default)
    return ops


def _param_of(node: fx.Node):
    """Follow views back to a placeholder; return its parameter name."""
    seen = 0
    while isinstance(node, fx.Node) and seen < 8:
        if node.op == "placeholder":
            return node.meta.get("gti_input", node.name)
        if node.op == "call_function" and node.target in (
            aten.view.default,
            aten.clone.default,
            aten.contiguous.default,
        ):
            node = node.args[0]
            seen += 1
            continue
        return None
    return None


def bucket_key(param: str) -> str:
    if param.startswith("layers."):
        return ".".join(param.split(".")[:2])
    if param in ("tok_emb", "pos_emb"):
        return "embeddings"
    return "head"


def _wait_of(ag: fx.Node):
    users = [u for u in ag.users if is_wait(u)]
    return users[0] if len(users) == 1 and len(ag.users) == 1 else None


def bucket_all_gathers(gm: fx.GraphModule, example_inputs) -> fx.GraphModule:
    fake_mode = fake_mode_of(gm)
    ag_ops = set(_all_gather_ops())
    buckets: dict[tuple, list] = {}
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in ag_ops:
            continue
        if node.meta.get("phase") == "backward":
            continue
        param = _param_of(node.args[0])
        wait = _wait_of(node)
        val = node.args[0].meta.get("val") if isinstance(node.args[0], fx.Node) else None
        if param is None or wait is None or not isinstance(val, torch.Tensor):
            continue
        if not all(isinstance(s, int) for s in val.shape):
            continue
        group_size, group_name = node.args[1], node.args[2]
        key = (bucket_key(param), group_name, group_size, val.dtype)
        buckets.setdefault(key, []).append((node, wait, param))

    plan = {}
    for (bkey, group_name, group_size, _dtype), members in buckets.items():
        if len(members) < 2:
            continue
        first_ag = members[0][0]
        ag_target = first_ag.target
        wait_target = members[0][1].target
        g = gm.graph
        with g.inserting_before(first_ag):
            flats, sizes = [], []
            for ag, _, _ in members:
                shard = ag.args[0]
                n = shard.meta["val"].numel()
                flats.append(new_node(g, aten.view.default, (shard, [n]), fake_mode=fake_mode, like=ag))
                sizes.append(n)
            total = sum(sizes)
            flat = new_node(
                g,
                aten.cat.default,
                (flats,),
                fake_mode=fake_mode,
                like=first_ag,
                name=f"bucket_{bkey.replace('.', '_')}_flat",
            )
            tag = f"bucket_{bkey.replace('.', '_')}"
            big = new_node(
                g,
                ag_target,
                (flat, group_size, group_name),
                fake_mode=fake_mode,
                like=first_ag,
                name=f"{tag}_all_gather",
            )
            big.meta["gti_bucket"] = [p for _, _, p in members]
            bwait = new_node(g, wait_target, (big,), fake_mode=fake_mode, like=first_ag, name=f"{tag}_wait")
            rows = new_node(
                g,
                aten.view.default,
                (bwait, [group_size, total]),
                fake_mode=fake_mode,
                like=first_ag,
                name=f"{tag}_rows",
            )
            off = 0
            for (ag, wait, _), n in zip(members, sizes):
                out_shape = list(wait.meta["val"].shape)
                sl = new_node(g, aten.slice.Tensor, (rows, 1, off, off + n), fake_mode=fake_mode, like=ag)
                cont = new_node(
                    g,
                    aten.clone.default,
                    (sl,),
                    {"memory_format": torch.contiguous_format},
                    fake_mode=fake_mode,
                    like=ag,
                )
                full = new_node(g, aten.view.default, (cont, out_shape), fake_mode=fake_mode, like=ag)
                wait.replace_all_uses_with(full)
                off += n
        for ag, wait, _ in members:
            g.erase_node(wait)
            g.erase_node(ag)
        plan[bkey + f"@{group_name}"] = [p for _, _, p in members]
    gm.meta["gti_buckets"] = plan
    return finalize(gm)
