"""GraphPickler blobs: a graph with its fake-tensor metadata and ShapeEnv, stored once per content."""

from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Any

from graphtrain_inspect.capture import logformat

# Node meta that holds live frames, modules or sources: not picklable, not needed to replay a pass.
_DROPPED_META = frozenset({"grapharg", "source_fn_stack", "nn_module_stack", "fwd_source_fn_stack"})


def pickler_options() -> Any:
    import dataclasses

    from torch.fx._graph_pickler import Options

    fields = {f.name for f in dataclasses.fields(Options)}
    # ops_filter=None: collectives (_c10d_functional) are refused by the default filter.
    kw: dict[str, Any] = {"ops_filter": None, "node_metadata_key_filter": lambda k: k not in _DROPPED_META}
    return Options(**{k: v for k, v in kw.items() if k in fields})


_PICKLER: Any = None


def _strip_fake_mode(desc: Any) -> Any:
    import dataclasses

    base = getattr(desc, "base", None)
    if base is not None:
        desc = dataclasses.replace(desc, base=_strip_fake_mode(base))
    return dataclasses.replace(desc, fake_mode=None)


def pickler() -> Any:
    """GraphPickler, fixed for views whose base description still holds its fake mode.

    torch 2.11/2.13 fail on such views ("Can't pickle local object WeakValueDictionary"); upstream
    later clears fake_mode on the base too. We do that in a subclass used only for our blobs, so
    the training's own pickling (Inductor caches, a precompile artifact) is left as it was.
    """
    global _PICKLER
    if _PICKLER is not None:
        return _PICKLER
    import dataclasses

    from torch._subclasses.fake_tensor import FakeTensor
    from torch.fx import _graph_pickler as gp

    base_data = getattr(gp, "_TensorPickleData", None)

    class _ViewSafeTensorPickleData(base_data):  # type: ignore[misc, valid-type]
        def __init__(self, describer: Any, t: Any) -> None:
            super().__init__(describer, t)
            base = getattr(self.metadata, "base", None)
            if base is not None and getattr(base, "fake_mode", None) is not None:
                self.metadata = dataclasses.replace(self.metadata, base=_strip_fake_mode(base))

    class CapturePickler(gp.GraphPickler):
        def reducer_override(self, obj: Any) -> Any:
            # torch 2.13 lets some types through untouched; 2.11 has no such list.
            if isinstance(obj, FakeTensor) and type(obj) not in getattr(self, "_PASSTHROUGH_TYPES", ()):
                return _ViewSafeTensorPickleData.reduce_helper(self, obj)
            return super().reducer_override(obj)

    # Pickle records classes by module + qualname: make ours findable when a blob is loaded.
    _ViewSafeTensorPickleData.__qualname__ = _ViewSafeTensorPickleData.__name__
    globals()["_ViewSafeTensorPickleData"] = _ViewSafeTensorPickleData
    _PICKLER = CapturePickler if base_data is not None and hasattr(base_data, "reduce_helper") else gp.GraphPickler
    return _PICKLER


def dump(directory: str, gm: Any, shape_env: Any) -> dict[str, Any]:
    """Serialize (gm, shape_env); write blobs/<sha256>.gpkl unless it exists. Returns its reference.

    Called in the training process, or in a forked child (capture/blob_children.py)."""
    return write_blob(directory, pickler().dumps((gm, shape_env), pickler_options()))


def write_blob(directory: str, data: bytes) -> dict[str, Any]:
    """Write blobs/<sha256 of data>.gpkl unless it exists; return its reference."""
    sha = hashlib.sha256(data).hexdigest()
    rel = logformat.blob_relpath(sha)
    path = os.path.join(directory, rel)
    if not os.path.exists(path):
        try:  # the blob directory only: a capture directory removed under the run stays removed
            os.mkdir(os.path.dirname(path))
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
