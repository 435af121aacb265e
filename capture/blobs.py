"""GraphPickler blobs: a graph with its fake-tensor metadata and ShapeEnv, stored once per content."""

from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Any

from capture import logformat

# Node meta that holds live frames, modules or sources: not picklable, not needed to replay a pass.
_DROPPED_META = frozenset({"grapharg", "source_fn_stack", "nn_module_stack", "fwd_source_fn_stack"})


def pickler_options() -> Any:
    import dataclasses

    from torch.fx._graph_pickler import Options

    fields = {f.name for f in dataclasses.fields(Options)}
    # ops_filter=None: collectives (_c10d_functional) are refused by the default filter.
    kw: dict[str, Any] = {"ops_filter": None, "node_metadata_key_filter": lambda k: k not in _DROPPED_META}
    return Options(**{k: v for k, v in kw.items() if k in fields})


def dump(directory: str, gm: Any, shape_env: Any) -> dict[str, Any]:
    """Serialize (gm, shape_env); write blobs/<sha256>.gpkl unless it exists. Returns its reference."""
    from torch.fx._graph_pickler import GraphPickler

    data = GraphPickler.dumps((gm, shape_env), pickler_options())
    sha = hashlib.sha256(data).hexdigest()
    rel = logformat.blob_relpath(sha)
    path = os.path.join(directory, rel)
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
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
