"""Gloo ranks without torch.compile (cheap to start many): an FX graph that bakes the rank
(`relu(x) * (rank + 3)`, traced with symbolic_trace), run through a pass recorded with
`record_pass`, and a loss all-reduced over the world, printed one line per rank."""

import sys

import torch
import torch.distributed as dist

from graphtrain_inspect.capture.api import record_pass


class Scale(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * (dist.get_rank() + 3)


@record_pass
def drop_dead_code(gm):
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    gm = drop_dead_code(torch.fx.symbolic_trace(Scale()))
    loss = gm(torch.randn(8, 4)).sum()
    dist.all_reduce(loss)
    sys.stdout.write(f"rank {dist.get_rank()} loss {loss.item()!r}\n")  # one write: ranks share stdout
    sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()  # gloo can abort a finalizing interpreter (worker_exit says why)
