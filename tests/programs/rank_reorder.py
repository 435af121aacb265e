"""A joint training step (forward, loss, grads and their all_reduce, traced once with make_fx)
and a scheduling pass that orders the graph by a rank-local estimate.

`reorder_by_local_estimate` is the bug: it sorts the gradient computations by a cost it reads
from this rank's environment, so rank 1 runs them in another order than rank 0 (the same nodes,
moved). With GTI_REORDER_CLEAN=1 the pass orders by the graph alone and every rank gets the same schedule.

    graphtrain-inspect capture --out OUT --pass tests.programs.rank_reorder_passes:PIPELINE -- \\
        torchrun --nproc-per-node=2 -m tests.programs.rank_reorder

(GTI_REORDER_CLEAN=1: the fixed pass). `--device cuda` runs each rank on cuda:LOCAL_RANK over
NCCL, as the captures under tests/data/nccl/ were recorded.
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.fx.experimental.proxy_tensor import make_fx

from tests.programs import rank_reorder_passes
from tests.programs.devices import rank_device


def step(w1, w2, w3, x):
    h1 = torch.relu(x @ w1)
    h2 = torch.tanh(h1 @ w2)
    loss = (h2 @ w3).pow(2).mean()
    grads = torch.autograd.grad(loss, [w1, w2, w3])
    if dist.is_initialized():
        grads = [funcol.all_reduce(g, "sum", dist.group.WORLD) for g in grads]
    return (loss, *grads)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = ap.parse_args()
    dev, backend = rank_device(args.device == "cuda")
    if "RANK" in os.environ:
        dist.init_process_group(backend)
    rank = dist.get_rank() if dist.is_initialized() else 0
    torch.manual_seed(0)
    ws = [torch.randn(8, 8).to(dev).requires_grad_() for _ in range(3)]
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(rank + 1)).to(dev)
    gm = make_fx(step)(*ws, x)
    for p in rank_reorder_passes.PIPELINE:
        gm = p(gm, [*ws, x])
    with torch.no_grad():
        for i in range(args.steps):
            loss, *grads = gm(*ws, x)
            for w, g in zip(ws, grads):
                w -= 0.1 * g
            sys.stdout.write(f"rank {rank} step {i} loss {loss.item()!r}\n")
            sys.stdout.flush()
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()
