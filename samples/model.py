"""A tiny decoder-only transformer with a mixture-of-experts feed-forward.

Functional style: parameters live in a flat ``name -> tensor`` dict so that the
training step can be traced by make_fx into one joint graph.  Dense
parameters are FSDP shards (all-gathered inside the step); experts are
expert-parallel (tokens travel with ``all_to_all_single`` whose split sizes
come from ``.tolist()`` of routing counts: unbacked SymInts in the graph).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from graphtrain_inspect.samples import bugs
from graphtrain_inspect.samples.parallel import ParallelContext, all_gather, all_reduce_sum, all_to_all, mesh_coordinate


@dataclass(frozen=True)
class ModelConfig:
    vocab: int = 256
    dim: int = 64
    n_heads: int = 4
    n_layers: int = 2
    seq_len: int = 32
    n_experts: int = 4
    top_k: int = 2
    expert_hidden: int = 128
    batch_per_rank: int = 4
    norm_eps: float = 1e-5
    seed: int = 0

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @property
    def tokens_per_rank(self) -> int:
        return self.batch_per_rank * self.seq_len


# ---------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------


def param_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    D, V, E, H = cfg.dim, cfg.vocab, cfg.n_experts, cfg.expert_hidden
    shapes = {"tok_emb": (V, D), "pos_emb": (cfg.seq_len, D)}
    for i in range(cfg.n_layers):
        p = f"layers.{i}."
        shapes.update(
            {
                p + "attn_norm": (D,),
                p + "attn.wq": (D, D),
                p + "attn.wk": (D, D),
                p + "attn.wv": (D, D),
                p + "attn.wo": (D, D),
                p + "ffn_norm": (D,),
                p + "moe.router": (E, D),
                p + "moe.w1": (E, D, H),
                p + "moe.w3": (E, D, H),
                p + "moe.w2": (E, H, D),
            }
        )
    shapes.update({"final_norm": (D,), "output": (V, D)})
    return shapes


def is_expert(name: str) -> bool:
    return ".moe.w" in name


def init_full_params(cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """Deterministic full (unsharded) parameters from ``cfg.seed`` (CPU, fp32)."""
    g = torch.Generator().manual_seed(cfg.seed)
    out = {}
    for name, shape in param_shapes(cfg).items():
        if name.endswith("norm"):
            out[name] = torch.ones(shape)
        elif name.endswith(("attn.wo", "moe.w2")):
            std = 0.02 / math.sqrt(2 * cfg.n_layers)
            out[name] = torch.randn(shape, generator=g) * std
        else:
            out[name] = torch.randn(shape, generator=g) * 0.02
    return out


def shard_params(full: dict[str, torch.Tensor], cfg: ModelConfig, pc: ParallelContext):
    """This rank's shards.  Dense: dim-0 chunk over all ranks.  Experts: this
    EP rank's experts, flattened to (E_local*d0, d1) and dim-0 chunked over the
    expert-FSDP group."""
    shards = {}
    e_local = cfg.n_experts // pc.ep_size
    for name, t in full.items():
        if is_expert(name):
            mine = t[pc.ep_coord * e_local : (pc.ep_coord + 1) * e_local]
            mine = mine.reshape(e_local * t.shape[1], t.shape[2])
            shard = mine.chunk(pc.efsdp_size, 0)[pc.efsdp_coord]
        else:
            shard = t.chunk(pc.world, 0)[pc.rank]
        shards[name] = shard.clone().contiguous().to(pc.device)
    return shards


# ---------------------------------------------------------------------------
# model
# ---------------------------------------------------------------------------


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def attention(h, p, prefix, cfg: ModelConfig, mask):
    B, S, D = h.shape
    nh, hd = cfg.n_heads, cfg.head_dim
    q = (h @ p[prefix + "attn.wq"].t()).view(B, S, nh, hd).transpose(1, 2)
    k = (h @ p[prefix + "attn.wk"].t()).view(B, S, nh, hd).transpose(1, 2)
    v = (h @ p[prefix + "attn.wv"].t()).view(B, S, nh, hd).transpose(1, 2)
    scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
    scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    o = scores.softmax(-1) @ v
    o = o.transpose(1, 2).reshape(B, S, D)
    return o @ p[prefix + "attn.wo"].t()


def moe(h2d, p, prefix, cfg: ModelConfig, pc: ParallelContext):
    """Top-k MoE with expert parallelism over ``pc.ep_group``.

    h2d: (T, D) local tokens.  Returns (T, D).
    """
    T, D = h2d.shape
    E, k = cfg.n_experts, cfg.top_k
    ep = pc.ep_size
    e_local = E // ep
    dev = h2d.device

    probs = (h2d @ p[prefix + "moe.router"].t()).softmax(-1)
    topv, topi = probs.topk(k, dim=-1)  # (T, k)
    topv = topv / topv.sum(-1, keepdim=True)
    flat_e = topi.reshape(-1)  # (T*k,), (token, slot) order
    order = flat_e.argsort(stable=True)  # slots grouped by expert
    inv_order = order.argsort()
    x_rep = h2d.unsqueeze(1).expand(T, k, D).reshape(T * k, D)
    x_sorted = x_rep[order]

    # routing counts -> split sizes (.tolist(): unbacked SymInts when traced)
    counts = torch.zeros(E, dtype=torch.int64, device=dev).scatter_add(0, flat_e, torch.ones_like(flat_e))
    recv_counts = all_to_all(counts, None, None, pc.ep_group, autograd=False)
    send_list = counts.tolist()  # per global expert, from this rank
    recv_list = recv_counts.tolist()  # per (source rank, local expert)
    for c in send_list + recv_list:
        torch._check(c >= 0)
        torch._check(c <= T)
    in_splits = [sum(send_list[r * e_local : (r + 1) * e_local]) for r in range(ep)]
    out_splits = [sum(recv_list[r * e_local : (r + 1) * e_local]) for r in range(ep)]
    torch._check(sum(in_splits) == T * k)

    x_recv = all_to_all(x_sorted, out_splits, in_splits, pc.ep_group)
    blocks = x_recv.split(recv_list)  # (src, local expert) blocks

    def expert_weight(kind):
        w = all_gather(p[prefix + f"moe.{kind}"], pc.efsdp_group, pc.efsdp_size)
        return w.view(e_local, -1, w.shape[-1])

    w1, w3, w2 = expert_weight("w1"), expert_weight("w3"), expert_weight("w2")
    y_blocks = [None] * (ep * e_local)
    for e in range(e_local):
        x_e = torch.cat([blocks[r * e_local + e] for r in range(ep)])
        h1 = x_e @ w1[e]
        h3 = x_e @ w3[e]
        act = F.silu(h1) * h3  # the EP chunking pass splits this region
        y_e = act @ w2[e]
        parts = y_e.split([recv_list[r * e_local + e] for r in range(ep)])
        for r in range(ep):
            y_blocks[r * e_local + e] = parts[r]
    y_recv = torch.cat(y_blocks)
    y_sorted = all_to_all(y_recv, in_splits, out_splits, pc.ep_group)
    y = y_sorted[inv_order].view(T, k, D)
    return (y * topv.unsqueeze(-1)).sum(1)


def local_batch(tokens, cfg: ModelConfig, pc: ParallelContext):
    """Select this rank's micro-batch from the global batch (inside the graph).

    The index is the rank's mesh coordinate.  Clean: an unbacked SymInt from
    ``_sym_get_coordinate``; with ``--bug rank-baked``: a Python int.
    """
    baked = bugs.enabled("rank-baked")
    B, S = cfg.batch_per_rank, tokens.shape[-1]
    shape = tuple(pc.mesh.shape)
    x = tokens.view(*shape, B, S)
    for dim in range(len(shape)):
        x = x.select(0, mesh_coordinate(pc.mesh, dim, baked=baked))
    return x


def forward_loss(p, tokens, labels, cfg: ModelConfig, pc: ParallelContext):
    """p: full (unsharded) parameters.  tokens/labels: the global batch."""
    tok = local_batch(tokens, cfg, pc)
    lab = local_batch(labels, cfg, pc)
    B, S = tok.shape
    dev = tok.device
    pos = torch.arange(S, device=dev)
    mask = pos.unsqueeze(0) <= pos.unsqueeze(1)
    x = F.embedding(tok, p["tok_emb"]) + F.embedding(pos, p["pos_emb"])
    for i in range(cfg.n_layers):
        pre = f"layers.{i}."
        x = x + attention(rms_norm(x, p[pre + "attn_norm"], cfg.norm_eps), p, pre, cfg, mask)
        h = rms_norm(x, p[pre + "ffn_norm"], cfg.norm_eps)
        x = x + moe(h.reshape(B * S, -1), p, pre, cfg, pc).view(B, S, -1)
    logits = rms_norm(x, p["final_norm"], cfg.norm_eps) @ p["output"].t()
    return F.cross_entropy(logits.reshape(B * S, -1), lab.reshape(-1))


class TrainStep:
    """The whole training step: unshard, forward, loss, backward -> grads.

    ``step(*shards, tokens, labels) -> (global_loss, *grads)``; grads are
    with respect to the local shards (FSDP reduce-scatter happens in the
    backward of the all-gathers).  Traced once by make_fx, or run eagerly.
    """

    def __init__(self, cfg: ModelConfig, pc: ParallelContext, names: list[str]):
        self.cfg, self.pc, self.names = cfg, pc, list(names)
        self.phase_boundary = None  # index of the first backward node (tracing)

    def unshard(self, name, shard):
        if is_expert(name):
            return shard  # gathered over the expert-FSDP group inside moe()
        return all_gather(shard, self.pc.dense_group, self.pc.world)

    def __call__(self, *args):
        n = len(self.names)
        shards, (tokens, labels) = args[:n], args[n:]
        full = {name: self.unshard(name, s) for name, s in zip(self.names, shards)}
        loss = forward_loss(full, tokens, labels, self.cfg, self.pc)
        world = self.pc.world
        global_loss = all_reduce_sum(loss.detach(), self.pc.dense_group) / world
        self._mark_backward_start()
        grads = torch.autograd.grad(loss / world, shards)
        return (global_loss, *grads)

    def _mark_backward_start(self):
        try:
            from torch.fx.experimental.proxy_tensor import get_proxy_mode
        except ImportError:  # pragma: no cover
            return
        mode = get_proxy_mode()
        if mode is not None:
            self.phase_boundary = len(mode.tracer.graph.nodes)


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------


def global_batch(cfg: ModelConfig, world: int, step: int, device):
    """A learnable synthetic task: each sequence follows a fixed random
    successor table (with 10% noise).  The whole global batch is made on every
    rank; the graph selects this rank's micro-batch by mesh coordinate."""
    g = torch.Generator().manual_seed(cfg.seed + 1)
    succ = torch.randperm(cfg.vocab, generator=g)
    g = torch.Generator().manual_seed(cfg.seed * 1000003 + 17 + step)
    n = world * cfg.batch_per_rank
    seq = torch.empty(n, cfg.seq_len + 1, dtype=torch.int64)
    seq[:, 0] = torch.randint(cfg.vocab, (n,), generator=g)
    noise = torch.rand(n, cfg.seq_len, generator=g) < 0.1
    rnd = torch.randint(cfg.vocab, (n, cfg.seq_len), generator=g)
    for t in range(cfg.seq_len):
        nxt = succ[seq[:, t]]
        seq[:, t + 1] = torch.where(noise[:, t], rnd[:, t], nxt)
    return seq[:, :-1].contiguous().to(device), seq[:, 1:].contiguous().to(device)
