"""Seed 004's bug in miniature: Inductor code compiled on one rank, loaded and run by every rank.

    torchrun --nproc-per-node 2 -m graphtrain_inspect.samples.codegen_one_rank --device cuda            # the bug
    torchrun --nproc-per-node 2 -m graphtrain_inspect.samples.codegen_one_rank --device cuda --per-rank # clean
    torchrun --nproc-per-node 2 -m graphtrain_inspect.samples.codegen_one_rank                          # CPU (gloo)

Without `--per-rank`, rank 0 lowers a small graph (`relu(x @ w) * 2 + 1`, traced with make_fx on
its own device) with Inductor's `compile_fx_inner`, as graph_trainer's precompile does, and hands
the generated wrapper to every rank through the process group's store; each rank loads it
(`PyCodeCache.load`) and calls it on tensors of its own device. On GPUs the wrapper pins the
compiling rank's device (`_DeviceGuard(0)`, `set_device(0)`, `get_raw_stream(0)`, buffers from
`empty_strided_cuda` on the current device), so rank 1 allocates and launches on cuda:0: it fails
("Expected all tensors to be on the same device") or, where it runs, leaves memory on cuda:0.
With `--per-rank` each rank compiles for itself: right everywhere. On CPU the code pins nothing
and both ways are right.

Each rank prints one line: `rank R: ok` or `rank R: FAILED <exception>` and what it allocated on
other ranks' devices. Nothing hangs: a failing rank still joins the final all-reduce. Exit status 0
when every rank computed the right result, else 1. Only torch and the standard library are used.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist


def fn(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.relu(x @ w) * 2 + 1,)


def compile_code(device: torch.device) -> str:
    """Inductor's generated wrapper for `fn` on `device` (make_fx, then compile_fx_inner)."""
    from torch._inductor.compile_fx import compile_fx_inner
    from torch.fx.experimental.proxy_tensor import make_fx

    example = [torch.randn(16, 32, device=device), torch.randn(32, 8, device=device)]
    gm = make_fx(fn)(*example)
    compiled = compile_fx_inner(gm, example)
    code = getattr(compiled, "source_code", None)
    if not isinstance(code, str):  # older layouts: read the file Inductor wrote
        path = getattr(compiled, "cache_path", None) or getattr(compiled, "current_callable", None)
        with open(str(path)) as f:
            code = f.read()
    return code


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--per-rank", action="store_true", help="every rank compiles for itself (the correct way)")
    a = p.parse_args()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if a.device == "cuda":
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    store = dist.distributed_c10d._get_default_store()

    if a.per_rank:
        code = compile_code(device)
    else:
        if rank == 0:
            store.set("gti_codegen_one_rank", compile_code(device))
        code = store.get("gti_codegen_one_rank").decode()

    from torch._inductor.codecache import PyCodeCache

    torch.manual_seed(rank)
    x, w = torch.randn(16, 32, device=device), torch.randn(32, 8, device=device)
    want = fn(x, w)[0]
    ok, why = True, ""
    try:
        mod = PyCodeCache.load(code)
        got = mod.call([x, w])[0]
        if got.device != want.device:
            ok, why = False, f"result on {got.device}, not {want.device}"
            got = got.to(want.device)
        if not torch.allclose(got, want, rtol=1e-3, atol=1e-3):
            ok, why = False, (why + "; " if why else "") + "wrong values"
    except Exception as e:  # noqa: BLE001 - the failure is what this sample shows
        ok, why = False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    foreign = ""
    if a.device == "cuda":
        others = {i: torch.cuda.memory_allocated(i) for i in range(torch.cuda.device_count()) if i != local}
        used = {i: b for i, b in others.items() if b}
        if used:
            foreign = "; allocated on " + ", ".join(f"cuda:{i} {b} B" for i, b in used.items())
    sys.stdout.write(f"rank {rank}: {'ok' if ok else 'FAILED ' + why}{foreign}\n")  # one write: ranks share stdout
    sys.stdout.flush()
    flag = torch.tensor([0.0 if ok else 1.0], device=device)
    dist.all_reduce(flag)
    dist.destroy_process_group()
    if rank == 0:
        print(
            f"{int(flag.item())} of {world} ranks failed "
            f"({'per-rank compile' if a.per_rank else 'compiled on rank 0, loaded by every rank'}, "
            f"{a.device})",
            flush=True,
        )
    return 0 if flag.item() == 0 else 1


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    end_worker(main())  # not sys.exit: gloo can abort a finalizing interpreter (worker_exit says why)
