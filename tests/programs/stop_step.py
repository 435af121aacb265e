"""A rank for `capture --simulate-world --stop-after-passes`: where does it end?

    python -m tests.programs.stop_step traced     # make_fx step, PASSES, then the graph is called
    python -m tests.programs.stop_step compiled   # torch.compile (Inductor): forward, backward, step

Prints a marker after each phase; the test reads which ones a stopped rank printed. In `traced`,
`run_graph_pass` calls the graph it got (from `identity_pass`) inside itself: that call is part of
the pipeline and must not end the rank.
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist
from torch.fx.experimental.proxy_tensor import make_fx


def identity_pass(gm, example_inputs):
    return gm


def run_graph_pass(gm, example_inputs):
    gm(*example_inputs)  # a pass that runs its input (to check, to estimate) is still inside the pipeline
    return gm


PASSES = [identity_pass, run_graph_pass]


def main() -> None:
    mode = sys.argv[1]
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8)
    if mode == "traced":

        def step(w, b, x):
            return (torch.nn.functional.linear(x, w, b) * 2).sum()

        # run as __main__: the passes are taken from the module under its own name, where
        # `--pass tests.programs.stop_step:PASSES` wrapped them
        from tests.programs.stop_step import PASSES as passes

        inputs = (model.weight.detach(), model.bias.detach(), x)
        gm = make_fx(step)(*inputs)
        for p in passes:
            gm = p(gm, inputs)
        print("PIPELINE DONE", flush=True)
        gm(*inputs)
        print("STEP RAN", flush=True)
    else:
        f = torch.compile(model)
        loss = f(x).sum()
        print("FORWARD RAN", flush=True)
        loss.backward()
        print("BACKWARD RAN", flush=True)
    opt.step()
    print("OPTIMIZER STEP RAN", flush=True)


if __name__ == "__main__":
    main()
