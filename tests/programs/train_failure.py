"""A 2-rank gloo training that fails on one rank, where the failure is asked for; without a flag
(the twin) it runs to its end.

  --raise-early R     rank R raises ValueError before its first captured pass (a bad config
                      read at start-up): the other rank waits in its first collective until
                      torchrun tears it down
  --fx-index R        a recorded pass returns a graph that indexes past the end of its input on
                      rank R only (the rank's shard size baked into the index): the graph's
                      generated forward (`<eval_with_key>.N`) raises IndexError at its first call
  --compiled-index R  a torch.compile'd step (Inductor, CPU) gathers rows at indices that are in
                      range on every rank but R: Inductor's bounds check in the C++ kernel raises
                      RuntimeError from the kernel's call in the generated wrapper code

Each step all-reduces its loss, so the ranks must keep going together. Prints `rank R step S
loss L` after each step. A plain traceback, as user code raises it, is what the capture sees:
no `@record`, no handler of its own.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
import torch.fx

from graphtrain_inspect.capture import record_pass


def _net(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x @ w).sum(dim=1)


def _take_last(gm: torch.fx.GraphModule, index: int) -> torch.fx.GraphModule:
    """A pass that keeps element `index` of the output (meant to be its last; given the global
    size on one rank, it points past the end of that rank's shard)."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    (value,) = out.args
    with gm.graph.inserting_before(out):
        picked = gm.graph.call_function(torch.ops.aten.select.int, (value, 0, index))
    out.args = (picked,)
    gm.recompile()
    return gm


def _gather(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return (x[idx] * 2.0).sum()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--raise-early", type=int, default=None)
    ap.add_argument("--fx-index", type=int, default=None)
    ap.add_argument("--compiled-index", type=int, default=None)
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if args.raise_early == rank:
        raise ValueError(f"rank {rank}: no shard file for this rank (data/shard_{rank}.bin)")
    torch.manual_seed(0)
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    if args.compiled_index is not None:
        step = torch.compile(_gather)
        idx = torch.tensor([1, 3]) + (4 if rank == args.compiled_index else 0)
        loss = step(x, idx)
    else:
        gm = torch.fx.symbolic_trace(_net)
        with record_pass("take_last", gm) as rec:
            last = 8 if rank == args.fx_index else 3  # the global batch on one rank: past its shard
            rec.result = gm = _take_last(gm, last)
        loss = gm(x, w)
    dist.all_reduce(loss)
    print(f"rank {rank} step 0 loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()  # gloo can abort a finalizing interpreter (worker_exit says why)
