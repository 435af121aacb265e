"""Trace the whole training step once into a joint FX graph.

make_fx under a FakeTensorMode that owns a ShapeEnv: ``.tolist()`` of routing
counts yields unbacked SymInts (u0, u1, ...), every node carries
``meta['val']`` (FakeTensors / SymInts), and mesh coordinates come out of
``torch.ops.device_mesh._runtime_compute_coordinate_on_dim`` (we trace with
``torch.distributed.config.compile_on_one_rank`` on).
"""

from __future__ import annotations

import contextlib
import inspect
import re

from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from graphtrain_inspect.samples.parallel import compile_on_one_rank_ctx


def _sanitize(name: str) -> str:
    return re.sub(r"[^0-9a-zA-Z_]", "_", name)


def _model_functions() -> list:
    """The sample's model code: the functions of model.py and parallel.py, and the step's call."""
    from graphtrain_inspect.samples import model, parallel

    fns = [
        obj
        for mod in (model, parallel)
        for obj in vars(mod).values()
        if inspect.isfunction(obj) and obj.__module__ == mod.__name__ and obj.__code__.co_filename == mod.__file__
    ]
    fns.append(model.TrainStep.__call__)
    return fns


def _register_anchors(fns: list) -> bool:
    """Register ``fns`` as torch's stack-trace anchors; False where this torch has none."""
    import torch.fx.proxy as fx_proxy

    register = getattr(fx_proxy, "_register_stack_trace_anchor", None)
    if register is None or not isinstance(getattr(fx_proxy, "_STACK_TRACE_ANCHORS", None), set):
        return False
    try:
        for fn in fns:
            register(fn)
    except TypeError:  # another signature than (fn): use the fallback
        return False
    return True


_FRAME_HEAD = re.compile(r'^(?P<head>\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in )forward$', re.M)


@contextlib.contextmanager
def _frames_named_forward(fns: list):
    """While tracing, give ``fns``' code the name ``forward``: the one name make_fx's filter keeps
    on every torch that has it. Yields {(file, line): real name} to put the names back with."""
    real: dict[tuple[str, int], str] = {}
    saved = [(fn, fn.__code__) for fn in fns]
    for fn, code in saved:
        for _start, _end, line in code.co_lines():
            if line is not None:
                real.setdefault((code.co_filename, line), code.co_name)
        renamed = {"co_name": "forward"}
        if hasattr(code, "co_qualname"):  # 3.11+: a traceback may name a frame by its qualname
            renamed["co_qualname"] = "forward"
        fn.__code__ = code.replace(**renamed)
    try:
        yield real
    finally:
        for fn, code in saved:
            fn.__code__ = code


def _real_frame_names(gm, real: dict[tuple[str, int], str]) -> None:
    """Put the functions' own names back into the stack traces of ``gm``'s nodes."""

    def name(m: re.Match) -> str:
        return m.group("head") + real.get((m.group("file"), int(m.group("line"))), "forward")

    for node in gm.graph.nodes:
        stack = node.meta.get("stack_trace")
        if isinstance(stack, str) and "in forward" in stack:
            node.meta["stack_trace"] = _FRAME_HEAD.sub(name, stack)


@contextlib.contextmanager
def model_frames_kept():
    """Make make_fx's stack traces name the model's own lines; yields ``finish(gm)`` for the traced graph.

    With ``record_stack_traces`` make_fx keeps only frames named ``forward``
    (``_record_forward_stack_traces_only``, 2.11 and 2.13), and, where torch
    has them (2.13: ``torch.fx.proxy._register_stack_trace_anchor`` with its
    ``_STACK_TRACE_ANCHORS``), frames of functions registered as anchors.
    The sample's model is functions, not modules: each is registered, so a
    node's innermost frame is the model line that made it. Without anchors
    (2.11) the functions are named ``forward`` while make_fx traces, and
    ``finish`` gives the recorded frames their real names back: the same
    stack traces either way.
    """
    fns = _model_functions()
    if _register_anchors(fns):
        yield lambda gm: None
        return
    with _frames_named_forward(fns) as real:
        yield lambda gm: _real_frame_names(gm, real)


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
    frames = contextlib.nullcontext(lambda gm: None)
    if "record_stack_traces" in inspect.signature(make_fx).parameters:
        kw["record_stack_traces"] = True  # '# File: samples/model.py:NN' comments point at model code
        frames = model_frames_kept()
    with frames as finish, compile_on_one_rank_ctx(True):
        gm = make_fx(step, tracing_mode="fake", **kw)(*fake_args)
    finish(gm)
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
