"""torch.compile on 2 gloo ranks: one function bakes a rank literal (`y * (rank + 3)`: Inductor's
C++ kernel holds `static_cast<float>(3.0)` on rank 0 and `4.0` on rank 1), another is rank-agnostic
(a collective over a process group, a backward), whose generated code must agree across ranks."""

import sys

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 4)
    group = dist.new_group(list(range(dist.get_world_size())))

    @torch.compile
    def baked(x, y):
        return (torch.relu(x) + y) * (dist.get_rank() + 3)

    @torch.compile
    def agnostic(x):
        h = funcol.all_reduce(torch.relu(lin(x)) * 2.5, "sum", group)
        return h.sum()

    x, y = torch.randn(8, 4), torch.randn(8, 4)
    out = baked(x, y)
    assert torch.allclose(out, (torch.relu(x) + y) * (rank + 3))
    loss = agnostic(x)
    loss.backward()
    sys.stdout.write(f"rank {rank} loss {loss.item()!r}\n")  # one write: ranks share stdout
    sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()  # gloo can abort a finalizing interpreter (worker_exit says why)
