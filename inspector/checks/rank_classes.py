"""Rank classes: the ranks whose graph at a stage is the same once rank normalization is applied.

A job of 64 ranks mostly logs 64 copies of a few graphs that differ only in what each rank names
by itself: its process groups and its own device. Those ranks form one class per stage, found
from a content hash of each rank's node-table lines (md5-verified, undecoded; the first line,
which names the graph id, left out), with each of the
rank's known group names (in collective rows) and its own device written the way the rank
normalizer (`diff.normalize`) writes them: `"<pg:KEY>"` and `"<own>"`. Two ranks with equal
hashes have graphs whose rank diff is empty; checks and diffs then run once per class and once
per pair of classes, and report every rank of each.

The hash is the normalizer's rewriting done on bytes, so it is kept exact where the two could
disagree by declining: a rank gets no hash (a class of its own) when its table is not laid out
one row per line, or when two of its group names stand for the same group (the normalizer's
ordinals of unknown groups could then differ between two ranks whose bytes agree here). A
quoted own-device string that is not a leaf the normalizer rewrites (a dict key) would be merged
here: none is written by the capture.

Two ranks that logged the same bytes (same graph id and node-table md5) and normalize them the
same way (same group names and own device) share one hash without reading the table. Since log
format 4's `norm` field the capture writes each table's hash (`capture.shared.rank_tokens`, the same
function on the same bytes) with the names it rewrote: where those are the rewrites made here, the
hash is taken from the envelope and no table is read, so classes cost what the index costs and
answer for two ranks as well as for many.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import orjson

from graphtrain_inspect.capture.shared import logformat, rank_tokens
from graphtrain_inspect.capture.shared.rank_ranges import brief_ranks
from graphtrain_inspect.inspector.diff.normalize import RankContext, is_collective_target

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.checks.context import CheckContext
    from graphtrain_inspect.inspector.diff.node_diff import GraphDiff
    from graphtrain_inspect.inspector.read.capture_reader import Capture
    from graphtrain_inspect.inspector.read.stages import Stage, StageIndex, StageKey


@dataclass(frozen=True)
class RankClass:
    """Ranks whose graphs at one stage agree after normalization; `rep` (the lowest) stands for all."""

    ranks: tuple[int, ...]

    @property
    def rep(self) -> int:
        return self.ranks[0]


@dataclass(frozen=True)
class Rewrites:
    """What a rank's rows are rewritten with before hashing: its group names (JSON strings) and
    what the normalizer makes of each, and its own device (JSON string), if indexed."""

    groups: tuple[tuple[bytes, bytes], ...]
    own: bytes | None

    @classmethod
    def of(cls, ctx: RankContext) -> "Rewrites | None":
        """None where the bytes cannot stand for the normalized rows (see the module's docstring)."""
        rw = rank_tokens.digest_rewrites(ctx.group_keys, ctx.own_device)
        return cls(*rw) if rw is not None else None

    @property
    def pair(self) -> rank_tokens.Rewrites:
        return self.groups, self.own

    def swap_to(self, other: "Rewrites") -> dict[str, str]:
        """Each string this rank's rows hold where `other`'s hold its own (the same normalized
        group, the own device): how a diff made on this rank reads on `other`."""
        out: dict[str, str] = {}
        theirs = {norm: name for name, norm in other.groups}
        for name, norm in self.groups:
            if norm in theirs and theirs[norm] != name:
                out[orjson.loads(name)] = orjson.loads(theirs[norm])
        if self.own and other.own and self.own != other.own:
            out[orjson.loads(self.own)] = orjson.loads(other.own)
        return out


class RankClasses:
    """The rank classes of every stage of a capture, made when first asked.

    `context(rank, gid)` gives the RankContext a rank's graph is normalized with (the checks pass
    their own, so the classes follow the checks' rules)."""

    def __init__(self, cap: "Capture", index: "StageIndex", context: Callable[[int, str], RankContext] | None = None):
        self.cap = cap
        self.index = index
        if context is None:
            from graphtrain_inspect.inspector.diff.graph_diff import rank_context

            context = lambda rank, gid: rank_context(cap, rank, gid)  # noqa: E731
        self._context = context
        self._rewrites: dict[tuple[int, str], Rewrites | None] = {}
        self._digests: dict[tuple, bytes | None] = {}
        self._at: dict[Any, list[RankClass]] = {}
        self._of: dict[Any, dict[int, RankClass]] = {}
        self._all: dict[Any, tuple[int, ...]] = {}

    def rewrites(self, rank: int, gid: str) -> Rewrites | None:
        k = (rank, gid)
        if k not in self._rewrites:
            self._rewrites[k] = Rewrites.of(self._context(rank, gid))
        return self._rewrites[k]

    def digest(self, rank: int, gid: str) -> bytes | None:
        """The normalized content hash of one rank's graph; None: it has none (a class alone)."""
        rw = self.rewrites(rank, gid)
        if rw is None:
            return None
        recorded = self.recorded_digest(rank, gid)
        if recorded is not None:
            return recorded
        rec = self.cap.graph_record(rank, gid, logformat.NODES)
        # the same bytes rewritten the same way: one hash, the table read once
        k = (*self.cap.content_key(rank, gid), rw)
        if k not in self._digests:
            log = self.cap.log_file(rank)
            got = log.payload_bytes(rec) if log is not None and rec is not None else None
            self._digests[k] = rank_tokens.table_digest(got, rw.pair) if got is not None else None
        return self._digests[k]

    def recorded_digest(self, rank: int, gid: str) -> bytes | None:
        """The graph's hash as its capture recorded it, where this reader would make the same
        (`recorded`); None otherwise. Two ranks with equal ones have a rank diff with no change,
        known without reading either table."""
        rec = self.cap.graph_record(rank, gid, logformat.NODES)
        if rec is None or rank_tokens.NORM not in rec.meta:
            return None
        rw = self.rewrites(rank, gid)
        return self.recorded(rec, rw) if rw is not None else None

    @staticmethod
    def recorded(rec: Any, rw: Rewrites) -> bytes | None:
        """The digest the capture wrote in the node table's envelope (`rank_tokens.table_norm`),
        where it hashed with the very rewrites this reader makes for the graph; None otherwise
        (older logs; a rank table or own device that the reader reads otherwise)."""
        norm = rec.meta.get(rank_tokens.NORM) if rec is not None else None
        if not isinstance(norm, dict) or rank_tokens.recorded_rewrites(norm) != rw.pair:
            return None
        digest = norm.get("sha256")
        if not (isinstance(digest, str) and len(digest) == 64):
            return None
        try:
            return bytes.fromhex(digest)
        except ValueError:
            return None

    def free(self, rank: int, gid: str) -> bool:
        """Whether the graph's digest is known without reading its table (the capture wrote it)."""
        return self.recorded_digest(rank, gid) is not None

    def at(self, key: "StageKey", ranks: Iterable[int] | None = None) -> list[RankClass]:
        """The classes of the ranks (default: all) that have this stage, in order of their
        lowest rank."""
        across = self.index.across(key)
        rs = self._ranks_at(key, across, ranks)
        ck = (key, rs)
        if ck not in self._at:
            members: dict[Any, list[int]] = {}
            for r in rs:
                d = self.digest(r, across[r].gid)
                members.setdefault(d if d is not None else ("alone", r), []).append(r)
            classes = sorted((RankClass(tuple(m)) for m in members.values()), key=lambda c: c.rep)
            self._at[ck] = classes
            self._of[ck] = {r: c for c in classes for r in c.ranks}
        return self._at[ck]

    def class_of(self, key: "StageKey", rank: int, ranks: Iterable[int] | None = None) -> RankClass | None:
        self.at(key, ranks)
        return self._of[(key, self._ranks_at(key, self.index.across(key), ranks))].get(rank)

    def _ranks_at(self, key: "StageKey", across: Mapping[int, Any], ranks: Iterable[int] | None) -> tuple[int, ...]:
        """The ranks (default: all) that have this stage, in order; all of them kept per stage
        (asked once per rank pair of a many-rank capture)."""
        if ranks is not None:
            return tuple(sorted(r for r in ranks if r in across))
        rs = self._all.get(key)
        if rs is None:
            rs = self._all[key] = tuple(sorted(across))
        return rs

    def hashed(self, key: "StageKey", rank: int) -> bool:
        """Whether the rank's graph at this stage has a hash (else it is a class of its own)."""
        st = self.index.across(key).get(rank)
        return st is not None and self.digest(rank, st.gid) is not None

    def agreement(self, ranks: Iterable[int] | None = None) -> list[tuple[tuple[int, ...], "StageKey | None"]] | None:
        """Ranks that agree at every stage, as groups (largest first), each with the first stage
        (in the largest group's lowest rank's order) where it differs from the largest group; None
        for the largest. None when a graph has no hash (its ranks could not be compared)."""
        rs = sorted(self.cap.ranks if ranks is None else ranks)
        keys = [st.key for st in self.index.by_rank.get(rs[0], [])] if rs else []
        for r in rs[1:]:
            keys.extend(st.key for st in self.index.by_rank.get(r, []) if st.key not in keys)
        sig: dict[int, list] = {r: [] for r in rs}
        for key in keys:
            if not all(self.hashed(key, r) for r in self.index.across(key) if r in sig):
                return None
            for c in self.at(key, rs):
                for r in c.ranks:
                    sig[r].append(c.rep)
            have = set(self.index.across(key))
            for r in rs:
                if r not in have:
                    sig[r].append(None)
        groups: dict[tuple, list[int]] = {}
        for r in rs:
            groups.setdefault(tuple(sig[r]), []).append(r)
        ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
        if not ordered:
            return []
        main = ordered[0][0]
        out: list[tuple[tuple[int, ...], StageKey | None]] = [(tuple(ordered[0][1]), None)]
        for s, members in ordered[1:]:
            first = next((k for k, a, b in zip(keys, main, s) if a != b), None)
            out.append((tuple(members), first))
        return out

    def _parting(self, first: "StageKey", members: tuple[int, ...], main: tuple[int, ...]) -> str:
        """Where a group parts from the largest: a pipeline one side never ran (rank 0 compiled and
        ran the loaded graph, rank 1 only ran the loaded graph) is said as such, not as a
        difference in a graph."""
        have = self.index.across(first)
        label = first.pipeline_label() or "the traced graph"
        if not any(r in have for r in members):
            return f" ran no {label}"
        if not any(r in have for r in main):
            return f" also ran {label}"
        return f" (from {first.label()}{', ' + first.pipeline_label() if first.pipeline_label() else ''})"

    def summary_line(self, ranks: Iterable[int] | None = None) -> str | None:
        """ "ranks 0-31,33-63 agree; rank 32 differs (from pass X)": None for fewer than 2 ranks,
        or where a graph has no hash."""
        groups = self.agreement(ranks)
        if groups is None or sum(len(g) for g, _ in groups) < 2:
            return None
        parts = []
        for i, (members, first) in enumerate(groups):
            parting = self._parting(first, members, groups[0][0]) if first is not None else ""
            if len(members) == 1:
                text = f"rank {members[0]}" + (" differs" if i and parting.startswith(" (") else "")
            else:
                text = f"ranks {brief_ranks(list(members))} agree"
            parts.append(text + parting)
        if len(groups) == 1:
            return parts[0] + " at every stage"
        return "; ".join(parts)


# -- the checks' rank diffs, once per class ----------------------------------------------------------


def _swapped(value: Any, swap: dict[str, str]) -> Any:
    t = type(value)
    if t is str:
        return swap.get(value, value)
    if t is list:
        return [_swapped(v, swap) for v in value]
    if t is tuple:
        return tuple(_swapped(v, swap) for v in value)
    if t is dict:
        return {swap.get(k, k): _swapped(v, swap) for k, v in value.items()}
    return value


def _row_swap(row: Mapping[str, Any] | None, groups: dict[str, str], devices: dict[str, str]) -> dict[str, str]:
    """The strings to swap in one row: group names in a collective's row only (where the
    normalizer reads them and the hash rewrote them), the own device anywhere."""
    if row is not None and groups and is_collective_target(row.get("target")):
        return {**groups, **devices}
    return devices


def translated_diff(
    d: "GraphDiff", swap: tuple[dict[str, str], dict[str, str]], b_label: str, b_gid: str | None
) -> "GraphDiff":
    """A rank diff made against one rank of a class (its changes only), as it reads against
    another rank of that class: the other rank's own device and group names where the first
    rank's stand (`swap`: (groups, devices), from `Rewrites.swap_to`). The two ranks' rows are
    the same but for those strings (their hashes are equal), so nothing else changes."""
    from graphtrain_inspect.inspector.diff.node_diff import GraphDiff, NodeDiff, SubgraphDiff

    groups, devices = swap
    if not groups and not devices:
        return GraphDiff(d.a_label, b_label, d.a_gid, b_gid, d.subgraphs, d.unlisted_same, d.renamed)
    subs = []
    for sub in d.subgraphs:
        nodes = []
        for n in sub.nodes:
            sw = _row_swap(n.b, groups, devices)
            if not sw:
                nodes.append(n)
                continue
            nodes.append(
                NodeDiff(
                    n.status,
                    n.subgraph,
                    n.a,
                    _swapped(n.b, sw),
                    [(w, x, _swapped(y, sw)) for w, x, y in n.args],
                    [(w, x, _swapped(y, sw)) for w, x, y in n.meta],
                    n.structural,
                )
            )
        subs.append(SubgraphDiff(sub.path, sub.status, nodes))
    return GraphDiff(d.a_label, b_label, d.a_gid, b_gid, subs, d.unlisted_same, d.renamed)


def _class_group(ctx: "CheckContext", key: "StageKey", *ranks: int) -> list[int] | None:
    """The rank group holding `ranks` when the classes answer for it: classes on
    (`CheckContext.classes`) and 3 or more of its ranks at this stage, or 2 whose hashes the
    capture wrote (with two ranks to hash here, one diff is made either way, and hashing would
    read both tables again)."""
    group = next((g for g in ctx.rank_groups() if all(r in g for r in ranks)), None)
    if not ctx.classes or group is None:
        return None
    stages = ctx.index.across(key)
    present = [r for r in group if r in stages]
    if len(present) < 2:
        return None
    if len(present) == 2 and not all(ctx.rank_classes.free(r, stages[r].gid) for r in present):
        return None
    return group


def class_rank_diff(ctx: "CheckContext", key: "StageKey", ref: int, other: int) -> "GraphDiff | None":
    """`CheckContext.rank_diff(key, ref, other)` from the rank classes, where they say it: empty
    when `other` is in `ref`'s class; the diff of `ref` and the lowest rank of `other`'s class,
    as it reads on `other` (`translated_diff`), when that diff is made by comparing rows (not
    the identical-bytes shortcut, which does not look at own devices). None: make it."""
    from graphtrain_inspect.inspector.diff.node_diff import GraphDiff

    group = _class_group(ctx, key, ref, other)
    if group is None:
        return None
    stages = ctx.index.across(key)
    classes: RankClasses = ctx.rank_classes
    cr, co = classes.class_of(key, ref, group), classes.class_of(key, other, group)
    if cr is None or co is None:
        return None
    ga, gb = stages[ref].gid, stages[other].gid
    if cr is co:
        return GraphDiff(f"rank {ref}", f"rank {other}", ga, gb, [], unlisted_same=True)
    q = co.rep
    gq = stages[q].gid
    if q == other or ctx.identical(ref, ga, q, gq):
        return None
    dq = ctx.rank_diff(key, ref, q)
    if dq is None:
        return None
    rq, ro = classes.rewrites(q, gq), classes.rewrites(other, gb)
    if rq is None or ro is None:
        return None
    return translated_diff(dq, _split_swap(rq, ro), f"rank {other}", gb)


def class_rep_stage(ctx: "CheckContext", stage: "Stage") -> "Stage | None":
    """The stage of the lowest rank of `stage`'s rank class (in its rank group of 3 or more ranks),
    when that is another rank: per-rank work on the graph's rows can be that rank's."""
    group = _class_group(ctx, stage.key, stage.rank)
    if group is None:
        return None
    c = ctx.rank_classes.class_of(stage.key, stage.rank, group)
    return ctx.index.across(stage.key)[c.rep] if c is not None and c.rep != stage.rank else None


def diff_of_its_own(ctx: "CheckContext", key: "StageKey", ref: int, other: int) -> bool:
    """Whether `CheckContext.rank_diff(key, ref, other)` is made by comparing the two graphs, not
    answered from the rank classes (`class_rank_diff`): what `check -j` hands to its processes."""
    group = _class_group(ctx, key, ref, other)
    if group is None:
        return True
    cr, co = ctx.rank_classes.class_of(key, ref, group), ctx.rank_classes.class_of(key, other, group)
    return cr is None or co is None or (cr is not co and co.rep == other)


def member_leaf(
    ctx: "CheckContext", key: "StageKey", rank: int, values: dict[int, Any], target: Any
) -> tuple[bool, Any]:
    """(True, the rank's own leaf at a literal site) where it follows from its rank class's lowest
    rank's leaf (in `values` already): that leaf with the rank's own device and group names where
    the lowest rank's stand (the two ranks' rows differ in nothing else), so the member's table is
    not read. (False, None) where the classes do not say."""
    group = _class_group(ctx, key, rank)
    if group is None:
        return False, None
    stages = ctx.index.across(key)
    classes: RankClasses = ctx.rank_classes
    c = classes.class_of(key, rank, group)
    if c is None or c.rep == rank or c.rep not in values:
        return False, None
    rq, rr = classes.rewrites(c.rep, stages[c.rep].gid), classes.rewrites(rank, stages[rank].gid)
    if rq is None or rr is None:
        return False, None
    groups, devices = _split_swap(rq, rr)
    return True, _swapped(values[c.rep], _row_swap({"target": target}, groups, devices))


def _split_swap(rq: Rewrites, ro: Rewrites) -> tuple[dict[str, str], dict[str, str]]:
    """`rq.swap_to(ro)` as (group names, devices)."""
    sw = rq.swap_to(ro)
    group_names = {orjson.loads(n) for n, _ in rq.groups}
    return {k: v for k, v in sw.items() if k in group_names}, {k: v for k, v in sw.items() if k not in group_names}
