"""The torch 2.13 gloo teardown abort, small: many functional all_reduces, a barrier, destroy.

    python -m benchmarks.repeat_runs --runs 10 -- python -m torch.distributed.run --standalone \\
        --nproc-per-node 2 benchmarks/gloo_teardown_repro.py [--end-worker]

Without --end-worker the process ends the usual way and a rank sometimes dies with SIGABRT
("terminate called without an active exception") after printing "ok": a gloo run-loop thread
releases a finished work while the interpreter finalizes (samples/worker_exit.py has the gdb
backtrace). With --end-worker it ends through `end_worker`, as the suite's programs do.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--end-worker", action="store_true")
    args = ap.parse_args()
    dist.init_process_group("gloo")
    group = dist.group.WORLD.group_name
    for _ in range(args.iters):
        y = funcol.all_reduce(torch.randn(64, 32), "sum", group)
        float(y.sum())
    dist.barrier()
    dist.destroy_process_group()
    print("ok", flush=True)
    if args.end_worker:
        from graphtrain_inspect.samples.worker_exit import end_worker

        end_worker()


if __name__ == "__main__":
    main()
