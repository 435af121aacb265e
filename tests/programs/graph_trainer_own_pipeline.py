"""A pass pipeline of the user's own, registered with torchtitan graph_trainer's
`register_pass_pipeline` and applied by its `apply_graph_passes`, as `--compile.pass_pipeline mine`
makes graph_trainer do; nothing names it with `--pass`.

    graphtrain-inspect capture -- torchrun --nproc-per-node 2 -m tests.programs.graph_trainer_own_pipeline

Its one pass scales the output by `RANK + 1` read as a Python int: a rank literal a pass put
there (rank-baked-constant, introduced by `scale_by_rank`, never "already in the traced graph").
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch.fx.experimental.proxy_tensor import make_fx
from torchtitan.experiments.graph_trainer.passes import apply_graph_passes
from torchtitan.experiments.graph_trainer.registry import PASS_PIPELINE_REGISTRY, register_pass_pipeline


def scale_by_rank(gm, example_inputs):
    """BUG: the rank as a Python int, frozen into the graph by a pass."""
    rank = int(os.environ.get("RANK", 0))
    out = next(n for n in gm.graph.nodes if n.op == "output")
    val = out.args[0][0] if isinstance(out.args[0], (tuple, list)) else out.args[0]
    with gm.graph.inserting_before(out):
        scaled = gm.graph.call_function(torch.ops.aten.mul.Tensor, (val, rank + 1))
    scaled.meta["val"] = val.meta.get("val")
    out.replace_input_with(val, scaled)
    gm.recompile()
    return gm


@register_pass_pipeline("mine")
def my_pipeline(traced_result, config, *, parallel_dims=None):
    return [scale_by_rank]


def main() -> None:
    dist.init_process_group("gloo")
    x = torch.randn(4, 4)
    gm = make_fx(lambda x: (torch.relu(x) * 2,), tracing_mode="fake")(x)
    passes = PASS_PIPELINE_REGISTRY["mine"](None, None, parallel_dims=None)
    gm = apply_graph_passes(gm, (x,), passes)
    print(f"rank {dist.get_rank()}: {gm(x)[0].sum().item():.4f}", flush=True)


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()  # gloo can abort a finalizing interpreter (worker_exit says why)
