"""torch's FSDP2 (`fully_shard` on a 1-D DeviceMesh) + `torch.compile` of a small transformer.

A real workload nobody on this project wrote the passes of: every rank compiles its own graph
(ordinary per-rank torch.compile), so `check` on a clean capture must find no error and no
warning (an own-device literal `cuda:<local rank>` is right for a per-rank compile). With
`--plant-rank-literal` the model multiplies an activation by `dist.get_rank() + 1`, a Python int
that Dynamo bakes into each rank's graph: `check` must find exactly that rank literal.

    torchrun --standalone --nproc-per-node 2 -m tests.programs.fsdp2_compile [--steps 3] [--plant-rank-literal]

On CPU (gloo) by default; with CUDA available each rank uses cuda:LOCAL_RANK and NCCL.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, dim: int, heads: int, plant: bool):
        super().__init__()
        self.heads = heads
        self.plant = plant
        self.norm1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.up = torch.nn.Linear(dim, 4 * dim)
        self.down = torch.nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        y = self.down(F.gelu(self.up(self.norm2(x))))
        if self.plant:
            y = y * (dist.get_rank() + 1)  # the planted bug: a rank baked into the graph
        return x + y


class Transformer(torch.nn.Module):
    def __init__(self, vocab: int, dim: int, heads: int, layers: int, plant: bool):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
        self.layers = torch.nn.ModuleList(Block(dim, heads, plant and i == 0) for i in range(layers))
        self.norm = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.emb(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--plant-rank-literal", action="store_true", help="multiply an activation by dist.get_rank() + 1")
    args = p.parse_args(argv)

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    dist.init_process_group(backend)
    try:
        mesh = init_device_mesh(device.type, (dist.get_world_size(),), mesh_dim_names=("dp",))
        torch.manual_seed(0)
        vocab, dim, heads, seq, batch = 64, 32, 4, 16, 4
        model = Transformer(vocab, dim, heads, args.layers, args.plant_rank_literal).to(device)
        for layer in model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        compiled = torch.compile(model)
        gen = torch.Generator().manual_seed(1234 + dist.get_rank())
        for step in range(args.steps):
            tokens = torch.randint(0, vocab, (batch, seq + 1), generator=gen).to(device)
            logits = compiled(tokens[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            # one write per line: two ranks share the launcher's stdout
            sys.stdout.write(f"rank {dist.get_rank()} step {step} loss {loss.item()!r}\n")
            sys.stdout.flush()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()  # gloo can abort a finalizing interpreter (worker_exit says why)
