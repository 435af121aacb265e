"""Two flows whose pipelines must be paired by identity, never by position.

    graphtrain-inspect capture --pass tests.programs.precompile_load_passes:COMPILE_TIME \\
        --pass tests.programs.precompile_load_passes:LOAD_TIME \\
        -- torchrun --nproc-per-node 2 -m tests.programs.precompile_load [--plant]
    graphtrain-inspect capture --pass tests.programs.precompile_load_passes:PER_LAYER \\
        -- torchrun --nproc-per-node 2 -m tests.programs.precompile_load --per-layer [--plant]

Precompile (the default; bug class 12): rank 0 traces the step with make_fx and runs the
compile-time passes, pickles the graph with GraphPickler and broadcasts the bytes; every rank,
rank 0 too, loads them, runs the load-time pass and runs the graph. With `--plant` the model code
reads the rank as a Python int to take its chunk of the tokens, so the graph rank 0 traced slices
rank 0's chunk (`slice(x, 1, 0, 4)`) and every rank that loads it takes rank 0's tokens. Without
it each rank's input is its own shard and the graph slices nothing.

Per-layer compile (`--per-layer`; bug class 13's second half): two identical MoE-style layers,
each traced by itself (identical graphs, one graph id) and put through the same pass pipeline.
With `--plant` the concretize pass, on its second call only, rewrites the root and keeps the old
cond branches, whose placeholders still carry the unbacked symbol (stale in the second layer).
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist

from tests.programs import precompile_load_passes as passes


def token_step(plant: bool, rank: int):
    def step(x, w):
        # BUG (--plant): a Python int from the rank, frozen into the trace as slice bounds
        tokens = x[:, rank * 4 : (rank + 1) * 4] if plant else x
        y = torch.relu(tokens @ w)
        return y + x.sum().detach()

    return step


def precompile(plant: bool) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx._graph_pickler import GraphPickler, Options
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    rank = dist.get_rank()
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    w = torch.randn(4 if plant else 8, 4)
    holder: list = [None]
    if rank == 0:
        gm = make_fx(token_step(plant, rank), tracing_mode="fake")(x, w)
        for p in passes.COMPILE_TIME:
            gm = p(gm, [x, w])
        holder[0] = GraphPickler.dumps(gm, Options(ops_filter=None))
    dist.broadcast_object_list(holder, src=0)
    loaded = GraphPickler.loads(holder[0], FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True))
    for p in passes.LOAD_TIME:
        loaded = p(loaded, [x, w])
    out = loaded(x, w)
    out = out[0] if isinstance(out, (tuple, list)) else out
    total = out.sum()
    dist.all_reduce(total)
    print(f"rank {rank}: loss {total.item():.4f}", flush=True)


def per_layer(plant: bool) -> None:
    passes.PLANT_SECOND_LAYER = plant
    for layer in range(2):
        gm = passes.trace_layer()
        for p in passes.PER_LAYER:
            gm = p(gm, [])
        print(f"rank {dist.get_rank()}: layer {layer}: {len(list(gm.graph.nodes))} nodes", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plant", action="store_true")
    ap.add_argument("--per-layer", action="store_true")
    args = ap.parse_args()
    dist.init_process_group("gloo")
    (per_layer if args.per_layer else precompile)(args.plant)


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()  # gloo can abort a finalizing interpreter (worker_exit says why)
