"""Rank normalization: what differs between ranks that ought to agree, rewritten to one form.

Two ranks' graphs of the same pass differ, even when the program is rank-agnostic, in:
* process-group names (rank 0's dp group is "1", rank 1's is "2"): rewritten through the rank's
  table (group name -> mesh dimension or description) to a rank-invariant key, else to an ordinal
  by first appearance in the graph;
* the rank's own device (`cuda:<local rank>`), in literals and value metadata: rewritten to `<own>`;
* stack-trace comments (left out of every comparison).

`RankContext` holds what is known about one rank; `GraphNormalizer` applies it to one graph.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from graphtrain_inspect.inspector.read.graphmodel import GraphTables, device_of_leaf, split_device

REDUCE_OPS = frozenset({"sum", "avg", "product", "prod", "min", "max", "band", "bor", "bxor", "premul_sum", "SUM", "AVG", "MAX", "MIN"})
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
    def from_table(cls, rank: int, table: dict[str, Any] | None, *, local_rank: int | None = None, own_device: str | None = None) -> "RankContext":
        ctx = cls(rank=rank, local_rank=local_rank, own_device=own_device)
        if not isinstance(table, dict):
            return ctx
        world = table.get("world_size")
        for mesh in table.get("meshes") or []:
            if not isinstance(mesh, dict) or "error" in mesh:
                continue
            shape = mesh.get("shape") or []
            names = mesh.get("dim_names") or [str(i) for i in range(len(shape))]
            coord = mesh.get("coordinate") or []
            tag = "x".join(str(s) for s in shape)
            for i, dim in enumerate(names):
                if i < len(coord) and isinstance(coord[i], int):
                    ctx.coordinates.setdefault(str(dim), coord[i])
            for dim, name in (mesh.get("group_names") or {}).items():
                if name is not None:
                    ctx.group_keys.setdefault(str(name), f"mesh[{tag}].{dim}")
        for name, g in (table.get("groups") or {}).items():
            if not isinstance(g, dict):
                continue
            members = g.get("ranks")
            if name not in ctx.group_keys:
                desc = g.get("desc")
                if isinstance(members, list) and isinstance(world, int) and len(members) == world:
                    ctx.group_keys[name] = "world"
                elif desc and desc not in ("undefined",):
                    ctx.group_keys[name] = f"group[{desc}]"
                elif isinstance(members, list):
                    ctx.group_keys[name] = f"group[size={len(members)}]"
            key = ctx.group_keys.get(name)
            if key is not None and isinstance(members, list) and rank in members:
                ctx.group_positions.setdefault(key, members.index(rank))
        return ctx

    @property
    def own_index(self) -> int | None:
        return split_device(self.own_device)[1]


class GraphNormalizer:
    """Rewrites one graph's leaves and values for one rank: group names and the own device."""

    def __init__(self, tables: GraphTables | None, ctx: RankContext | None):
        self.ctx = ctx
        self.ordinals: dict[str, str] = {}
        if tables is not None:
            for _, row in tables.iter_nodes():
                if is_collective_target(row.get("target")):
                    for where, leaf in _str_leaves(row):
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


def _str_leaves(row: dict[str, Any]):
    from graphtrain_inspect.inspector.read.graphmodel import row_leaves

    for where, leaf in row_leaves(row):
        if isinstance(leaf, str):
            yield where, leaf


IDENTITY = GraphNormalizer(None, None)
