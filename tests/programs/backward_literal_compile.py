"""torch.compile of a training step on 2 gloo ranks with a rank literal planted only in the
backward: an autograd.Function whose backward scales the gradient by `dist.get_rank() + 1`
(forward: the identity). The forward has a literal of the same op and values before it in the
joint graph (`lin1(x) * (rank + 1)`, saved for the backward, not recomputed there), so after the
partitioner the `aten.mul.Tensor(_, 1|2)` nodes are split over two graphs: each must be blamed in
the graph it lives in (the backward ones as errors there, not "gone after" the partitioner)."""

import torch
import torch.distributed as dist


class ScaleGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g * (dist.get_rank() + 1)  # the planted bug: the backward only


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    lin1, lin2 = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

    @torch.compile
    def step(x):
        h = lin1(x) * (dist.get_rank() + 1)
        return lin2(ScaleGrad.apply(h)).pow(2).sum()

    for _ in range(2):
        loss = step(torch.randn(4, 8))
        loss.backward()
    print(f"rank {dist.get_rank()} grad {lin1.weight.grad.sum().item():.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
