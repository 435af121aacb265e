"""An `srun`-style launcher on one machine: every rank started by the "scheduler" itself, each
under its own `graphtrain-inspect capture`, as `srun graphtrain-inspect capture --out DIR --
python train.py` runs one per task. Two "nodes" of two ranks: each task gets SLURM's variables
(job, step, node id, task id) and the ones torch.distributed reads (RANK, LOCAL_RANK, GROUP_RANK,
NODE_RANK, LOCAL_WORLD_SIZE, WORLD_SIZE, MASTER_ADDR/PORT on loopback, gloo).

    python -m tests.programs.two_nodes OUT [--per-node] [--port P] [--timeout S] -- python -m MODULE

OUT is shared by every task, or with --per-node OUT/node0, OUT/node1 (a local folder per node).
Every task is ended when one runs past --timeout; exit status: the first failure's, else 0.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

NODES, PER_NODE = 2, 2


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--per-node", action="store_true")
    p.add_argument("--port", type=int, default=29533)
    p.add_argument("--timeout", type=float, default=240.0)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, cmd = p.parse_args(argv[:cut]), argv[cut + 1 :]
    world = NODES * PER_NODE
    tasks = []
    for node in range(NODES):
        out = os.path.join(args.out, f"node{node}") if args.per_node else args.out
        for local in range(PER_NODE):
            rank = node * PER_NODE + local
            env = dict(os.environ)
            env.update({
                "SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_NNODES": str(NODES),
                "SLURM_NODEID": str(node), "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(local),
                "SLURM_NTASKS": str(world),
                "RANK": str(rank), "LOCAL_RANK": str(local), "GROUP_RANK": str(node), "NODE_RANK": str(node),
                "LOCAL_WORLD_SIZE": str(PER_NODE), "WORLD_SIZE": str(world),
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(args.port),
            })  # fmt: skip
            capture = [sys.executable, "-m", "graphtrain_inspect.inspector.cli", "capture", "--out", out, "--"]
            tasks.append(subprocess.Popen([*capture, *cmd], env=env))
    deadline = time.monotonic() + args.timeout
    codes = []
    for t in tasks:
        try:
            codes.append(t.wait(timeout=max(0.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            for other in tasks:
                other.kill()
            print(f"two_nodes: a task ran past {args.timeout} s; every task ended", file=sys.stderr)
            return 124
    return next((c for c in codes if c), 0)


if __name__ == "__main__":
    sys.exit(main())
