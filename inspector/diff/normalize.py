"""Rank normalization: what differs between ranks that ought to agree, rewritten to one form.

Two ranks' graphs of the same pass differ, even when the program is rank-agnostic, in:
* process-group names (rank 0's dp group is "1", rank 1's is "2"): rewritten through the rank's
  table to what the group is (`group_keys`: the mesh dims it serves and its size, `world`, its
  description or its members' pattern), else to an ordinal by first appearance in the graph;
* the rank's own device (`cuda:<local rank>`), in literals and value metadata: rewritten to `<own>`;
* stack-trace comments (left out of every comparison).

`RankContext` holds what is known about one rank; `GraphNormalizer` applies it to one graph. The
rules that name a group and tell a collective (`group_keys`, `is_collective_target`, the tokens)
live in `capture/shared/rank_tokens.py`, since the capture applies them too: it records each node
table's hash as this normalizer reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from graphtrain_inspect.capture.shared.logformat import NodeRow
from graphtrain_inspect.capture.shared.rank_tokens import (
    OWN_DEVICE,
    REDUCE_OPS,
    group_keys,
    group_token,
    is_collective_target,
    table_meshes,
)
from graphtrain_inspect.inspector.read.graphmodel import device_of_leaf, split_device


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


class GraphNormalizer:
    """Rewrites one graph's leaves and values for one rank: group names and the own device."""

    def __init__(self, rows: Iterable[NodeRow] | None, ctx: RankContext | None):
        """`rows`: the graph's rows in table order (its collective rows are enough: no other is
        read), or None for a normalizer that numbers no group of its own."""
        self.ctx = ctx
        self.ordinals: dict[str, str] = {}
        if rows is not None:
            for row in rows:
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
            return group_token(self.ctx.group_keys[name])
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


def own_device_tokens(*ctxs: RankContext) -> list[bytes]:
    """Each rank's indexed own device (`cuda:1`) as bytes: the token that makes two ranks' equal
    bytes mean another thing after normalization (it is `<own>` on one rank, a literal on the
    other), which readers of undecoded rows look for."""
    out = []
    for ctx in ctxs:
        own = ctx.own_device
        if own and split_device(own)[1] is not None:
            out.append(own.encode())
    return out


def knows_groups(row: NodeRow, ctx: RankContext) -> bool:
    """Whether every process group a collective row names is in the rank's table: one that is not
    would be numbered by its first appearance in the whole graph, which a reader of a few rows
    cannot do."""
    if not is_collective_target(row.get("target")):
        return True
    return all(leaf in REDUCE_OPS or leaf in ctx.group_keys for _, leaf in _str_leaves(row))
