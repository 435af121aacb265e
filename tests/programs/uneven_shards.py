"""Uneven sharding (bug class 18): right training whose ranks' graphs differ, and a bound that is wrong.

    graphtrain-inspect capture --pass tests.programs.uneven_shards_passes:PIPELINE \\
        -- torchrun --nproc-per-node 2 -m tests.programs.uneven_shards [--rewrite | --plant | --variants]

A weight of 7 rows is sharded over 2 ranks (`distribute_tensor(..., [Shard(0)])`: rank 0 holds 4
rows, rank 1 holds 3). Each rank traces its own joint step with make_fx: the logits are gathered
(DTensor pads the short rank's shard before the all-gather: a `constant_pad_nd` only rank 1 has)
and the backward keeps the rank's own chunk of the gradient (`split(grad, 4, 1)[rank]`). Local
shapes differ too (`[4, 8]` and `[3, 8]`). All of that is right.

With `--rewrite` a pass rewrites each rank's own chunk into the equivalent `slice` (rank 0
`[0, 4)`, rank 1 `[4, 7)`): still right. With `--plant` the pass computes the start as
`rank * local_rows` (rank 1 `[3, 6)`: no chunk of 7 rows over 2 ranks; its chunk is `[4, 7)`):
rank 1 trains on the wrong columns of the gradient. `--variants` runs the three in turn, one
pipeline each. `--device cuda` runs each rank on cuda:LOCAL_RANK over NCCL.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist

from tests.programs import uneven_shards_passes as passes


def main() -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
    from torch.fx.experimental.proxy_tensor import make_fx

    from tests.programs.devices import rank_device

    ap = argparse.ArgumentParser()
    ap.add_argument("--rewrite", action="store_true")
    ap.add_argument("--plant", action="store_true")
    ap.add_argument("--variants", action="store_true", help="trace and run all three in turn (plain, rewrite, plant)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the DTensor step instead (no own passes)")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = ap.parse_args()
    dev, backend = rank_device(args.device == "cuda")
    dist.init_process_group(backend)
    rank = dist.get_rank()
    mesh = init_device_mesh(args.device, (dist.get_world_size(),))
    torch.manual_seed(0)
    weight = distribute_tensor(torch.randn(passes.ROWS, passes.COLS).to(dev), mesh, [Shard(0)])
    x = torch.randn(passes.BATCH, passes.COLS).to(dev)
    target = torch.randn(passes.BATCH, passes.ROWS).to(dev)

    def step(w, x, target):
        wd = DTensor.from_local(
            w, mesh, [Shard(0)], run_check=False, shape=(passes.ROWS, passes.COLS), stride=(passes.COLS, 1)
        )
        logits = torch.matmul(DTensor.from_local(x, mesh, [Replicate()], run_check=False), wd.t())
        full = logits.redistribute(mesh, [Replicate()]).to_local()
        loss = ((full - target) ** 2).mean()
        (g,) = torch.autograd.grad(loss, [w])
        return loss, g

    if args.compile:
        compiled(weight, x, target, args.steps, rank)
        dist.barrier()
        dist.destroy_process_group()
        return
    one = "plant" if args.plant else ("rewrite" if args.rewrite else "plain")
    for mode in ["plain", "rewrite", "plant"] if args.variants else [one]:
        w = weight.to_local().clone().requires_grad_(True)
        gm = make_fx(step)(w, x, target)
        for p in passes.PIPELINE:  # the captured passes, picked by name
            if p.__name__ in passes.MODES[mode]:
                gm = p(gm, [w, x, target])
        if os.environ.get("SHOW_GRAPH"):
            print(gm.code)
        with torch.no_grad():
            for i in range(args.steps):
                loss, g = gm(w, x, target)
                w -= 0.1 * g
                sys.stdout.write(f"rank {rank} step {i} loss {loss.item()!r}\n")
                sys.stdout.flush()
    dist.barrier()
    dist.destroy_process_group()


def compiled(weight, x, target, steps: int, rank: int) -> None:
    """The same step on the DTensor weight, compiled by torch.compile (Dynamo, AOTAutograd, Inductor)."""
    from torch.distributed.tensor import Replicate

    weight = weight.detach().requires_grad_(True)
    mesh = weight.device_mesh

    @torch.compile(fullgraph=True)
    def step(w, x, target):
        logits = torch.matmul(x, w.t()).redistribute(mesh, [Replicate()]).to_local()
        return ((logits - target) ** 2).mean()

    from torch.distributed.tensor import DTensor

    xd = DTensor.from_local(x, mesh, [Replicate()], run_check=False)
    for i in range(steps):
        loss = step(weight, xd, target)
        loss.backward()
        with torch.no_grad():
            weight -= 0.1 * weight.grad
            weight.grad = None
        sys.stdout.write(f"rank {rank} step {i} loss {loss.item()!r}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()
