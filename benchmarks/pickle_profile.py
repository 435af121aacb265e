"""What a GraphPickler blob costs: `GraphPickler.dumps` of the sample's traced joint graph.

    python -m benchmarks.pickle_profile [--layers 6]

Traces the sample's training step (one CPU rank) as the capture sees it, then times the blob the
capture writes for it (capture/blobs.py: the graph with its fake-tensor metadata and ShapeEnv) and
prints a cProfile of a second dump. The figure behind the capture-overhead miss in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    from torch._guards import detect_fake_mode

    from graphtrain_inspect.capture import blobs
    from graphtrain_inspect.samples.model import ModelConfig, TrainStep, global_batch, init_full_params, shard_params
    from graphtrain_inspect.samples.parallel import init_parallel
    from graphtrain_inspect.samples.tracing import trace_train_step

    pc = init_parallel("cpu")
    cfg = ModelConfig(seed=0, n_layers=args.layers, n_experts=4)
    shards = shard_params(init_full_params(cfg), cfg, pc)
    names = list(shards)
    params = [shards[n].requires_grad_(True) for n in names]
    tok, lab = global_batch(cfg, pc.world, 0, pc.device)
    gm, fake_args = trace_train_step(TrainStep(cfg, pc, names), params + [tok, lab], names + ["tokens", "labels"])
    fm = detect_fake_mode(fake_args)
    shape_env = fm.shape_env if fm is not None else None
    pickler, opts = blobs.pickler(), blobs.pickler_options()
    nodes = len(gm.graph.nodes)
    t0 = time.perf_counter()
    data = pickler.dumps((gm, shape_env), opts)
    s = time.perf_counter() - t0
    print(f"{nodes} nodes: dumps {s:.2f} s, {s / nodes * 1e6:.0f} us per node, {len(data) / 1e6:.1f} MB")
    prof = cProfile.Profile()
    prof.enable()
    pickler.dumps((gm, shape_env), opts)
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
