"""Payloads of a log as the schema types them: every entry of another type dropped, in place.

A log may come from anywhere: `symbols`, `rank_table` and `devices` hand on only what these let
through, so the checks never meet a field of the wrong type."""

from __future__ import annotations

from typing import Any


def clean_symbols(v: dict[str, Any]) -> dict[str, Any]:
    """A `gti_symbols` payload with the schema's types (entries of other types dropped, in place)."""
    syms = v["symbols"]
    for k in [k for k, e in syms.items() if not isinstance(e, dict)]:
        del syms[k]
    for e in syms.values():
        for key in ("bound_by", "inputs", "used_by"):
            if key in e:
                e[key] = [w for w in e[key] if isinstance(w, dict)] if isinstance(e[key], list) else []
        if "range" in e and not isinstance(e["range"], list):
            del e["range"]
    if not isinstance(v.get("renamings"), dict):
        v["renamings"] = {}
    v["renamings"] = {k: r for k, r in v["renamings"].items() if isinstance(r, str)}
    if "deferred_asserts" in v:
        da = v["deferred_asserts"]
        v["deferred_asserts"] = [a for a in da if isinstance(a, dict)] if isinstance(da, list) else []
    return v


def clean_rank_table(v: dict[str, Any]) -> dict[str, Any]:
    """A `gti_ranks` payload with the schema's types (entries of other types dropped, in place)."""
    groups = v.get("groups")
    v["groups"] = {str(k): g for k, g in groups.items() if isinstance(g, dict)} if isinstance(groups, dict) else {}
    for g in v["groups"].values():
        if not isinstance(g.get("ranks"), list):
            g.pop("ranks", None)
        if not isinstance(g.get("desc"), (str, type(None))):
            g["desc"] = None
    meshes = v.get("meshes")
    v["meshes"] = [m for m in meshes if isinstance(m, dict)] if isinstance(meshes, list) else []
    for m in v["meshes"]:
        for key in ("shape", "dim_names", "coordinate"):
            if key in m and not isinstance(m[key], list):
                del m[key]
        if "group_names" in m and not isinstance(m["group_names"], dict):
            del m["group_names"]
        if "mesh" in m and not isinstance(m["mesh"], list):
            del m["mesh"]
    for key in ("rank", "world_size"):
        if key in v and type(v[key]) is not int:
            del v[key]
    return v


_STR_OR_NONE = (str, type(None))


def _device_entry_ok(x: Any) -> bool:
    # unrolled over _DEVICE_STR_FIELDS: a device table lists every value of a large graph
    if type(x) is not dict:
        return False
    g = x.get
    ok = _STR_OR_NONE
    return (type(g("graph")) in ok and type(g("node")) in ok and type(g("target")) in ok and type(g("where")) in ok
            and type(g("device")) in ok and type(g("kind")) in ok and type(g("dtype")) in ok)  # fmt: skip


def clean_devices(v: dict[str, Any]) -> dict[str, Any]:
    """A `gti_devices` payload with the schema's types (entries of other types dropped, in place)."""
    for key in ("literals", "values"):
        items = v.get(key)
        v[key] = [x for x in items if _device_entry_ok(x)] if isinstance(items, list) else []
    if not isinstance(v.get("own_device"), (str, type(None))):
        v["own_device"] = None
    if "local_rank" in v and type(v["local_rank"]) is not int:
        v["local_rank"] = None
    return v
