"""A small traced program with one planted bug per inspector check, for 2 ranks (gloo).

    graphtrain-inspect capture --pass tests.programs.inspector_planted_passes:PASSES --torch-trace \\
        -- torchrun --nproc-per-node 2 -m tests.programs.inspector_planted

The graph is traced with make_fx under a FakeTensorMode with a ShapeEnv: `nonzero` binds an
unbacked symbol u0 that torch.cond lifts into its branches (`Sym(u0)` placeholders), and an
all_reduce runs over the world group. The passes (tests/programs/inspector_planted_passes.py)
then apply, each planting one bug:

* `concretize_root_only`: makes the root static (`nonzero_static`) but keeps the old cond
  branches, whose placeholders still carry u0 (stale-unbacked-symbol, only in the subgraphs)
* `bake_rank`: multiplies the output by `(1 + 0 * RANK)` keeping the literal RANK (rank-baked-constant)
* `pin_device`: adds `zeros(2, device=torch.device('cpu', LOCAL_RANK))` (device-baked)
* `rank_local_fusion`: rank 1 duplicates a node that rank 0 keeps shared (rank-divergent-graph)

With GTI_PLANTED_CLEAN=1 only `remove_dead_code` applies. Afterwards a small `torch.compile`
(a rank-dependent `narrow` and a matmul, forward and backward: only extern matmuls, no generated
kernels to build) runs, so torch's own TORCH_TRACE (capture `--torch-trace`) holds Dynamo, AOT
(joint, forward, backward) and Inductor graphs of both ranks.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist

from tests.programs import inspector_planted_passes as planted


@torch.compile(backend="inductor")
def compiled_step(x, w, rank: int):
    return torch.mm(x.narrow(0, rank, 2), w)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    if "RANK" in os.environ:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if dist.is_initialized() else 0
    gm = planted.trace()
    for p in planted.PASSES:
        gm = p(gm, [])
    if not args.no_compile:
        w = torch.randn(8, 8, requires_grad=True)
        out = compiled_step(torch.randn(4, 8), w, rank)  # joint graph, forward and backward
        out.backward(torch.ones_like(out))
    sys.stdout.write(f"rank {rank} done\n")  # one write: ranks share stdout
    sys.stdout.flush()
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()  # gloo can abort a finalizing interpreter (worker_exit says why)
