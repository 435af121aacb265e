"""What a rank names by itself in its graphs, and the hash of a node table with those names
written out: the rules of rank normalization shared by the capture and the reader.

Two ranks of a job log graphs that differ, even when the program is rank-agnostic, in the names
of their process groups (rank 0's dp group is "1", rank 1's "2") and their own device
(`cuda:<local rank>`). The reader's normalizer (`inspector.diff.normalize`) writes a known group
as `"<pg:KEY>"` (KEY: what the group is, the same on every rank: `group_keys`) and the own device
as `"<own>"`. `table_digest` is that rewriting done on a node table's bytes, then hashed: two
ranks whose digests agree have graphs whose rank diff is empty (the reader's rank classes).

The capture writes each node table's digest in its `gti_nodes` envelope (`norm`, with the names
it rewrote: `table_norm`), so the reader knows which ranks agree without reading their tables; the
reader takes it only where its own rewrites for that graph are the ones the capture recorded,
and hashes the table itself otherwise (older logs, a rank table that changed after the graph).
Torch, the standard library and orjson only: this runs inside training workers.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Iterable

import orjson

from graphtrain_inspect.capture.shared import logformat

REDUCE_OPS = frozenset(
    {"sum", "avg", "product", "prod", "min", "max", "band", "bor", "bxor", "premul_sum", "SUM", "AVG", "MAX", "MIN"}
)

_COLLECTIVE_PREFIXES = (
    "_c10d_functional.",
    "c10d_functional.",
    "_c10d_functional_autograd.",
    "c10d.",
    "_dtensor.",
    "device_mesh.",
    "symm_mem.",
    "torch.distributed.",
)
_COLLECTIVE_WORDS = re.compile(r"all_reduce|all_gather|reduce_scatter|all_to_all|broadcast|send|recv|barrier")
OWN_DEVICE = "<own>"


_IS_COLLECTIVE: dict[Any, bool] = {}  # by target: a graph has a few hundred distinct targets


def is_collective_target(target: Any) -> bool:
    known = _IS_COLLECTIVE.get(target) if type(target) is str else None
    if known is not None:
        return known
    t = str(target or "")
    out = t.startswith(_COLLECTIVE_PREFIXES) or bool(_COLLECTIVE_WORDS.search(t))
    if type(target) is str and len(_IS_COLLECTIVE) < 65_536:
        _IS_COLLECTIVE[target] = out
    return out


def table_meshes(table: dict[str, Any]) -> list[dict[str, Any]]:
    """The rank table's meshes, well-formed ones only, in one order whatever order the capture
    listed them in (it walks a WeakSet, whose order changes from run to run): most dimensions
    first (the full mesh before its sub-meshes), then by dim names and shape. Each has
    `dim_names` (its names, or "0", "1", ... when unnamed), `shape`, `coordinate`, `group_names`."""
    out = []
    for mesh in table.get("meshes") or []:
        if not isinstance(mesh, dict) or "error" in mesh or not isinstance(mesh.get("shape"), list):
            continue
        shape = mesh["shape"]
        names = mesh.get("dim_names") or [str(i) for i in range(len(shape))]
        coord = mesh.get("coordinate")
        groups = mesh.get("group_names")
        out.append(
            {
                "dim_names": [str(n) for n in names],
                "shape": shape,
                "coordinate": list(coord) if isinstance(coord, (list, tuple)) else None,
                "group_names": groups if isinstance(groups, dict) else {},
            }
        )
    out.sort(key=lambda m: (-len(m["shape"]), m["dim_names"], [s if isinstance(s, int) else -1 for s in m["shape"]]))
    return out


def group_keys(table: dict[str, Any]) -> dict[str, str]:
    """Process-group name -> a name for what the group is, the same on every rank and every run.

    A group is named by every mesh dimension it serves (all of them, sorted: several dims of
    size 1, a flattened dim, or a dim and the same dim of a sub-mesh share one group) and its
    size: `mesh.tp[2]`, `mesh.batch_fsdp+fsdp[2]`. The rank's dp group and another rank's dp
    group get the same name; a tp and a dp group of the same size different ones. A group of
    every rank is `world`. A group of no mesh dim is named by its description, else by the
    pattern of its members relative to its first (`ranks[2,stride=1]`), which is the same on
    every rank of a regular layout."""
    world = table.get("world_size")
    groups = g if isinstance(g := table.get("groups"), dict) else {}
    dims: dict[str, set[str]] = {}
    sizes: dict[str, int] = {}
    for mesh in table_meshes(table):
        shape = dict(zip(mesh["dim_names"], mesh["shape"]))
        for dim, name in mesh["group_names"].items():
            if name is None:
                continue
            dims.setdefault(str(name), set()).add(str(dim))
            if isinstance(shape.get(str(dim)), int):
                sizes.setdefault(str(name), shape[str(dim)])
    keys: dict[str, str] = {}
    for name in sorted(set(dims) | set(groups), key=_name_order):
        g = groups.get(name)
        members = g.get("ranks") if isinstance(g, dict) else None
        members = members if isinstance(members, list) and all(isinstance(m, int) for m in members) else None
        size = len(members) if members is not None else sizes.get(name)
        if members is not None and isinstance(world, int) and world > 1 and size == world:
            keys[name] = "world"
        elif name in dims:
            keys[name] = f"mesh.{'+'.join(sorted(dims[name]))}[{size if size is not None else '?'}]"
        elif isinstance(g, dict) and g.get("desc") and g.get("desc") != "undefined":
            keys[name] = f"group[{g['desc']}]"
        elif members is not None:
            keys[name] = f"ranks[{_member_pattern(sorted(members))}]"
    return keys


def _name_order(name: str) -> tuple:
    return (0, int(name), "") if name.isdigit() else (1, 0, name)


def _member_pattern(members: list[int]) -> str:
    """Members relative to the first: their number and stride, or their offsets when irregular."""
    if len(members) < 2:
        return str(len(members))
    steps = {b - a for a, b in zip(members, members[1:])}
    if len(steps) == 1:
        return f"{len(members)},stride={steps.pop()}"
    return f"{len(members)},offsets={'/'.join(str(m - members[0]) for m in members)}"


def group_token(key: str) -> str:
    """How a known process group is written in a normalized graph."""
    return f"<pg:{key}>"


def device_index(dev: str | None) -> int | None:
    """The index of a device string ("cuda:1" -> 1), None where it has none ("cpu", "cuda")."""
    idx = (dev or "").partition(":")[2]
    return int(idx) if idx.isdigit() else None


Rewrites = tuple[tuple[tuple[bytes, bytes], ...], "bytes | None"]


def digest_rewrites(keys: dict[str, str], own_device: str | None) -> Rewrites | None:
    """What a rank's node-table bytes are rewritten with before hashing: each known group name
    (as a JSON string, in name order) with its token, and the own device (a JSON string, where it
    has an index: "cpu" names no rank). None where two names stand for one group: the reader
    would then number unknown groups by first appearance, which bytes cannot follow."""
    if len(set(keys.values())) != len(keys):
        return None
    groups = tuple((orjson.dumps(name), orjson.dumps(group_token(keys[name]))) for name in sorted(keys))
    own = orjson.dumps(own_device) if own_device and device_index(own_device) is not None else None
    return groups, own


_OWN = orjson.dumps(OWN_DEVICE)
_TARGET = b'"target":"'


def _is_collective_row(row: bytes) -> bool:
    at = row.find(_TARGET)
    if at < 0:
        return False
    end = row.find(b'"', at + len(_TARGET))
    return end > 0 and is_collective_target(row[at + len(_TARGET) : end].decode("utf-8", "replace"))


def finds(data: bytes, tok: bytes, start: int = 0) -> Iterable[int]:
    """Every offset of `tok` in `data` from `start` on, overlapping ones too (C-speed finds)."""
    at = data.find(tok, start)
    while at >= 0:
        yield at
        at = data.find(tok, at + 1)


def normalized_row(line: bytes, rw: Rewrites) -> bytes:
    """One row's bytes as `table_digest` hashes them: its group names rewritten where it is a
    collective's row, then the own device everywhere."""
    groups, own = rw
    if groups and any(name in line for name, _ in groups) and _is_collective_row(line):
        for name, norm in groups:
            line = line.replace(name, norm)
    return line.replace(own, _OWN) if own else line


def table_digest(text: bytes, rw: Rewrites) -> bytes | None:
    """The hash of a node table's payload (the bytes the log holds, tabs taken off) as the rank
    normalizer would read it: the lines after the first (which names the graph id) with the lines
    holding one of the rank's tokens rewritten, group names in collective rows only (the
    normalizer leaves other rows' strings alone), the own device everywhere. None when the table
    is not laid out one row per line (log format 1): its lines are not rows.

    At C speed: only the few lines that hold a group name are rewritten one by one; between them
    the own device is replaced by one `bytes.replace` per stretch of whole lines (a JSON string
    holds no newline, so that is the same as line by line), and the stretches are hashed as they
    come, never joined. sha256: OpenSSL's is the fastest of hashlib's strong hashes on x86's
    SHA extensions (half blake2b's time on 1.7 MB tables)."""
    groups, own = rw
    first = text.find(b"\n")
    if first < 0 or not text[:first].endswith(logformat.TABLE_HEAD) or not text.endswith(b"\n]}"):
        return None
    view = memoryview(text)
    h = hashlib.sha256()

    def stretch(a: int, b: int) -> None:
        h.update(text[a:b].replace(own, _OWN) if own else view[a:b])

    pos = first + 1
    starts = sorted({text.rfind(b"\n", 0, at) + 1 for name, _ in groups for at in finds(text, name, pos)})
    for start in starts:
        end = text.find(b"\n", start)
        end = len(text) if end < 0 else end
        stretch(pos, start)
        h.update(normalized_row(text[start:end], rw))
        pos = end
    stretch(pos, len(text))
    return h.digest()


NORM = "norm"  # the gti_nodes envelope's field: {"sha256", "groups", "own"}


def table_norm(payload: bytes, rank_table: dict[str, Any] | None, own_device: str | None) -> dict[str, Any] | None:
    """The `norm` field of a node table's envelope: its digest and the names it rewrote (the
    group names with their tokens, the own device); None where the bytes cannot stand for the
    normalized rows (`digest_rewrites`, `table_digest`)."""
    keys = group_keys(rank_table) if isinstance(rank_table, dict) else {}
    rw = digest_rewrites(keys, own_device)
    digest = table_digest(payload, rw) if rw is not None else None
    if rw is None or digest is None:
        return None
    return {
        "sha256": digest.hex(),
        "groups": [[orjson.loads(name), orjson.loads(tok)] for name, tok in rw[0]],
        "own": orjson.loads(rw[1]) if rw[1] is not None else None,
    }


def recorded_rewrites(norm: Any) -> Rewrites | None:
    """The rewrites a `norm` field says the capture hashed with, as `digest_rewrites` gives them;
    None where the field is not well formed."""
    if not isinstance(norm, dict):
        return None
    groups, own = norm.get("groups"), norm.get("own")
    if not isinstance(groups, list) or not (own is None or isinstance(own, str)):
        return None
    pairs = []
    for g in groups:
        if not (isinstance(g, list) and len(g) == 2 and all(isinstance(x, str) for x in g)):
            return None
        pairs.append((orjson.dumps(g[0]), orjson.dumps(g[1])))
    return tuple(pairs), orjson.dumps(own) if own is not None else None
