"""A compiled step that recompiles on one rank only, and its correct twin.

    torchrun --nproc-per-node 2 -m tests.programs.rank_recompile --divergent   # rank 1 recompiles
    torchrun --nproc-per-node 2 -m tests.programs.rank_recompile               # no rank recompiles
    python -m tests.programs.rank_recompile --recompile                        # one process, recompiles

The step reads a Python string, `mode`: Dynamo guards on its value. With `--divergent` rank 1
passes another mode on the second step (a rank-dependent Python branch, as `if rank == 1:` or
a per-rank config does), so only rank 1 compiles the step again; the graph it compiles is the very
graph of the first compile (both branches compute the same), which is also what a recompile
starting from an unchanged graph looks like. Every rank then all-reduces its result, as training
would. With `--recompile` (one process, or every rank) the second step always takes the other mode.
"""

import argparse
import os

import torch
import torch.distributed as dist


def step(x, w, mode):
    y = torch.relu(x @ w)
    # the same ops either way, on one line (so the graph's source comments agree too): only the
    # guard on `mode` differs
    y = y * (2.0 if mode == "warmup" else 2.0)
    return y.sum()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--divergent", action="store_true", help="rank 1 takes another mode on the second step")
    ap.add_argument("--recompile", action="store_true", help="every rank takes another mode on the second step")
    ap.add_argument(
        "--backend", default="inductor", help="torch.compile backend (aot_eager: no Inductor passes, faster)"
    )
    args = ap.parse_args()
    distributed = "WORLD_SIZE" in os.environ
    # each rank on its own GPU with NCCL where there are GPUs (Triton kernels), else CPU and gloo
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if torch.cuda.is_available() else None
    if device is not None:
        torch.cuda.set_device(device)
    if distributed:
        dist.init_process_group("nccl" if device is not None else "gloo")
    rank = dist.get_rank() if distributed else 0
    torch.manual_seed(0)
    x, w = torch.randn(8, 16, device=device), torch.randn(16, 4, device=device)
    compiled = torch.compile(step, backend=args.backend)
    for i in range(2):
        other = i == 1 and (args.recompile or (args.divergent and rank == 1))
        loss = compiled(x, w, "train" if other else "warmup")
        if distributed:
            dist.all_reduce(loss)
        print(f"rank {rank} step {i} loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()  # gloo can abort a finalizing interpreter (worker_exit says why)
