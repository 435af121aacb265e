"""A training step whose batch size changes, so torch.compile recompiles it with dynamic shapes.

    torchrun --nproc-per-node 2 -m tests.programs.dynamic_recompile

The first step compiles for a batch of 8 on every rank; later steps take other sizes, each rank
its own (the last batches of an unevenly split data set), so Dynamo recompiles the step once with
the batch dimension dynamic, and the generated code of that compile serves every later size.
Correct training: each rank runs the code it compiled, and the losses are all-reduced. The code's
benchmark harness (`get_args`) holds each rank's own size hints: it is not what training runs.
"""

import os

import torch
import torch.distributed as dist


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)) * 2 + 1)


def main() -> None:
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if distributed else 0
    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    step_fn = torch.compile(lambda x, y: torch.nn.functional.mse_loss(net(x), y))
    for i in range(3):
        batch = 8 if i == 0 else 10 + 2 * rank + i
        x, y = torch.randn(batch, 16), torch.randn(batch, 4)
        opt.zero_grad()
        loss = step_fn(x, y)
        loss.backward()
        opt.step()
        if distributed:
            loss = loss.detach()
            dist.all_reduce(loss)
        print(f"rank {rank} step {i} loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()  # gloo can abort a finalizing interpreter (worker_exit says why)
