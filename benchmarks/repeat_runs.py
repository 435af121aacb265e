"""Run a command many times and count the runs that fail: how a rare crash is measured.

    python -m benchmarks.repeat_runs --runs 80 -- python -m torch.distributed.run --standalone \\
        --nproc-per-node 2 -m graphtrain_inspect.samples.train --mode eager --quiet

Prints one line per failing run (its exit status and the log kept under --logs) and the count at
the end. Used for the CI failure of session 4: the eager sample, `tests.programs.joint_step` and
`benchmarks/gloo_teardown_repro.py`, each on 2 gloo ranks on the 2-core CPU VM.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--logs", default=None, help="where failing runs' output is kept (default: a temporary folder)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("give the command after --")
    logs = args.logs or tempfile.mkdtemp(prefix="gti-repeat-")
    os.makedirs(logs, exist_ok=True)
    env = dict(os.environ, PYTHONFAULTHANDLER="1")  # an abort prints every thread's Python stack
    failed = 0
    for i in range(1, args.runs + 1):
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if p.returncode != 0:
            failed += 1
            path = os.path.join(logs, f"run{i}.log")
            with open(path, "wb") as f:
                f.write(p.stdout)
            print(f"run {i}: exit {p.returncode}  {path}", flush=True)
    print(f"{failed} of {args.runs} runs failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
