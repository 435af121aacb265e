"""Train the sample MoE transformer the way graph-based trainers do.

    python -m graphtrain_inspect.samples.train                                  # 1 rank (gloo)
    torchrun --nproc-per-node 2 -m graphtrain_inspect.samples.train             # FSDP + EP over 2 ranks
    torchrun --nproc-per-node 4 -m graphtrain_inspect.samples.train             # mesh (dp, ep) = (2, 2)
    ... --mode eager                                         # same model, no tracing
    ... --coor                                               # compile on rank 0, load everywhere
    ... --bug rank-baked --bug device-literal ...            # planted bugs (README.md)
    ... --dump-graphs DIR                                    # each pass's output, per rank
    ... --device cuda                                        # NCCL, cuda:LOCAL_RANK

Prints ``step N loss X`` (rank 0; X is ``repr(float)`` of the loss averaged
over all ranks) at every step.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import torch
import torch.distributed as dist

from graphtrain_inspect.samples import bugs
from graphtrain_inspect.samples.model import ModelConfig, TrainStep, global_batch, init_full_params, shard_params
from graphtrain_inspect.samples.parallel import init_parallel


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m graphtrain_inspect.samples.train",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--mode", choices=("traced", "eager"), default="traced")
    p.add_argument(
        "--coor",
        action="store_true",
        help="compile on one rank: rank 0 traces + runs the passes, every rank loads that graph",
    )
    p.add_argument(
        "--bug", action="append", default=[], choices=bugs.ALL, help="plant a bug (repeatable); see samples/README.md"
    )
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument(
        "--dump-graphs",
        metavar="DIR",
        default=None,
        help="write print_readable of the traced graph and of each pass's output to DIR/rank<R>/",
    )
    p.add_argument(
        "--artifact-dir",
        metavar="DIR",
        default=None,
        help="--coor: where rank 0 writes the serialized graph (default: a temp dir, path broadcast)",
    )
    p.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--losses-json", metavar="PATH", default=None, help="rank 0 also writes the losses (floats) to PATH")
    p.add_argument("--quiet", action="store_true", help="no '# ...' info lines")
    p.add_argument(
        "--inductor-passes",
        action="store_true",
        help="after the pipeline, run Inductor's joint-graph and post-grad passes on the graph (dozens of passes)",
    )
    p.add_argument(
        "--experts",
        type=int,
        default=4,
        help="experts per MoE layer (8 ranks need 8: the router's rows are sharded over every rank)",
    )
    p.add_argument("--layers", type=int, default=2, help="transformer layers (about 450 graph nodes each)")
    p.add_argument(
        "--timings-json",
        metavar="PATH",
        default=None,
        help="rank 0 writes trace, pipeline and per-step wall times to PATH (benchmarks)",
    )
    return p.parse_args(argv)


def _log(pc, quiet, msg):
    if not quiet:
        print(f"# [rank{pc.rank}] {msg}", file=sys.stderr, flush=True)


def _unwrap(t):
    wait = getattr(t, "wait", None)
    if wait is not None and type(t).__name__ == "AsyncCollectiveTensor":
        return wait()
    return t


def build_graph(step, params, names, cfg, pc, args):
    """Trace the step once and run the pass pipeline; returns the final gm."""
    from graphtrain_inspect.samples import pipeline
    from graphtrain_inspect.samples.tracing import trace_train_step

    tok, lab = global_batch(cfg, pc.world, 0, pc.device)
    t0, c0 = time.perf_counter(), time.process_time()
    gm, fake_args = trace_train_step(step, list(params) + [tok, lab], list(names) + ["tokens", "labels"])
    TIMINGS["trace_s"] = time.perf_counter() - t0
    TIMINGS["trace_cpu_s"] = time.process_time() - c0
    TIMINGS["traced_nodes"] = len(gm.graph.nodes)
    _log(pc, args.quiet, f"traced joint graph: {len(gm.graph.nodes)} nodes in {time.perf_counter() - t0:.2f}s")
    t1, c1 = time.perf_counter(), time.process_time()
    gm = pipeline.run_pipeline(
        gm,
        fake_args,
        dump_dir=args.dump_graphs,
        rank=pc.rank,
        log=lambda m: _log(pc, args.quiet, m),
        inductor=args.inductor_passes,
    )
    TIMINGS["pipeline_s"] = time.perf_counter() - t1
    TIMINGS["pipeline_cpu_s"] = time.process_time() - c1
    gm.meta["gti_trace_info"] = {"traced_on": pc.describe(), "bugs": bugs.active()}
    return gm


_TEMP_DIRS: list[str] = []
TIMINGS: dict = {}  # filled as the run goes, written by --timings-json


def _artifact_path(pc, args):
    if args.artifact_dir:
        d = args.artifact_dir
        if pc.rank == 0:
            os.makedirs(d, exist_ok=True)
    else:
        d = tempfile.mkdtemp(prefix="gti-coor-") if pc.rank == 0 else None
        box = [d]
        dist.broadcast_object_list(box, src=0)
        d = box[0]
        if pc.rank == 0:
            _TEMP_DIRS.append(d)
    return os.path.join(d, "train_step.graph.pkl")


def _group_roles(pc) -> dict:
    return {"dense": pc.dense_group, "ep": pc.ep_group, "efsdp": pc.efsdp_group}


def remap_group_names(gm, saved_roles: dict, pc) -> int:
    """Process-group names are per-rank counters: map the tracing rank's
    group names (by role) to this rank's groups of the same role."""
    mine = _group_roles(pc)
    mapping = {saved_roles[r]: mine[r] for r in saved_roles if saved_roles[r] and mine.get(r)}
    mapping = {k: v for k, v in mapping.items() if k != v}
    if not mapping:
        return 0
    from graphtrain_inspect.samples.passes._util import is_collective, nested_graph_modules

    n = 0
    for g in [gm] + [s for _, s in nested_graph_modules(gm)]:
        for node in g.graph.nodes:
            if node.op == "call_function" and is_collective(node):
                new_args = tuple(mapping.get(a, a) if isinstance(a, str) else a for a in node.args)
                if new_args != node.args:
                    node.args = new_args
                    n += 1
        g.recompile()
    return n


def compile_on_one_rank(step, params, names, cfg, pc, args):
    from graphtrain_inspect.samples import artifact, pipeline

    path = _artifact_path(pc, args)
    if pc.rank == 0:
        gm = build_graph(step, params, names, cfg, pc, args)
        gm.meta["gti_group_roles"] = _group_roles(pc)
        artifact.save(gm, path)
        _log(pc, args.quiet, f"saved graph artifact {path} ({os.path.getsize(path)} bytes)")
    dist.barrier()
    gm = artifact.load(path)
    roles = gm.meta.get("gti_group_roles", {})
    n = remap_group_names(gm, roles, pc)
    _log(pc, args.quiet, f"loaded graph artifact ({len(gm.graph.nodes)} nodes, {n} group names remapped)")
    pipeline.dump(gm, args.dump_graphs, pc.rank, len(pipeline.PIPELINE) + 1, "loaded")
    return gm


def make_optimizer(params, args):
    if args.optimizer == "sgd":
        return torch.optim.SGD(params, lr=args.lr if args.lr is not None else 0.5)
    return torch.optim.Adam(params, lr=args.lr if args.lr is not None else 1e-2, foreach=False)


def main(argv=None):
    args = parse_args(argv)
    bugs.reset()
    bugs.enable(args.bug)
    if args.coor and args.mode == "eager":
        raise SystemExit("--coor needs --mode traced")
    torch.manual_seed(args.seed)
    if args.device == "cuda":
        # same kernels, same order in eager and traced runs; keep them deterministic
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.use_deterministic_algorithms(True, warn_only=True)
    pc = init_parallel(args.device)
    t_start = time.perf_counter()
    cfg = ModelConfig(seed=args.seed, n_layers=args.layers, n_experts=args.experts)
    shards = shard_params(init_full_params(cfg), cfg, pc)
    names = list(shards)
    params = [shards[n].requires_grad_(True) for n in names]
    opt = make_optimizer(params, args)
    step = TrainStep(cfg, pc, names)
    _log(
        pc,
        args.quiet,
        f"mesh {pc.mesh_dim_names}={tuple(pc.mesh.shape)} mode={args.mode} "
        f"coor={args.coor} bugs={bugs.active()} device={pc.device}",
    )

    if args.mode == "traced":
        if args.coor:
            gm = compile_on_one_rank(step, params, names, cfg, pc, args)
        else:
            gm = build_graph(step, params, names, cfg, pc, args)
        if args.dump_graphs:  # the graph this rank runs, with its metadata (GraphPickler)
            from graphtrain_inspect.samples import artifact

            artifact.save(gm, os.path.join(args.dump_graphs, f"rank{pc.rank}", "final.graph.pkl"))

        def run(*a):
            with torch.no_grad():
                return gm(*a)
    else:
        run = step

    losses = []
    TIMINGS["step_s"] = []
    for i in range(args.steps):
        t_step = time.perf_counter()
        tok, lab = global_batch(cfg, pc.world, i, pc.device)
        out = run(*params, tok, lab)
        loss, grads = _unwrap(out[0]), out[1:]
        for p, g in zip(params, grads):
            p.grad = _unwrap(g).detach()
        opt.step()
        opt.zero_grad(set_to_none=True)
        lv = float(loss)  # synchronizes: the step's work is done when this returns
        TIMINGS["step_s"].append(time.perf_counter() - t_step)
        losses.append(lv)
        if pc.rank == 0:
            print(f"step {i} loss {lv!r}", flush=True)
    _log(pc, args.quiet, f"done in {time.perf_counter() - t_start:.2f}s")
    if args.timings_json and pc.rank == 0:
        with open(args.timings_json, "w") as f:
            json.dump(TIMINGS, f)
    if args.losses_json and pc.rank == 0:
        with open(args.losses_json, "w") as f:
            json.dump(losses, f)
    dist.barrier()
    for d in _TEMP_DIRS:  # a default --coor artifact dir (rank 0 made it)
        shutil.rmtree(d, ignore_errors=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()  # gloo can abort a finalizing interpreter (worker_exit says why)
