"""Small graph passes `(gm, example_inputs) -> gm` for the capture tests, in a registry."""

import torch
import torch.fx


def remove_dead_code(gm, example_inputs):
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def scale_by_rank(gm, example_inputs):
    """A rank-baked constant on purpose: multiplies the loss by (1 + 0 * rank) with the rank literal kept."""
    import os

    rank = int(os.environ.get("RANK", 0))
    out = next(n for n in gm.graph.nodes if n.op == "output")
    loss = out.args[0][0]
    with gm.graph.inserting_before(out):
        zero = gm.graph.call_function(torch.ops.aten.mul.Tensor, (loss, 0))
        rk = gm.graph.call_function(torch.ops.aten.mul.Tensor, (zero, rank))
        new = gm.graph.call_function(torch.ops.aten.add.Tensor, (loss, rk))
    out.replace_input_with(loss, new)
    zero.meta["val"] = loss.meta.get("val")
    rk.meta["val"] = loss.meta.get("val")
    new.meta["val"] = loss.meta.get("val")
    gm.recompile()
    return gm


class _Callback:
    """A callback that refuses pickling, as one holding a lock, a stream or a process handle does.
    A lambda would not do: where dill is installed (torchdata, the torchtitan extra, brings it),
    torch imports it and dill's pickler extension serializes lambdas."""

    def __call__(self) -> None:
        return None

    def __reduce_ex__(self, protocol):
        raise TypeError("a callback holding a live handle cannot be pickled")


def tag_with_callback(gm, example_inputs):
    """Stashes a callable in node meta, as some frameworks do: GraphPickler cannot serialize it,
    so the capture's blob of this graph fails (a real instrumentation error) and training goes on."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    loss = out.args[0][0]
    with gm.graph.inserting_before(out):
        done = gm.graph.call_function(torch.ops.aten.clone.default, (loss,))
    done.meta["val"] = loss.meta.get("val")
    done.meta["on_done"] = _Callback()
    out.replace_input_with(loss, done)
    gm.recompile()
    return gm


def always_fails(gm, example_inputs):
    raise RuntimeError("this pass always fails")


PIPELINE = [remove_dead_code, scale_by_rank]
