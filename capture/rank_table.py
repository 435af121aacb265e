"""Process groups, meshes and coordinates of this rank: what makes rank graphs comparable."""

from __future__ import annotations

import sys
import weakref
from typing import Any

# DeviceMeshes created in this process, registered by the hook on DeviceMesh.__init__.
MESHES: "weakref.WeakSet[Any]" = weakref.WeakSet()


def _world() -> Any:
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    if c10d is None or not c10d.is_initialized():
        return None
    return getattr(c10d, "_world", None)


def change_key() -> tuple[int, int]:
    """Cheap fingerprint: the rank table is rewritten only when groups or meshes change."""
    world = _world()
    groups = len(getattr(world, "pg_names", {}) or {}) if world is not None else -1
    return (groups, len(MESHES))


def rank_table(rank: int, world_size: int) -> dict[str, Any]:
    table: dict[str, Any] = {"rank": rank, "world_size": world_size, "backend": None, "groups": {}, "meshes": []}
    world = _world()
    if world is not None:
        c10d = sys.modules["torch.distributed.distributed_c10d"]
        try:
            table["backend"] = str(c10d.get_backend())
        except Exception:  # noqa: BLE001
            pass
        names = getattr(world, "pg_names", {}) or {}
        ranks = getattr(world, "pg_group_ranks", {}) or {}
        descs = getattr(world, "pg_to_tag", {}) or {}
        for pg, name in names.items():
            members = ranks.get(pg)
            entry: dict[str, Any] = {"ranks": sorted(members) if members is not None else None}
            desc = getattr(pg, "group_desc", None) or descs.get(pg)
            if desc:
                entry["desc"] = str(desc)
            table["groups"][str(name)] = entry
    for mesh in list(MESHES):
        try:
            table["meshes"].append(_mesh_entry(mesh))
        except Exception as e:  # noqa: BLE001 - a half-built mesh: say so, keep the rest
            table["meshes"].append({"error": f"{type(e).__name__}: {e}"})
    return table


def _mesh_entry(mesh: Any) -> dict[str, Any]:
    names = list(mesh.mesh_dim_names) if mesh.mesh_dim_names else None
    entry: dict[str, Any] = {
        "dim_names": names,
        "shape": list(mesh.mesh.shape),
        "mesh": mesh.mesh.tolist(),
        "device_type": mesh.device_type,
        "coordinate": mesh.get_coordinate(),
        "group_names": {},
    }
    for i in range(mesh.mesh.ndim):
        key = names[i] if names else str(i)
        try:
            entry["group_names"][key] = mesh.get_group(i).group_name
        except Exception:  # noqa: BLE001 - not a member of that dimension's group
            entry["group_names"][key] = None
    return entry


def register_mesh_hook(module: Any) -> None:
    """Post-import hook for torch.distributed.device_mesh: remember every DeviceMesh built."""
    cls = getattr(module, "DeviceMesh", None)
    if cls is None or getattr(cls.__init__, "_gti_wrapped", False):
        return
    original = cls.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        try:
            MESHES.add(self)
        except Exception:  # noqa: BLE001
            pass

    __init__._gti_wrapped = True  # type: ignore[attr-defined]  # a marker on the function object
    __init__.__wrapped__ = original  # type: ignore[attr-defined]  # the wrapped function, as functools.wraps sets it
    cls.__init__ = __init__
