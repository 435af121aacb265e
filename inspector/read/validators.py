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


# -- the manifest ------------------------------------------------------------------------------
# The schema of manifest.json (docs/log-format.md) as the readers take it: a type or a tuple of
# types is a value's; `[spec]` a list of values of spec; `{"*": spec}` an object of any keys whose
# values are of spec; any other dict an object whose named keys are of their specs (keys not
# named are kept: a later format may add them). bool is not an int here, and an int is a float.
_N = type(None)
_EXIT = {"exit_code": (int, _N), "signal": (str, _N)}
_PROCESS = {
    "pid": (int, _N), "state": (str, _N), "records": (int, _N), "reason": (str, _N), "exit_code": (int, _N),
    "signal": (str, _N), "alive": (bool, _N),
}  # fmt: skip
_RANK_ENTRY = {
    "log": (str, _N), "log_present": bool, "bytes": (int, _N), "records": (int, _N), "passes": (int, _N),
    "capture_errors": (int, _N), "complete": bool, "end_record": bool, "stopped": (str, _N),
    "damaged_lines": (int, _N), "processes": [_PROCESS], "exit": (_EXIT, _N), "stopped_after_passes": bool,
}  # fmt: skip
_SIMULATED = {
    "world_size": (int, _N), "local_world_size": (int, _N), "backend": (str, _N), "ranks": [int],
    "chosen": [int], "not_run": [int], "chosen_by": (str, _N), "reasons": [str], "mesh_source": (str, _N),
    "stop_after_passes": bool, "stopped_after_passes": [int], "at_once": (int, _N),
    "per_rank": {"*": {**_EXIT, "wall_s": (float, _N), "max_rss_mb": (float, _N)}},
}  # fmt: skip
MANIFEST_SCHEMA: dict[str, Any] = {
    "format": str, "format_version": int, "command": [str], "command_line": str, "run_id": (str, _N),
    "cwd": (str, _N), "env": {"*": str}, "torch_version": (str, _N), "host": (str, _N), "user": (str, _N),
    "uid": (int, _N), "started": (float, _N), "ended": (float, _N), "exit_code": (int, _N),
    "signal": (str, _N), "status": str,
    "options": {"passes": ([str], _N), "inductor": bool, "blobs": bool, "torch_trace": (bool, str, _N)},
    "ranks": {"*": _RANK_ENTRY}, "incomplete_ranks": [int], "stopped_ranks": {"*": (str, _N)},
    "still_running": {"*": [int]}, "disk": {"free_bytes": (int, _N), "full": bool}, "problems": [str],
    "simulated": _SIMULATED,
}  # fmt: skip
_SHOWN_PROBLEMS = 3  # a manifest wrong everywhere is said in a few lines, the rest counted


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true/false"
    return {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "an object"}.get(
        type(v), type(v).__name__
    )


def _spec_name(spec: Any) -> str:
    if isinstance(spec, tuple):
        return " or ".join(_spec_name(s) for s in spec)
    if isinstance(spec, list):
        return "a list"
    if isinstance(spec, dict):
        return "an object"
    return {bool: "true/false", int: "an integer", float: "a number", str: "a string", _N: "null"}[spec]


def fits(v: Any, spec: Any) -> bool:
    """Whether `v` is of `spec`'s own kind (its entries are checked by `_clean`)."""
    if isinstance(spec, tuple):
        return any(fits(v, s) for s in spec)
    if isinstance(spec, list):
        return type(v) is list
    if isinstance(spec, dict):
        return type(v) is dict
    if spec is float:
        return type(v) in (int, float)
    return type(v) is spec


def _inner(v: Any, spec: Any) -> Any:
    """The spec `v` fits among `spec`'s alternatives (the one whose entries are to be checked)."""
    if isinstance(spec, tuple):
        return next(s for s in spec if fits(v, s))
    return spec


def _clean(v: Any, spec: Any, where: str, problems: list[str]) -> Any:
    """`v` with every entry not of its spec left out (a copy where anything is); `v` fits `spec`."""
    spec = _inner(v, spec)
    if isinstance(spec, list):
        out = []
        for i, x in enumerate(v):
            if fits(x, spec[0]):
                out.append(_clean(x, spec[0], f"{where}[{i}]", problems))
            else:
                problems.append(f"{where}[{i}] is {_type_name(x)}, not {_spec_name(spec[0])}")
        return out
    if isinstance(spec, dict):
        out_d = {}
        for k, x in v.items():
            s = spec.get("*", spec.get(k, _ANY))
            if s is _ANY or fits(x, s):
                out_d[k] = x if s is _ANY else _clean(x, s, f"{where}.{k}" if where else k, problems)
            else:
                problems.append(f"{where + '.' if where else ''}{k} is {_type_name(x)}, not {_spec_name(s)}")
        return out_d
    return v


_ANY = object()


def clean_manifest(m: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The manifest with every value not of its documented type left out, and what was left out
    in a few words each (at most `_SHOWN_PROBLEMS`, the rest counted): a reader never meets a
    field of the wrong type (`"options": [0]`, `"status": 7`), and the capture says what it
    lacks. `m` is not changed."""
    problems: list[str] = []
    out = _clean(m, MANIFEST_SCHEMA, "", problems)
    if len(problems) > _SHOWN_PROBLEMS:
        problems[_SHOWN_PROBLEMS:] = [f"and {len(problems) - _SHOWN_PROBLEMS} more values of the wrong type"]
    return out, [f"{p}: left out" if not p.startswith("and ") else p for p in problems]
