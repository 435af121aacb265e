"""Literals that differ across ranks at aligned nodes of the same graph state.

For one stage key and a group of ranks, the lowest rank's graph is aligned with each other
rank's (normalized: group names, own device); every literal leaf that differs is a `Site` with
the value on each rank. rank-baked-constant and device-baked read these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.checks.rank_classes import member_leaf
from graphtrain_inspect.inspector.read.graphmodel import device_of_leaf, is_ref, iter_leaves, row_leaves
from graphtrain_inspect.inspector.read.stages import StageKey

_IGNORED_TARGET_PREFIXES = ("aten._assert", "aten.sym_constrain_range", "aten._print", "torch._assert")


@dataclass
class Site:
    subgraph: str
    node: str  # name on the reference rank
    target: str | None
    where: str  # args[1][0], kwargs.device, attr.value[3]
    values: dict[int, Any] = field(default_factory=dict)  # rank -> leaf
    nodes: dict[int, str] = field(default_factory=dict)  # rank -> node name
    bwd: bool = False

    @property
    def is_device(self) -> bool:
        return any(device_of_leaf(v) is not None for v in self.values.values())


def literal_sites(ctx: CheckContext, key: StageKey, group: list[int]) -> list[Site]:
    cache = ctx.__dict__.setdefault("_sites", {})
    ck = (key, tuple(group))
    if ck in cache:
        return cache[ck]
    ref = group[0]
    stages = ctx.index.across(key)
    sites: dict[tuple[str, str, str], Site] = {}
    present = [r for r in group if r in stages]
    if ref not in stages or len(present) < 2:
        cache[ck] = []
        return []
    diffs: dict[int, Any] = {}  # rank -> its diff with the reference (aligned nodes: _aligned)
    unlisted_same: set[int] = set()  # ranks whose diff lists only changed nodes (the rest: same)
    for other in present[1:]:
        d = ctx.rank_diff(key, ref, other)
        if d is None:
            continue
        if d.unlisted_same:
            unlisted_same.add(other)
        diffs[other] = d
        for sub in d.subgraphs:
            for n in sub.nodes:
                if n.status != "changed" or n.a is None or n.b is None:
                    continue
                target = n.a.get("target")
                if str(target).startswith(_IGNORED_TARGET_PREFIXES):
                    continue
                changes = [
                    (w, x, y) for w, x, y in n.args if w not in ("op", "target") and not is_ref(x) and not is_ref(y)
                ]
                for w, x, y in n.meta:
                    if w == "attr" and isinstance(x, dict) and isinstance(y, dict) and x.get("value") != y.get("value"):
                        vx, vy = x.get("value"), y.get("value")
                        if isinstance(vx, list) and isinstance(vy, list) and len(vx) == len(vy):
                            for i, (a, b) in enumerate(zip(vx, vy)):
                                if a != b:
                                    changes.append((f"attr.value[{i}]", a, b))
                        else:
                            changes.append(("attr.value", vx, vy))
                for where, x, y in changes:
                    for wx, lx in iter_leaves(x, where):
                        ly = _leaf_at(y, where, wx)
                        if ly is _ABSENT or lx == ly:
                            continue  # a leaf only one rank has is a structural difference
                        k = (sub.path, n.a["name"], wx)
                        s = sites.get(k)
                        if s is None:
                            s = sites[k] = Site(
                                sub.path, n.a["name"], target, wx, {ref: lx}, {ref: n.a["name"]}, bool(n.a.get("bwd"))
                            )
                        s.values[other] = ly
                        s.nodes[other] = n.b["name"]
    # a leaf equal to the reference on some rank did not show up in its diff: fill it in, at the
    # node aligned with the reference's (its name there: `renamed`), unless the node has none
    # there (removed); with two ranks every site has both values already
    out = []
    removed: dict[int, set[tuple[str, str]]] = {}  # rank -> (subgraph, ref node) of nodes only the reference has
    for s in sites.values():
        for r in present:
            if r not in s.values and r in unlisted_same:
                d = diffs[r]
                if d.renamed is not None:
                    gone = removed.get(r)
                    if gone is None:
                        gone = removed[r] = {
                            (sub.path, n.a["name"]) for sub in d.subgraphs for n in sub.nodes if n.status == "removed"
                        }
                    if (s.subgraph, s.node) in gone:
                        continue
                s.nodes[r] = d.renamed.get((s.subgraph, s.node), s.node) if d.renamed else s.node
                s.values[r] = _own_leaf(ctx, key, ref, r, s)
        out.append(s)
    cache[ck] = out
    return out


_ABSENT = object()


def _own_leaf(ctx: CheckContext, key: StageKey, ref: int, rank: int, s: Site) -> Any:
    """The rank's own leaf at a site its diff did not list: equal to the reference's once both
    are normalized, but a process-group name or own device is the rank's own ('4' where the
    reference has '3'). The reference's where both logged the very same graph (then no table
    is read) or the rank's table cannot say."""
    same = s.values[ref]
    stages = ctx.index.across(key)
    gid = stages[rank].gid
    if not s.where.startswith(("args", "kwargs")) or ctx.identical(ref, stages[ref].gid, rank, gid):
        return same
    known, leaf = member_leaf(ctx, key, rank, s.values, s.target)  # its rank class's, rewritten
    if known:
        return leaf
    tables = ctx.tables(rank, gid)
    sub = tables.subgraph(s.subgraph) if tables is not None else None
    row = sub.node(s.nodes[rank]) if sub is not None else None
    if row is None:
        return same
    for where, leaf in row_leaves(row):
        if where == s.where:
            return leaf
    return same


def _leaf_at(y: Any, base: str, path: str) -> Any:
    """The leaf of `y` (whose own path is `base`) at `path`, or _ABSENT."""
    for wy, ly in iter_leaves(y, base):
        if wy == path:
            return ly
    return _ABSENT


def cross_rank_evidence(
    where: Any, target: Any, values: dict[int, Any], nodes: dict[int, Any], matches: list, **extra: Any
) -> dict[str, Any]:
    """The evidence of a finding about one place whose value differs across ranks (a literal, a
    device): the value and node on each rank, the rank-derived vectors it equals, what the check
    adds (`extra`), and the ranks it was seen on (`_ranks`, for blame; not printed)."""
    ranks = sorted(values)
    return {
        "where": where,
        "target": target,
        "values": {str(r): values[r] for r in ranks},
        "nodes": {str(r): nodes.get(r) for r in sorted(nodes)},
        "matches": matches,
        **extra,
        "_ranks": ranks,
    }
