"""Loading a captured graph for replay: the operator libraries its node table names, then its blob
unpickled (GraphPickler) into a fresh FakeTensorMode with its own ShapeEnv; a load that fails says
why in one line (`explain_load_error`). The blob's trust and sha256 are checked before this
(inspector.replay.plan). Imports torch."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import torch
import torch.fx

from graphtrain_inspect.inspector.errors import ReplayError
from graphtrain_inspect.inspector.replay.plan import (
    Blob,
    major_minor,
)

if TYPE_CHECKING:
    pass


# Operator namespaces whose libraries are registered by importing these modules, in order.
OP_LIBRARIES: dict[str, tuple[str, ...]] = {
    # DeviceMesh must be an opaque type before the device_mesh ops' schemas are inferred.
    "device_mesh": ("torch.distributed.tensor", "torch.distributed._ops.device_mesh"),
    "_dtensor": ("torch.distributed.tensor",),
    "_c10d_functional": ("torch.distributed._functional_collectives",),
    "_c10d_functional_autograd": ("torch.distributed._functional_collectives",),
    "c10d_functional": ("torch.distributed._functional_collectives",),
    "symm_mem": ("torch.distributed._symmetric_memory",),
}


def import_op_libraries(namespaces: set[str], extra: Sequence[str] = ()) -> list[str]:
    """Import what registers the graph's operator namespaces; returns notes on what failed."""
    notes = []
    mods: list[str] = []
    for ns in sorted(namespaces):
        mods.extend(m for m in OP_LIBRARIES.get(ns, ()) if m not in mods)
    mods.extend(m for m in extra if m not in mods)
    for m in mods:
        try:
            importlib.import_module(m)
        except Exception as e:  # noqa: BLE001 - reported; loading says more if it matters
            notes.append(f"could not import {m}: {type(e).__name__}: {e}")
    for ns in sorted(namespaces):
        if ns in OP_LIBRARIES or ns in extra:
            continue
        if not _namespace_loaded(ns):
            notes.append(
                f"operator namespace torch.ops.{ns} is not registered yet; if loading fails, "
                f"import its library with --import MODULE"
            )
    return notes


def _namespace_loaded(ns: str) -> bool:
    try:
        return bool(list(getattr(torch.ops, ns)))
    except Exception:  # noqa: BLE001
        return False


@dataclass
class Loaded:
    gm: torch.fx.GraphModule
    shape_env: Any
    fake_mode: Any
    seconds: float
    blob: Blob
    standins: list[str] = field(default_factory=list)  # __main__ classes replaced by stand-ins


def new_fake_mode() -> Any:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    return FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)


def load_blob(blob: Blob, *, captured_torch: str | None = None) -> Loaded:
    """Unpickle a verified blob into a fresh fake mode (each blob its own: loads() overwrites the
    mode's ShapeEnv). Raises ReplayError with one line saying why it could not be loaded."""
    from graphtrain_inspect.capture import blobs

    fm = new_fake_mode()
    t0 = time.perf_counter()
    standins: list[str] = []
    try:
        with _main_standins(standins):
            obj = blobs.pickler().loads(blob.data, fm)
    except Exception as e:
        raise ReplayError(explain_load_error(e, blob, captured_torch)) from e
    if isinstance(obj, tuple) and len(obj) == 2:
        gm, shape_env = obj
    else:
        gm, shape_env = obj, None
    if not isinstance(gm, torch.fx.GraphModule):
        raise ReplayError(f"blob {blob.path} holds a {type(gm).__name__}, not a GraphModule")
    if shape_env is None:
        shape_env = fm.shape_env
    return Loaded(gm, shape_env, fm, time.perf_counter() - t0, blob, sorted(set(standins)))


_STANDINS: dict[tuple[str, str], type] = {}


def _standin(module: str, name: str) -> type:
    key = (module, name)
    cls = _STANDINS.get(key)
    if cls is None:
        cls = type(
            name.rpartition(".")[2],
            (),
            {
                "__module__": module,
                "__qualname__": name,
                "_gti_standin": True,
                "__doc__": "Stands in for a class of the training's __main__ module (replay cannot import it).",
            },
        )
        _STANDINS[key] = cls
    return cls


# Our packages' names before they installed under one namespace (graphtrain_inspect.*): blobs of
# older captures (the bundled ones among them) name classes as capture.blobs.
FLAT_PACKAGES = ("capture", "inspector", "samples", "tui")


@contextlib.contextmanager
def _main_standins(found: list[str]) -> Iterator[None]:
    """Classes of the training's `__main__` (a model class in node metadata such as
    `fwd_nn_module_stack`) cannot be imported by another program: stand-ins take their place.
    Anything else that cannot be imported still fails the load."""
    from torch.fx import _graph_pickler as gp

    base = getattr(gp, "_GraphUnpickler", None)
    if base is None:
        yield
        return

    class _Unpickler(base):  # type: ignore[misc, valid-type]  # torch's unpickler class, found at run time
        def find_class(self, module: str, name: str) -> Any:
            try:
                return super().find_class(module, name)
            except (AttributeError, ImportError):
                if module.split(".")[0] in FLAT_PACKAGES:
                    # a blob written before the packages moved under graphtrain_inspect.*
                    return super().find_class(f"graphtrain_inspect.{module}", name)
                if module != "__main__":
                    raise
                found.append(f"{module}.{name}")
                return _standin(module, name)

    # torch's private unpickler class, swapped for this load and back: a class attribute of its
    # module, which mypy reads as a type that cannot be assigned
    gp._GraphUnpickler = _Unpickler  # type: ignore[misc]  # swapped for this load, put back below
    try:
        yield
    finally:
        gp._GraphUnpickler = base  # type: ignore[misc]  # torch's own class, put back


def explain_load_error(e: BaseException, blob: Blob, captured_torch: str | None) -> str:
    here = torch.__version__
    versions = ""
    if captured_torch and major_minor(captured_torch) != major_minor(here):
        versions = (
            f" (captured with torch {captured_torch}, loading with torch {here}: "
            "blobs are not portable across torch versions)"
        )
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    if "CUDA" in msg and ("deserialize" in msg or "is_available" in msg):
        return (
            f"cannot load {blob.path}: the graph holds real CUDA tensor constants (not fake tensors), and loading "
            f"them needs a GPU; this machine has none{versions}"
        )
    m = re.search(r"_OpNamespace' '([\w.]+)' object has no attribute '(\w+)'|No such operator ([\w:.]+)", msg)
    if m:
        op = m.group(3) or f"{m.group(1)}.{m.group(2)}"
        return (
            f"cannot load {blob.path}: operator {op} is not registered in this process; import the library that "
            f"defines it with --import MODULE{versions}"
        )
    if isinstance(e, (ModuleNotFoundError, AttributeError, ImportError)):
        return f"cannot load {blob.path}: {type(e).__name__}: {msg}{versions}"
    return f"cannot load {blob.path}: {type(e).__name__}: {msg[:300]}{versions}"
