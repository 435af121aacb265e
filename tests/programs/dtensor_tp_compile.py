"""torch's DTensor tensor parallelism on a 2-D mesh + `torch.compile` of a small MLP.

`parallelize_module(mlp, mesh["tp"], {up: ColwiseParallel, down: RowwiseParallel})` on a
(dp=2, tp=2) mesh of 4 ranks: correct code nobody here wrote the passes of. Each rank's graph
names its own tp group ('3' on ranks 0-1, '4' on ranks 2-3) and the rank table lists that group
under both the 2-D mesh and its 1-D sub-mesh, so a clean capture must give no error and no
warning and no difference between ranks 0 and 2 (same tp role, other dp). With
`--plant-tp-literal` the MLP multiplies its output by `mesh["tp"].get_local_rank() + 1`, a Python
int Dynamo bakes into each rank's graph: `check` must find that literal and blame the tp coordinate.

    torchrun --standalone --nproc-per-node 4 -m tests.programs.dtensor_tp_compile [--steps 2] [--plant-tp-literal]

On CPU (gloo).
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.distributed as dist


class MLP(torch.nn.Module):
    def __init__(self, dim: int, plant: int | None):
        super().__init__()
        self.up = torch.nn.Linear(dim, 4 * dim)
        self.down = torch.nn.Linear(4 * dim, dim)
        self.plant = plant

    def forward(self, x):
        y = self.down(torch.nn.functional.gelu(self.up(x)))
        if self.plant is not None:
            y = y * self.plant  # the planted bug: the tp coordinate baked into the graph
        return y


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--plant-tp-literal", action="store_true", help="multiply the output by the tp coordinate + 1")
    args = p.parse_args(argv)

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    dist.init_process_group("gloo")
    try:
        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        tp = mesh["tp"]
        torch.manual_seed(0)
        dim, batch = 16, 4
        plant = tp.get_local_rank() + 1 if args.plant_tp_literal else None
        mlp = parallelize_module(MLP(dim, plant), tp, {"up": ColwiseParallel(), "down": RowwiseParallel()})
        opt = torch.optim.SGD(mlp.parameters(), lr=0.05)
        compiled = torch.compile(mlp)
        # the ranks of one tp group see the same batch: seeded by the dp coordinate
        gen = torch.Generator().manual_seed(1234 + mesh.get_coordinate()[0])
        for step in range(args.steps):
            x = torch.randn(batch, dim, generator=gen)
            loss = compiled(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sys.stdout.write(f"rank {dist.get_rank()} step {step} loss {loss.item()!r}\n")
            sys.stdout.flush()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()  # gloo can abort a finalizing interpreter (worker_exit says why)
