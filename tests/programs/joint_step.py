"""A small traced training step, run with or without capture, 1 or 2 ranks (gloo).

The joint graph (forward, loss, grads) is traced once with make_fx under a FakeTensorMode with
a ShapeEnv: `.tolist()` gives an unbacked symbol, torch.cond gives nested subgraphs, and an
all_reduce is a functional collective in the graph. Passes from joint_passes.PIPELINE transform
it; then it runs for a few steps on real tensors and prints the losses.
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from tests.programs import joint_passes


def step(w, x, counts):
    n = counts.tolist()
    torch._check(n[0] >= 0)
    torch._check(n[1] >= 0)
    torch._check(n[0] + n[1] == x.shape[0])
    a, b = torch.split(x, n)

    def big(a, w):
        return torch.tanh(a @ w).sum(0)

    def small(a, w):
        return (a @ w).sum(0)

    h = torch.cond(a.shape[0] > 4, big, small, (a, w))
    loss = (h.sum() + (b @ w).sum()) / x.shape[0]
    (g,) = torch.autograd.grad(loss, [w])
    if dist.is_initialized():
        g = funcol.all_reduce(g, "sum", dist.group.WORLD)
    return loss, g


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--fail-pass", action="store_true")
    ap.add_argument("--unpicklable-meta", action="store_true")
    ap.add_argument(
        "--losses", help="also write this rank's loss lines to LOSSES.rank<R> (torchrun can drop worker stdout)"
    )
    args = ap.parse_args()
    if "RANK" in os.environ:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if dist.is_initialized() else 0
    torch.manual_seed(0)
    w = torch.randn(8, 8, requires_grad=True)
    gen = torch.Generator().manual_seed(rank + 1)
    x = torch.randn(16, 8, generator=gen)
    counts = torch.tensor([6 + rank, 10 - rank])

    fake = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=False)
    fw, fx_, fc = fake.from_tensor(w), fake.from_tensor(x), fake.from_tensor(counts)
    fw.requires_grad_(True)
    with fake:
        gm = make_fx(step)(fw, fx_, fc)
    example = [w, x, counts]
    pipeline = list(joint_passes.PIPELINE)
    if args.unpicklable_meta:
        pipeline.append(joint_passes.tag_with_callback)
    if args.fail_pass:
        pipeline.append(joint_passes.always_fails)
    for p in pipeline:
        try:
            gm = p(gm, example)
        except RuntimeError as e:
            sys.stdout.write(f"rank {rank} pass {p.__name__} raised: {e}\n")  # one write: ranks share stdout
            sys.stdout.flush()
    lines = []
    with torch.no_grad():
        for i in range(args.steps):
            loss, g = gm(w, x, counts)
            w -= 0.1 * g
            lines.append(f"rank {rank} step {i} loss {loss.item()!r}")
            sys.stdout.write(lines[-1] + "\n")  # one write: ranks share stdout
            sys.stdout.flush()
    if args.losses:
        with open(f"{args.losses}.rank{rank}", "w") as f:
            f.write("\n".join(lines) + "\n")
    if dist.is_initialized():
        dist.barrier()  # no rank tears the group down while a peer still talks to it
        dist.destroy_process_group()


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()  # gloo can abort a finalizing interpreter (worker_exit says why)
