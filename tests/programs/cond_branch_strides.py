"""A `torch.cond` whose branches' code uses a symbol only the outer code binds, and its fixed twin.

    python -m tests.programs.cond_branch_strides            # the branches raise NameError: u0
    python -m tests.programs.cond_branch_strides --fixed    # the upstream fix: quiet
    torchrun --nproc-per-node 2 -m tests.programs.cond_branch_strides [--fixed]

Models pytorch/pytorch#189528. The compiled `features` picks one of two feature sets with
`torch.cond`; the branches return tensors of different widths, so the merged output of the cond
has the unbacked width `u0` and the strides `(u0, 1)`. Inductor's lowering of `torch.cond`
(`Conditional.create`, torch 2.12-2.13; `Switch.create` later) forces each branch's output to
the merged strides: each branch function of the generated code allocates its output with
`(u0, 1)`, but `u0` is bound only in the outer function, after the cond has run, and the first
call of a branch raises `NameError: name 'u0' is not defined`. The generated code is saved when
it is compiled, before that call. The upstream fix (pytorch/pytorch#189529) keeps each branch's
own strides where the merged ones carry an unbacked symbol.

Both twins set the forcing themselves, so they mean the same on every torch: torch 2.13 forces
the merged strides and torch 2.14 has the fix. The run without `--fixed` forces the merged
strides (torch 2.13's lowering); `--fixed` forces each branch's own strides where the merged
ones hold an unbacked symbol (the fix). Only the strides required of a branch's outputs after
the branch is lowered are touched, as the lowering does.
"""

import argparse
import os
import threading
import weakref

import torch
import torch.distributed as dist


def features(x, y, wide):
    def wide_fn(x, y):
        return y.sin()

    def narrow_fn(x, y):
        return x * 2

    return torch.cond(wide, wide_fn, narrow_fn, (x, y))


def force_branch_strides(fixed: bool) -> None:
    """Set the strides Inductor's lowering of `torch.cond` requires of each branch's outputs:
    the merged output's (the bug), or, where those hold an unbacked symbol, the branch's own
    (the fix)."""
    from torch._inductor import graph as graph_mod
    from torch._inductor import ir
    from torch._inductor.virtualized import V
    from torch.fx.experimental.symbolic_shapes import has_free_unbacked_symbols

    lowered: weakref.WeakSet = weakref.WeakSet()  # branch graphs whose lowering has finished
    state = threading.local()
    run = graph_mod.GraphLowering.run

    def run_marked(self, *args):
        out = run(self, *args)
        lowered.add(self)
        return out

    graph_mod.GraphLowering.run = run_marked
    cls = getattr(ir, "Conditional", None) or ir.Switch
    create = cls.create.__func__

    def create_noted(klass, *args, **kwargs):
        # the cond's merged outputs (the FX node's value), for the branches lowered below
        state.merged = [v.stride() if isinstance(v, torch.Tensor) else None for v in V.graph.current_node.meta["val"]]
        state.at = {}
        try:
            return create(klass, *args, **kwargs)
        finally:
            state.merged = None

    cls.create = classmethod(create_noted)
    require = ir.ExternKernel.require_exact_strides.__func__

    def require_forced(klass, x, exact_strides, allow_padding=False):
        merged = getattr(state, "merged", None)
        branch = V.graph
        if merged is not None and branch in lowered:
            # the i-th output of a lowered branch, as the lowering forces them in order
            i = state.at.get(id(branch), 0)
            while i < len(merged) and merged[i] is None:
                i += 1
            state.at[id(branch)] = i + 1
            exact_strides = merged[i]
            if fixed and has_free_unbacked_symbols(exact_strides):
                outs = branch.module.graph.output_node().args[0]
                exact_strides = outs[i].meta["val"].stride()
        return require(klass, x, exact_strides, allow_padding)

    ir.ExternKernel.require_exact_strides = classmethod(require_forced)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixed", action="store_true", help="keep each branch's own strides (the upstream fix)")
    args = ap.parse_args()
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if distributed else 0
    force_branch_strides(args.fixed)
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.ones(()))
    opt = torch.optim.SGD([w], lr=0.01)
    compiled = torch.compile(features, dynamic=True, fullgraph=True)
    for i in range(2):
        x, y = torch.randn(4, 6), torch.randn(4, 9)
        feat = compiled(x, y, torch.tensor(i % 2 == 0))
        loss = ((feat.mean(1) * w) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if distributed:
            loss = loss.detach()
            dist.all_reduce(loss)
        print(f"rank {rank} step {i} width {feat.shape[1]} loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main()
    end_worker()  # gloo can abort a finalizing interpreter (worker_exit says why)
