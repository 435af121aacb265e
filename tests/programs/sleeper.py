"""A rank that records one pass, says it is ready, then waits to be interrupted or killed."""

import os
import sys
import time

import torch
import torch.distributed as dist
import torch.fx

from graphtrain_inspect.capture import record_pass


def main() -> None:
    ready = sys.argv[1]
    if "RANK" in os.environ:
        dist.init_process_group("gloo")
    gm = torch.fx.symbolic_trace(lambda x: torch.relu(x) + 1)
    with record_pass("warmup", gm):
        pass
    with open(f"{ready}.{os.environ.get('RANK', 0)}", "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)


if __name__ == "__main__":
    main()
