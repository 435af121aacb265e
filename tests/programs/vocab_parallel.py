"""Shard bounds baked into a graph compiled on one rank (bug class 17).

    graphtrain-inspect capture --pass tests.programs.precompile_load_passes:COMPILE_TIME \\
        --pass tests.programs.precompile_load_passes:LOAD_TIME \\
        -- torchrun --nproc-per-node 2 -m tests.programs.vocab_parallel [--fixed | --both]

A vocabulary-parallel embedding and cross-entropy: a vocabulary of 32 over a tp mesh of 2, each
rank holding 16 rows of the table. Rank 0 traces the step with make_fx, runs the compile-time
passes and broadcasts the graph (GraphPickler); every rank loads it and runs it.

The model code reads the tp coordinate as a Python int, so the graph rank 0 traced holds rank 0's
vocabulary range: `lt(ids, 0)`, `ge(ids, 16)`, `sub(ids, 0)`; rank 1 loads it and looks its ids
up in the wrong range. With `--fixed` the coordinate is an input of the graph (a tensor), and
the bounds are computed from it at run time on every rank.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F

from tests.programs import precompile_load_passes as passes

VOCAB, DIM, BATCH = 32, 4, 6


def make_step(group, shard: int, coordinate: int, fixed: bool):
    def step(ids, target, w, offset):
        # BUG (not --fixed): the coordinate as a Python int, frozen into the trace
        start = offset if fixed else coordinate * shard
        end = start + shard
        out_of_range = (ids < start) | (ids >= end)
        local = (ids - start).masked_fill(out_of_range, 0)
        h = F.embedding(local, w).masked_fill(out_of_range.unsqueeze(-1), 0.0)
        h = funcol.all_reduce(h, "sum", group)
        logits = h @ w.t()  # this rank's columns of the vocabulary
        top = funcol.all_reduce(logits.detach().amax(-1), "max", group)
        total = funcol.all_reduce(torch.exp(logits - top.unsqueeze(-1)).sum(-1), "sum", group)
        miss = (target < start) | (target >= end)
        picked = logits.gather(1, (target - start).masked_fill(miss, 0).unsqueeze(-1)).squeeze(-1)
        picked = funcol.all_reduce(picked.masked_fill(miss, 0.0), "sum", group)
        return (torch.log(total) + top - picked).mean()

    return step


def main() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.device_mesh import init_device_mesh
    from torch.fx._graph_pickler import GraphPickler, Options
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    ap = argparse.ArgumentParser()
    ap.add_argument("--fixed", action="store_true")
    ap.add_argument("--both", action="store_true", help="the baked step, then the fixed one (a pipeline each)")
    args = ap.parse_args()
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("tp",))
    coordinate = mesh.get_local_rank("tp")
    shard = VOCAB // mesh.size(0)
    torch.manual_seed(0)
    table = torch.randn(VOCAB, DIM)
    w = table[coordinate * shard : (coordinate + 1) * shard].clone()
    ids = torch.randint(0, VOCAB, (BATCH,))
    target = torch.randint(0, VOCAB, (BATCH,))
    offset = torch.tensor(coordinate * shard)
    for fixed in (False, True) if args.both else (args.fixed,):
        step = make_step(mesh.get_group("tp"), shard, coordinate, fixed)
        holder: list = [None]
        if dist.get_rank() == 0:
            gm = make_fx(step, tracing_mode="fake")(ids, target, w, offset)
            for p in passes.COMPILE_TIME:
                gm = p(gm, [ids, target, w, offset])
            holder[0] = GraphPickler.dumps(gm, Options(ops_filter=None))
        dist.broadcast_object_list(holder, src=0)
        loaded = GraphPickler.loads(holder[0], FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True))
        for p in passes.LOAD_TIME:
            loaded = p(loaded, [ids, target, w, offset])
        loss = loaded(ids, target, w, offset)
        loss = loss[0] if isinstance(loss, (tuple, list)) else loss
        print(f"rank {dist.get_rank()}: {'fixed' if fixed else 'baked'} loss {loss.item():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()
