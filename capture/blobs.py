"""GraphPickler blobs: a graph with its fake-tensor metadata and ShapeEnv, stored once per content."""

from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Any

from graphtrain_inspect.capture.shared import logformat

# Node meta that holds live frames, modules or sources: not picklable, not needed to replay a pass.
_DROPPED_META = frozenset({"grapharg", "source_fn_stack", "nn_module_stack", "fwd_source_fn_stack"})


def pickler_options() -> Any:
    import dataclasses

    from torch.fx._graph_pickler import Options

    fields = {f.name for f in dataclasses.fields(Options)}
    # ops_filter=None: collectives (_c10d_functional) are refused by the default filter.
    kw: dict[str, Any] = {"ops_filter": None, "node_metadata_key_filter": lambda k: k not in _DROPPED_META}
    return Options(**{k: v for k, v in kw.items() if k in fields})


_PICKLER: Any = None  # the class dump uses (pickler())
_TORCH_PICKLER: Any = None  # the same on torch's own GraphPickler, where that is not on the C pickler


def _strip_fake_mode(desc: Any) -> Any:
    import dataclasses

    base = getattr(desc, "base", None)
    if base is not None:
        desc = dataclasses.replace(desc, base=_strip_fake_mode(base))
    return dataclasses.replace(desc, fake_mode=None)


def pickler() -> Any:
    """GraphPickler, fixed for views whose base description still holds its fake mode, and run
    on the C pickler.

    torch 2.11/2.13 fail on such views ("Can't pickle local object WeakValueDictionary"); upstream
    later clears fake_mode on the base too. We do that in a subclass used only for our blobs, so
    the training's own pickling (Inductor caches, a precompile artifact) is left as it was.

    Where `dill` is installed (torchtitan's `datasets` brings it), torch builds GraphPickler on
    dill's pure-Python pickler: 4-5x slower per node than the C pickler. Our blobs then use
    GraphPickler's own methods on the C pickler (`_on_c_pickler`);
    a graph only dill can serialize (a lambda in node meta) is retried with torch's (`dump`).
    """
    global _PICKLER, _TORCH_PICKLER
    if _PICKLER is not None:
        return _PICKLER
    from torch.fx import _graph_pickler as gp

    base_data = getattr(gp, "_TensorPickleData", None)
    if base_data is None or not hasattr(base_data, "reduce_helper"):
        _PICKLER = _TORCH_PICKLER = gp.GraphPickler
        return _PICKLER
    _TORCH_PICKLER = _view_safe(gp.GraphPickler, base_data)
    c_based = _on_c_pickler(gp.GraphPickler)
    _PICKLER = _view_safe(c_based, base_data) if c_based is not None else _TORCH_PICKLER
    return _PICKLER


def _view_safe(graph_pickler: Any, base_data: Any) -> Any:
    import dataclasses

    from torch._subclasses.fake_tensor import FakeTensor

    view_safe: Any = globals().get("_ViewSafeTensorPickleData")
    if view_safe is None:

        class _ViewSafeTensorPickleData(base_data):
            metadata: Any  # the base's field (an annotation only: nothing made at run time)

            def __init__(self, describer: Any, t: Any) -> None:
                super().__init__(describer, t)
                base = getattr(self.metadata, "base", None)
                if base is not None and getattr(base, "fake_mode", None) is not None:
                    self.metadata = dataclasses.replace(self.metadata, base=_strip_fake_mode(base))

        # Pickle records classes by module + qualname: make ours findable when a blob is loaded.
        _ViewSafeTensorPickleData.__qualname__ = _ViewSafeTensorPickleData.__name__
        globals()["_ViewSafeTensorPickleData"] = view_safe = _ViewSafeTensorPickleData

    class CapturePickler(graph_pickler):
        def reducer_override(self, obj: Any) -> Any:
            # torch 2.13 lets some types through untouched; 2.11 has no such list.
            if isinstance(obj, FakeTensor) and type(obj) not in getattr(self, "_PASSTHROUGH_TYPES", ()):
                return view_safe.reduce_helper(self, obj)
            return super().reducer_override(obj)

    return CapturePickler


def _on_c_pickler(graph_pickler: Any) -> Any:
    """GraphPickler's methods on the C `pickle.Pickler`, where torch built it on another pickler
    (dill's); None where it is on the C pickler already, or its methods cannot be moved.

    The methods are GraphPickler's own (taken from its class, nothing of them rewritten); the state
    its `__init__` adds (options, the unpickle-state token, the tensor describer) is taken from a
    GraphPickler made for the purpose, whatever names this torch gives it."""
    import io
    import pickle

    if issubclass(graph_pickler, pickle.Pickler):
        return None
    own = {
        k: v
        for k, v in vars(graph_pickler).items()
        if k not in ("__init__", "__dict__", "__weakref__", "__module__", "__doc__", "__qualname__")
    }
    for v in own.values():
        fn = getattr(v, "__func__", v)
        code = getattr(fn, "__code__", None)
        if code is not None and "__class__" in code.co_freevars:  # a zero-argument super(): bound to GraphPickler
            return None
    parent = graph_pickler.__mro__[1]
    try:
        state = set(vars(graph_pickler(io.BytesIO()))) - set(vars(parent(io.BytesIO())))
    except Exception:  # noqa: BLE001 - a torch whose GraphPickler is made otherwise: keep torch's
        return None

    def __init__(self: Any, file: Any, options: Any = None) -> None:
        pickle.Pickler.__init__(self, file)
        made = graph_pickler(io.BytesIO(), options)
        for name in state:
            setattr(self, name, getattr(made, name))

    return type("GraphPickler", (pickle.Pickler,), {**own, "__init__": __init__, "__module__": __name__})


def dump(directory: str, gm: Any, shape_env: Any) -> dict[str, Any]:
    """Serialize (gm, shape_env); write blobs/<sha256>.gpkl unless it exists. Returns its reference.

    Called in the training process, or in a forked child (capture/blob_children.py)."""
    options = pickler_options()
    try:
        data = pickler().dumps((gm, shape_env), options)
    except Exception:
        if _TORCH_PICKLER is _PICKLER:
            raise
        # dill serializes what the C pickler refuses (lambdas, local functions): as before
        data = _TORCH_PICKLER.dumps((gm, shape_env), options)
    return write_blob(directory, data)


def write_blob(directory: str, data: bytes) -> dict[str, Any]:
    """Write blobs/<sha256 of data>.gpkl unless it exists; return its reference."""
    sha = hashlib.sha256(data).hexdigest()
    rel = logformat.blob_relpath(sha)
    path = os.path.join(directory, rel)
    if not os.path.exists(path):
        try:  # the blob directory only: a capture directory removed under the run stays removed
            os.mkdir(os.path.dirname(path), 0o755)
        except FileExistsError:
            pass
        # Write then rename: a reader never sees a partial blob under its final name.
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    return {"sha256": sha, "path": rel, "bytes": len(data)}


def __getattr__(name: str) -> Any:
    # Loading a blob looks up capture.blobs._ViewSafeTensorPickleData before any dump built it.
    if name == "_ViewSafeTensorPickleData":
        pickler()
        return globals()[name]
    raise AttributeError(name)
