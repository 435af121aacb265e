"""Tensor parallelism on a 3-D mesh (dp, tp, ep), traced and passed the way graph trainers do it.

    torchrun --nproc-per-node 8 -m graphtrain_inspect.samples.mesh3d            # mesh (2, 2, 2), gloo
    graphtrain-inspect capture --simulate-world 64 --pass graphtrain_inspect.samples.mesh3d_passes:PIPELINE \\
        -- python -m graphtrain_inspect.samples.mesh3d                        # (16, 2, 2), fake backend
    ... --bug tp-coordinate        # the bias shard picked in the graph by the tp coordinate (a literal)
    ... --bug rank                 # an output scaled by rank + 1 (a literal)

A block per step: a column-parallel linear (weight columns split over `tp`, the input's gradient
all-reduced over `tp` in backward), a row-parallel linear (rows split over `tp`, the output
all-reduced over `tp`), then one expert per `ep` rank (tokens all-to-all over `ep` and back), and
gradients all-reduced over `dp`. Collectives are explicit functional collectives named by group,
so the traced joint graph holds them. The step (forward, loss and autograd.grad) is traced once
with make_fx on fake tensors, passed through `mesh3d_passes.PIPELINE`, then run for `--steps`
steps with SGD. Prints `step N loss X` on rank 0.

`--bug tp-coordinate` plants what `tp_mesh.get_local_rank()` in model code does: the tp
coordinate (a Python int) frozen into the graph, here as the index that selects this rank's bias
shard out of the replicated table (clean: the shard is cut before tracing and passed in).
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist

BUGS = ("tp-coordinate", "rank")

_c10d = torch.ops._c10d_functional


def _all_reduce(x, group: str):
    return _c10d.wait_tensor(_c10d.all_reduce(x, "sum", group))


class _ReduceForward(torch.autograd.Function):
    """Row-parallel output: sum over tp in forward, identity in backward."""

    @staticmethod
    def forward(ctx, x, group):
        return _all_reduce(x, group)

    @staticmethod
    def backward(ctx, g):
        return g, None


class _ReduceBackward(torch.autograd.Function):
    """Column-parallel input: identity in forward, the input's gradient summed over tp in backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return _all_reduce(g, ctx.group), None


def _all_to_all(x, group: str):
    import torch.distributed._functional_collectives as funcol

    return funcol.all_to_all_single_autograd(x, None, None, group)


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m graphtrain_inspect.samples.mesh3d",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--ep", type=int, default=2)
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--tokens", type=int, default=8, help="tokens per data-parallel rank (a multiple of --ep)")
    p.add_argument("--bug", action="append", default=[], choices=BUGS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cuda: NCCL, cuda:LOCAL_RANK")
    return p.parse_args(argv)


def init_mesh(tp: int, ep: int, device: torch.device):
    from torch.distributed.device_mesh import init_device_mesh

    if "RANK" not in os.environ:  # plain python: a 1-rank world (dp = tp = ep = 1)
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29531")
        tp = ep = 1
    if not dist.is_initialized():
        if device.type == "cuda":
            dist.init_process_group("nccl", device_id=device)
        else:
            dist.init_process_group("gloo")
    world = dist.get_world_size()
    if world % (tp * ep):
        raise SystemExit(f"world size {world} is not a multiple of tp * ep = {tp * ep}")
    return init_device_mesh(device.type, (world // (tp * ep), tp, ep), mesh_dim_names=("dp", "tp", "ep"))


def main(argv=None) -> None:
    args = parse_args(argv)
    dev = torch.device("cpu")
    if args.device == "cuda":
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
    mesh = init_mesh(args.tp, args.ep, dev)
    dp, tp, ep = mesh.mesh.shape
    rank = dist.get_rank()
    tp_rank = mesh["tp"].get_local_rank()
    ep_rank = mesh["ep"].get_local_rank()
    dp_rank = mesh["dp"].get_local_rank()
    groups = {d: mesh[d].get_group().group_name for d in ("dp", "tp", "ep")}
    D, H = args.dim, args.dim * 2
    if H % tp or args.tokens % ep:
        raise SystemExit("--dim * 2 must divide by --tp and --tokens by --ep")
    hs = H // tp

    # Full weights from one seed on every rank, then this rank's shards (eagerly, before tracing).
    g = torch.Generator().manual_seed(args.seed)
    w_in = torch.randn(D, H, generator=g) / D**0.5
    b_in = torch.randn(tp, hs, generator=g) * 0.1  # bias shards, one row per tp coordinate
    w_out = torch.randn(H, D, generator=g) / H**0.5
    experts = torch.randn(ep, D, D, generator=g) / D**0.5
    params = {
        "w_in": w_in[:, tp_rank * hs : (tp_rank + 1) * hs].clone(),
        "b_in": (b_in.clone() if "tp-coordinate" in args.bug else b_in[tp_rank].clone()),
        "w_out": w_out[tp_rank * hs : (tp_rank + 1) * hs].clone(),
        "expert": experts[ep_rank].clone(),
    }
    params = {k: v.to(dev) for k, v in params.items()}
    names = list(params)
    plist = [params[n].requires_grad_(True) for n in names]

    def step(w_in, b_in, w_out, expert, x, target):
        bias = (
            b_in.select(0, tp_rank) if "tp-coordinate" in args.bug else b_in
        )  # the tp coordinate, a Python int, baked
        h = _ReduceBackward.apply(x, groups["tp"]) @ w_in + bias
        h = torch.relu(h)
        y = _ReduceForward.apply(h @ w_out, groups["tp"])
        if "rank" in args.bug:
            y = y * (rank + 1)
        if ep > 1:
            y = _all_to_all(y, groups["ep"])
        z = y @ expert
        if ep > 1:
            z = _all_to_all(z, groups["ep"])
        loss = ((z - target) ** 2).mean()
        grads = torch.autograd.grad(loss, [w_in, b_in, w_out, expert])
        # data parallel: average over dp (each rank holds a dp-th of the batch)
        grads = [(_all_reduce(gr, groups["dp"]) if dp > 1 else gr) * (1.0 / dp) for gr in grads]
        return (loss, *grads)

    from graphtrain_inspect.samples import mesh3d_passes
    from graphtrain_inspect.samples.tracing import trace_train_step

    def batch(i: int):
        gb = torch.Generator().manual_seed(1000 * i + dp_rank)  # the same on the ranks of one dp slice
        return torch.randn(args.tokens, D, generator=gb).to(dev), torch.randn(args.tokens, D, generator=gb).to(dev)

    x0, t0 = batch(0)
    gm, fake_args = trace_train_step(step, plist + [x0, t0], names + ["x", "target"])
    gm = mesh3d_passes.run_pipeline(gm, fake_args)
    print(
        f"# [rank{rank}] mesh (dp, tp, ep) = ({dp}, {tp}, {ep}) coordinate {mesh.get_coordinate()} "
        f"groups {groups} traced {len(gm.graph.nodes)} nodes",
        file=sys.stderr,
        flush=True,
    )

    opt = torch.optim.SGD(plist, lr=0.1)
    for i in range(args.steps):
        x, t = batch(i)
        with torch.no_grad():
            out = gm(*plist, x, t)
        loss, grads = out[0], out[1:]
        for p_, gr in zip(plist, grads):
            p_.grad = gr.detach()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if rank == 0:
            print(f"step {i} loss {float(loss)!r}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()  # gloo can abort a finalizing interpreter (worker_exit says why)
