"""AOTAutograd's min-cut partitioner recomputing an all-gather in one rank's backward only.

Models pytorch/pytorch#146707: under an activation memory budget
(`torch._functorch.config.activation_memory_budget`) the min-cut partitioner chooses what to save
for the backward and what to recompute from each rank's own sizes. Ranks that hold batches of
different sizes (uneven data) reach different choices; where the joint graph gathers a sharded
weight (FSDP's all-gather), the rank with the larger batch recomputes the gather in its backward
and the other saves it. Their collective sequences part: rank 1's backward runs an
`all_gather_into_tensor` rank 0's does not, and the job hangs in its first backward.

torch keeps both upstream fixes as configuration, used here as they are:
* `--fix sync`: the decision synced across ranks (`torch._functorch.config._sync_decision_cross_ranks`,
  pytorch/pytorch#152264: every rank takes the saved set of one rank), with collectives still
  allowed to be recomputed;
* `--fix no-collective-recompute`: collectives never recomputed (torch's default since
  pytorch/pytorch#147561, `unsafe_allow_optimization_of_collectives = False`); the ranks still recompute different
  compute (rank 1 recomputes the matmul, rank 0 saves it), which changes nothing the ranks must
  agree on.
Without `--fix` the program turns on `unsafe_allow_optimization_of_collectives`, the behaviour of
the partitioner the report was filed against. It then stops after the forward (the partitioner
has made both graphs by then): its backward would hang; `--hang` runs it anyway.

    torchrun --standalone --nproc-per-node 2 -m tests.programs.partitioner_recompute [--fix FIX]

CPU (gloo; `--device cuda`: cuda:LOCAL_RANK over NCCL), two ranks, one step: each rank compiles
its own graph with torch.compile (Inductor, or
`--backend aot_eager_decomp_partition`: the same partitioner without Inductor's passes and code),
the batch dimension dynamic.
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from tests.programs.devices import rank_device

FIXES = ("sync", "no-collective-recompute")


def _configure(fix: str | None) -> None:
    from torch._functorch import config

    # the budget makes the partitioner weigh each rank's activation sizes (1.0: no budget)
    config.activation_memory_budget = 0.5
    if hasattr(config, "unsafe_allow_optimization_of_collectives"):
        config.unsafe_allow_optimization_of_collectives = fix != "no-collective-recompute"
    if hasattr(config, "_sync_decision_cross_ranks"):
        config._sync_decision_cross_ranks = fix == "sync"


def step(w_shard: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    # FSDP's forward: gather the sharded weight, use it; its backward reduce-scatters the gradient
    w = funcol.all_gather_tensor_autograd(w_shard, 0, dist.group.WORLD)
    return torch.sin(x @ w.t()).sum()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fix", choices=FIXES, default=None)
    p.add_argument("--hang", action="store_true", help="without --fix: run the backward that hangs")
    # aot_eager_decomp_partition: the same AOTAutograd and min-cut partitioner, no Inductor codegen
    p.add_argument("--backend", default="inductor", help="torch.compile backend (default: inductor)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = p.parse_args(argv)
    _configure(args.fix)
    dev, backend = rank_device(args.device == "cuda")
    dist.init_process_group(backend)
    try:
        rank = dist.get_rank()
        torch.manual_seed(0)
        dim = 16
        w_shard = torch.nn.Parameter(torch.randn(dim // dist.get_world_size(), dim).to(dev))
        # uneven data: rank 0 holds 2 samples, rank 1 64 (the sizes the partitioner weighs)
        x = torch.randn(2 if rank == 0 else 64, dim).to(dev)
        # the batch a symbol on every rank (one graph for all batch sizes): the partitioner weighs
        # each rank's own size hint, and no rank's batch size is a literal of its graph
        torch._dynamo.mark_dynamic(x, 0)
        loss = torch.compile(step, backend=args.backend)(w_shard, x)
        if args.fix is not None or args.hang:
            loss.backward()
            torch.optim.SGD([w_shard], lr=0.1).step()
        # one write per line: two ranks share the launcher's stdout
        sys.stdout.write(f"rank {rank} step 0 loss {loss.item()!r}\n")
        sys.stdout.flush()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()  # gloo can abort a finalizing interpreter (worker_exit says why)
