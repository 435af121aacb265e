"""Pipeline parallelism on a (pp, dp) mesh: each rank traces only its own stage's step with
make_fx (stage 0 the first layer, stage 1 the second layer and the loss), so ranks of different
stages have different graphs by design and ranks of one stage the same. A pass runs on each.

    graphtrain-inspect capture --out OUT --pass tests.programs.pipeline_stages_passes:PIPELINE \\
        -- torchrun --nproc-per-node 4 -m tests.programs.pipeline_stages
"""

import os
import sys

import torch
import torch.distributed as dist
from torch.fx.experimental.proxy_tensor import make_fx

from tests.programs import pipeline_stages_passes


def first_stage(w, x):
    return torch.relu(x @ w)


def last_stage(w, h):
    return torch.tanh(h @ w).pow(2).mean()


def main() -> None:
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gloo")
    world = dist.get_world_size()
    mesh = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("pp", "dp"))
    stage = mesh.get_local_rank("pp")
    torch.manual_seed(0)
    w = torch.randn(8, 8)
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(int(os.environ.get("RANK", 0)) + 1))
    gm = make_fx(first_stage if stage == 0 else last_stage)(w, x)
    for p in pipeline_stages_passes.PIPELINE:
        gm = p(gm, [w, x])
    out = gm(w, x)
    sys.stdout.write(f"rank {dist.get_rank()} stage {stage} out {float(out.sum())!r}\n")
    sys.stdout.flush()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()
