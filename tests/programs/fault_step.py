"""A small 2-rank training loop that records one pass per step, for the fault tests.

Each step records a pass that returns a new graph (so every step writes graph records and a
blob), then all-reduces a value: every rank must keep going for the others to finish. It prints
`rank R step S value V` after each step (V = 2 * S + 1 with 2 ranks). Faults, from the command line:

  --fsize-rank R --fsize BYTES   rank R's files may not grow past BYTES (RLIMIT_FSIZE, as a full
                                 disk or a quota would stop them): its capture log hits the limit
  --full-log-rank R              rank R's capture log is a /dev/full device node (made before its
                                 first record; root only, a link is not followed): every write to
                                 it fails with ENOSPC, as on a full disk
  --delete-log-at S              at step S rank 0 deletes its own capture log
  --remove-dir-at S              at step S rank 0 removes the whole capture directory
  --hold PATH                    after the steps, inside a recorded pass `hold`, write PATH.<rank>
                                 (the pid) and wait to be killed
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import stat
import sys
import time

import torch
import torch.distributed as dist
import torch.fx

from graphtrain_inspect.capture import record_pass
from graphtrain_inspect.capture.shared import logformat


def graph_of(step: int) -> torch.fx.GraphModule:
    def f(x, w):
        y = torch.relu(x @ w) * (step + 1)
        for i in range(6):
            y = torch.tanh(y + i) * 0.5
        return y.sum()

    return torch.fx.symbolic_trace(f)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--fsize-rank", type=int, default=None)
    ap.add_argument("--fsize", type=int, default=0)
    ap.add_argument("--full-log-rank", type=int, default=None)
    ap.add_argument("--delete-log-at", type=int, default=None)
    ap.add_argument("--remove-dir-at", type=int, default=None)
    ap.add_argument("--hold", default=None)
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if args.fsize_rank == rank:
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (args.fsize, hard))
    capture_dir = os.environ.get("GTI_CAPTURE_DIR", "")
    if args.full_log_rank == rank:
        full = os.stat("/dev/full")
        os.mknod(os.path.join(capture_dir, logformat.log_file_name(rank)), stat.S_IFCHR | 0o666, full.st_rdev)
    gm = graph_of(-1)
    for step in range(args.steps):
        with record_pass(f"step_{step}", gm) as rec:
            rec.result = gm = graph_of(step)
        t = torch.full((4,), float(step + rank))
        dist.all_reduce(t)
        sys.stdout.write(f"rank {rank} step {step} value {t[0].item():g}\n")  # one write: ranks share stdout
        sys.stdout.flush()
        if rank == 0 and step == args.delete_log_at:
            os.remove(os.path.join(capture_dir, logformat.log_file_name(rank)))
        if rank == 0 and step == args.remove_dir_at:
            # Until it is gone: a blob child of either rank may still be writing into blobs/ (it
            # makes that folder, never the capture directory), and rmtree then fails with
            # "Directory not empty" as a user's `rm -rf` would not.
            while os.path.exists(capture_dir):
                shutil.rmtree(capture_dir, ignore_errors=True)
        dist.barrier()
    if args.hold:
        with record_pass("hold", gm):
            with open(f"{args.hold}.{rank}", "w") as f:
                f.write(str(os.getpid()))
            time.sleep(120)
    dist.destroy_process_group()


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()  # gloo can abort a finalizing interpreter (worker_exit says why)
