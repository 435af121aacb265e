"""Serialize the final graph on one rank, load it on every rank.

Uses ``torch.fx._graph_pickler.GraphPickler`` so ``meta['val']`` FakeTensors
with SymInt shapes, ``unbacked_bindings`` and the nested ``invoke_subgraph``
bodies survive, together with the ShapeEnv.  Each load gets a fresh
FakeTensorMode.  (Plain pickle would re-trace from code and lose all meta.)
"""

from __future__ import annotations

import dataclasses
import os

import torch.fx as fx

_DROP_META = {"grapharg", "source_fn_stack", "nn_module_stack", "fwd_source_fn_stack"}

_PATCHED = False


def _patch_view_pickling() -> None:
    """Local fix for views whose base metadata still holds a fake_mode
    ("Can't pickle local object WeakValueDictionary"); fixed upstream later
    by clearing ``fake_mode`` on the base description too."""
    global _PATCHED
    if _PATCHED:
        return
    from torch.fx import _graph_pickler as gp

    cls = getattr(gp, "_TensorPickleData", None)
    if cls is None:  # pragma: no cover
        return
    orig_init = cls.__init__

    def __init__(self, describer, t):
        orig_init(self, describer, t)
        md = self.metadata
        base = getattr(md, "base", None)
        if base is not None and getattr(base, "fake_mode", None) is not None:
            self.metadata = dataclasses.replace(md, base=_strip_fake_mode(base))

    cls.__init__ = __init__
    _PATCHED = True


def _strip_fake_mode(desc):
    base = getattr(desc, "base", None)
    if base is not None:
        desc = dataclasses.replace(desc, base=_strip_fake_mode(base))
    return dataclasses.replace(desc, fake_mode=None)


def _register_custom_ops() -> None:
    """Ops a loaded graph may call must be registered before ``loads``."""
    try:
        import torch.distributed._ops.device_mesh  # registers the ops, binds nothing we use
    except ImportError:  # pragma: no cover
        pass
    try:
        import torch.distributed._functional_collectives  # noqa: F401
    except ImportError:  # pragma: no cover
        pass


def _options():
    from torch.fx._graph_pickler import Options

    return Options(ops_filter=None, node_metadata_key_filter=lambda k: k not in _DROP_META)


def dumps_graph(gm: fx.GraphModule) -> bytes:
    from torch.fx._graph_pickler import GraphPickler

    _patch_view_pickling()
    shape_env = getattr(gm, "shape_env", None)
    return GraphPickler.dumps((gm, shape_env), _options())


def loads_graph(blob: bytes) -> fx.GraphModule:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx._graph_pickler import GraphPickler
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    _register_custom_ops()
    fake_mode = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)  # fresh per blob
    gm, shape_env = GraphPickler.loads(blob, fake_mode)
    if shape_env is not None:
        gm.shape_env = shape_env
    from graphtrain_inspect.samples.passes._util import finalize

    return finalize(gm)


def save(gm: fx.GraphModule, path: str) -> None:
    blob = dumps_graph(gm)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(blob)
    os.replace(tmp, path)


def load(path: str) -> fx.GraphModule:
    with open(path, "rb") as f:
        return loads_graph(f.read())
