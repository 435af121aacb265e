"""Trace the whole training step once into a joint FX graph.

make_fx under a FakeTensorMode that owns a ShapeEnv: ``.tolist()`` of routing
counts yields unbacked SymInts (u0, u1, ...), every node carries
``meta['val']`` (FakeTensors / SymInts), and mesh coordinates come out of
``torch.ops.device_mesh._runtime_compute_coordinate_on_dim`` (we trace with
``torch.distributed.config.compile_on_one_rank`` on).
"""

from __future__ import annotations

import inspect
import re

from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from graphtrain_inspect.samples.parallel import compile_on_one_rank_ctx


def _sanitize(name: str) -> str:
    return re.sub(r"[^0-9a-zA-Z_]", "_", name)


def keep_model_frames() -> bool:
    """Make make_fx's stack traces name the model's own lines; True where torch can.

    With ``record_stack_traces`` make_fx keeps only frames named ``forward``
    (``_record_forward_stack_traces_only``, 2.11 and 2.13), and, where torch
    has them (2.13: ``torch.fx.proxy._register_stack_trace_anchor`` with its
    ``_STACK_TRACE_ANCHORS``), frames of functions registered as anchors.
    The sample's model is functions, not modules: each is registered, so a
    node's innermost frame is the model line that made it. Without anchors
    (a torch that lacks them) nodes keep only frames of modules' ``forward``.
    """
    import torch.fx.proxy as fx_proxy

    register = getattr(fx_proxy, "_register_stack_trace_anchor", None)
    if register is None or not isinstance(getattr(fx_proxy, "_STACK_TRACE_ANCHORS", None), set):
        return False
    from graphtrain_inspect.samples import model, parallel

    fns = [
        obj
        for mod in (model, parallel)
        for obj in vars(mod).values()
        if inspect.isfunction(obj) and obj.__module__ == mod.__name__
    ]
    fns.append(model.TrainStep.__call__)
    try:
        for fn in fns:
            register(fn)
    except TypeError:  # another signature than (fn): leave torch's default
        return False
    return True


def trace_train_step(step, args, input_names):
    """Trace ``step(*args)`` (forward + loss + autograd.grad) into one graph.

    Returns ``(gm, fake_args)``.  Placeholders are renamed after
    ``input_names``; every node gets ``meta['phase']`` ('forward' or
    'backward', the latter also ``meta['autograd_backward'] = True``).
    """
    shape_env = ShapeEnv()
    fake_mode = FakeTensorMode(shape_env=shape_env, allow_non_fake_inputs=False)
    fake_args = []
    for a in args:
        fa = fake_mode.from_tensor(a, static_shapes=True)
        if a.requires_grad and not fa.requires_grad:  # pragma: no cover
            fa.requires_grad_(True)
        fake_args.append(fa)

    kw = {}
    if "record_stack_traces" in inspect.signature(make_fx).parameters:
        kw["record_stack_traces"] = True  # '# File: samples/model.py:NN' comments point at model code
        keep_model_frames()
    with compile_on_one_rank_ctx(True):
        gm = make_fx(step, tracing_mode="fake", **kw)(*fake_args)
    gm.shape_env = shape_env

    # readable placeholder names (make_fx names them arg0_1, ...)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, name in zip(placeholders, input_names):
        node.meta["gti_input"] = name
        new = _sanitize(name)
        rename = getattr(node, "_rename", None)
        if rename is not None:
            rename(new)
            node.target = node.name

    boundary = getattr(step, "phase_boundary", None)
    for i, node in enumerate(gm.graph.nodes):
        if node.op in ("placeholder", "output"):
            continue
        if boundary is not None and i >= boundary:
            node.meta["phase"] = "backward"
            node.meta["autograd_backward"] = True
        else:
            node.meta["phase"] = "forward"
    gm.graph.lint()
    gm.recompile()
    return gm, fake_args
