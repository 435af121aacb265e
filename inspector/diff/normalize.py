"""Rank normalization: what differs between ranks that ought to agree, rewritten to one form.

Two ranks' graphs of the same pass differ, even when the program is rank-agnostic, in:
* process-group names (rank 0's dp group is "1", rank 1's is "2"): rewritten through the rank's
  table to what the group is (`group_keys`: the mesh dims it serves and its size, `world`, its
  description or its members' pattern), else to an ordinal by first appearance in the graph;
* the rank's own device (`cuda:<local rank>`), in literals and value metadata: rewritten to `<own>`;
* stack-trace comments (left out of every comparison).

`RankContext` holds what is known about one rank; `GraphNormalizer` applies it to one graph.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from graphtrain_inspect.capture.logformat import NodeRow
from graphtrain_inspect.inspector.read.graphmodel import GraphTables, device_of_leaf, split_device

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


@dataclass
class RankContext:
    """What makes one rank's graphs comparable with another's."""

    rank: int
    local_rank: int | None = None
    own_device: str | None = None  # "cuda:1", "cpu", or None if unknown
    group_keys: dict[str, str] = field(default_factory=dict)  # group name -> invariant key
    coordinates: dict[str, int] = field(default_factory=dict)  # mesh dim -> this rank's coordinate
    group_positions: dict[str, int] = field(default_factory=dict)  # invariant key -> rank's index in it

    @classmethod
    def from_table(
        cls, rank: int, table: dict[str, Any] | None, *, local_rank: int | None = None, own_device: str | None = None
    ) -> "RankContext":
        ctx = cls(rank=rank, local_rank=local_rank, own_device=own_device)
        if not isinstance(table, dict):
            return ctx
        for mesh in table_meshes(table):
            for dim, c in zip(mesh["dim_names"], mesh["coordinate"] or []):
                if isinstance(c, int):
                    ctx.coordinates.setdefault(dim, c)
        ctx.group_keys = group_keys(table)
        for name, g in (table.get("groups") or {}).items():
            members = g.get("ranks") if isinstance(g, dict) else None
            key = ctx.group_keys.get(name)
            if key is not None and isinstance(members, list) and rank in members:
                ctx.group_positions.setdefault(key, members.index(rank))
        return ctx

    @property
    def own_index(self) -> int | None:
        return split_device(self.own_device)[1]


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


class GraphNormalizer:
    """Rewrites one graph's leaves and values for one rank: group names and the own device."""

    def __init__(self, tables: GraphTables | None, ctx: RankContext | None):
        self.ctx = ctx
        self.ordinals: dict[str, str] = {}
        if tables is not None:
            for _, row in tables.iter_nodes():
                if is_collective_target(row.get("target")):
                    for _where, leaf in _str_leaves(row):
                        if self._is_group_name(leaf) and leaf not in self.ordinals:
                            self.ordinals[leaf] = f"<pg#{len(self.ordinals)}>"

    def _is_group_name(self, leaf: str) -> bool:
        # every other string argument of a collective names a process group (or a tag); one the
        # rank table does not know (created after the table was written) gets an ordinal
        return leaf not in REDUCE_OPS

    def group(self, name: str) -> str:
        if self.ctx is not None and name in self.ctx.group_keys:
            return f"<pg:{self.ctx.group_keys[name]}>"
        return self.ordinals.get(name, name)

    def device(self, dev: str) -> str:
        own = self.ctx.own_device if self.ctx is not None else None
        if own and dev == own and split_device(own)[1] is not None:
            return OWN_DEVICE
        return dev

    def leaf(self, target: Any, leaf: Any) -> Any:
        """A normalized leaf (literal or one-key object); node refs are returned unchanged."""
        if isinstance(leaf, str):
            if is_collective_target(target) and self._is_group_name(leaf):
                return self.group(leaf)
            dev = device_of_leaf(leaf)
            if dev is not None:
                return self.device(dev)
            return leaf
        if isinstance(leaf, dict) and "dev" in leaf and len(leaf) == 1:
            return {"dev": self.device(str(leaf["dev"]))}
        return leaf

    def val(self, val: Any) -> Any:
        """A node's value metadata with the own device rewritten."""
        if isinstance(val, dict):
            if "device" in val and isinstance(val["device"], str):
                d = self.device(val["device"])
                if d != val["device"]:
                    val = {**val, "device": d}
            return val
        if isinstance(val, list):
            return [self.val(v) for v in val]
        return val


def _str_leaves(row: NodeRow):
    from graphtrain_inspect.inspector.read.graphmodel import row_leaves

    for where, leaf in row_leaves(row):
        if isinstance(leaf, str):
            yield where, leaf


IDENTITY = GraphNormalizer(None, None)
