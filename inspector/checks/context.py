"""What every check shares: cached tables and rank diffs, rank-derived vectors, and blame.

A check reports `Observation`s at graph states (per rank: one `Stage`; across ranks: one
`StageKey`). `blame_*` links each observation to the same observation (same `key`) in the state
the pass received: a chain of them is one problem, introduced where the chain starts (`trace` if
that is the traced graph) and present until where it ends. Chains of several ranks with the same
start and key become one `Finding` listing those ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Hashable, Iterable, Sequence

from graphtrain_inspect.inspector.checks.findings import Finding, NotRun
from graphtrain_inspect.inspector.checks.rank_classes import class_rank_diff, class_rep_stage
from graphtrain_inspect.inspector.diff.collective_operands import Operand, operands, order_parts
from graphtrain_inspect.inspector.diff.collectives import (
    Collective,
    Part,
    collective_sequence,
    compare,
    same_by_digests,
)
from graphtrain_inspect.inspector.diff.graph_diff import graph_normalizer
from graphtrain_inspect.inspector.diff.node_diff import GraphDiff
from graphtrain_inspect.inspector.diff.normalize import GraphNormalizer, RankContext
from graphtrain_inspect.inspector.diff.rank_diffs import (
    STRATEGIES,
    RankDiffStrategy,
    RankPair,
    diff_ranks,
    same_logged_graph,
)
from graphtrain_inspect.inspector.read.graphmodel import GraphTables
from graphtrain_inspect.inspector.read.stages import TRACE, Stage, StageIndex, StageKey, pipeline_label
from graphtrain_inspect.inspector.read.weighted_cache import WeightedLRU

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.checks.rank_classes import RankClasses
    from graphtrain_inspect.inspector.read.capture_reader import Capture


# the partitioner's output role of the backward graph (capture/inductor_hooks.py)
BACKWARD_ROLE = "bw"

# rank diffs kept for the checks that read them again, by the nodes they list (the diffs made from
# rows list only changed nodes, so nearly all of them stay)
_RDIFF_NODES = 400_000


@dataclass
class Observation:
    """Something a check saw in one graph state; `key` must not depend on node names."""

    key: Hashable
    severity: str
    message: str
    node: str | None = None
    subgraph: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    # a coarser key, tried when no chain continues `key`: the same problem after a pass that
    # changed the node's op or position (e.g. operator.mul -> aten.mul.Tensor when lowering)
    loose_key: Hashable | None = None
    # the severity when a later pass removes it (None: info, the graph that runs is fine); a check
    # whose bug lives in the model code, not in a pass (device-baked), keeps it a warning
    severity_if_fixed: str | None = None


@dataclass
class _Chain:
    first: Any
    last: Any
    obs: Observation
    rank: int | None
    okey: Hashable = None  # the observation's key and its occurrence in the first state


def _chains(
    points: list[Any],
    parent: Callable[[Any], Any],
    observe: Callable[[Any], Iterable[Observation]],
    order: Callable[[Any], int],
    rank: int | None,
) -> list[_Chain]:
    """Observations linked to the same one in the parent state: first the same key at the same
    node (a partitioner sends two literals of one key to two graphs: each continues its own chain),
    then the same key at the same occurrence, then the loose key; else a new chain."""
    chains: list[_Chain] = []
    at: dict[tuple[Any, Hashable], _Chain] = {}
    at_node: dict[tuple[Any, Hashable, Any, str], _Chain] = {}
    loose_at: dict[tuple[Any, Hashable], list[_Chain]] = {}
    for p in points:
        par = parent(p)
        seen: dict[Hashable, int] = {}
        keyed: list[tuple[Observation, tuple]] = []
        for o in observe(p):
            n = seen.get(o.key, 0)
            seen[o.key] = n + 1
            keyed.append((o, (o.key, n)))
        taken: set[int] = set()
        found: list[_Chain | None] = [None] * len(keyed)
        if par is not None:
            for i, (o, _) in enumerate(keyed):
                ch = at_node.get((par, o.key, o.subgraph, o.node)) if o.node is not None else None
                if ch is not None and id(ch) not in taken:
                    found[i] = ch
                    taken.add(id(ch))
            for i, (o, k) in enumerate(keyed):
                ch = at.get((par, k)) if found[i] is None else None
                if ch is not None and (id(ch) not in taken or (o.node is not None and ch.obs.node == o.node)):
                    found[i] = ch
                    taken.add(id(ch))
            for i, (o, _) in enumerate(keyed):
                if found[i] is None and o.loose_key is not None:
                    for cand in loose_at.get((par, o.loose_key), []):
                        if id(cand) not in taken:
                            found[i] = cand
                            taken.add(id(cand))
                            break
        for (o, k), ch in zip(keyed, found):
            if ch is None:
                ch = _Chain(p, p, o, rank, k)
                chains.append(ch)
                taken.add(id(ch))
            elif order(p) > order(ch.last):
                ch.last = p
            at[(p, k)] = ch
            if o.node is not None:
                at_node[(p, o.key, o.subgraph, o.node)] = ch
            if o.loose_key is not None:
                loose_at.setdefault((p, o.loose_key), []).append(ch)
    return chains


class CheckContext:
    def __init__(
        self,
        cap: "Capture",
        *,
        shared_graph: bool = False,
        classes: bool = True,
        strategies: Sequence[RankDiffStrategy] = STRATEGIES,
    ):
        self.cap = cap
        # how rank diffs are made, tried in order (`diff.rank_diffs`); tests drop one to compare
        # its diffs with the next's
        self.strategies = tuple(strategies)
        # off: every rank diff is made, none answered from the rank classes (tests compare both
        # ways; `check` reads the classes)
        self.classes = classes
        # the user says every graph is shared (compiled on one rank, loaded by the others): `check
        # --shared-graph`; a compile-on-one-rank capture shows it by itself
        self.shared_graph = shared_graph
        self.index = StageIndex(cap)
        self.not_run: list[NotRun] = []
        self.notes: list[str] = []
        self._rank_ctx: dict[int, RankContext] = {}
        # bounded: a normalizer holds its graph's tables, a full diff every node of both graphs
        self._norm = WeightedLRU(8, 8)
        self._rdiff = WeightedLRU(_RDIFF_NODES, 1 << 16)
        self._groups: list[list[int]] | None = None
        self._classes: RankClasses | None = None
        self._vectors: dict[str, dict[int, int]] | None = None
        self._colls: dict[tuple[int, str, bool], list[Collective] | None] = {}
        self._operands: dict[tuple[int, str, bool], list[Operand] | None] = {}
        self._parts: dict[tuple[int, str, int, str, bool], list[Part] | None] = {}
        # check kind -> results made by other processes (check -j), by what the check keys them on
        self.prefetched: dict[str, dict[Any, Any]] = {}

    def share_made(self, other: "CheckContext") -> None:
        """Read what `other` (a context of the same capture under another grading) has made and
        will make: its stage index, rank contexts, normalizers, rank diffs, rank classes and
        prefetched results, none of which depends on the grading."""
        assert other.cap is self.cap and other.classes == self.classes and other.strategies == self.strategies
        self.index, self._rank_ctx, self._norm, self._rdiff = other.index, other._rank_ctx, other._norm, other._rdiff
        self._groups, self._classes, self._vectors = other._groups, other._classes, other._vectors
        self._colls, self._parts, self._operands = other._colls, other._parts, other._operands
        self.prefetched = other.prefetched

    def skip(self, check: str, reason: str) -> None:
        if not any(n.check == check and n.reason == reason for n in self.not_run):
            self.not_run.append(NotRun(check, reason))

    # -- per-graph data ------------------------------------------------------------------------

    def tables(self, rank: int, gid: str) -> GraphTables | None:
        return self.cap.node_table(rank, gid)

    def rank_ctx(self, rank: int) -> RankContext:
        ctx = self._rank_ctx.get(rank)
        if ctx is None:
            ctx = RankContext.from_table(
                rank,
                self.cap.rank_table(rank),
                local_rank=self.cap.local_rank(rank),
                own_device=self.cap.own_device(rank),
            )
            self._rank_ctx[rank] = ctx
        return ctx

    def _stage_ctx(self, rank: int, gid: str) -> RankContext:
        """The rank's context with the own device this graph's device table names."""
        ctx = self.rank_ctx(rank)
        own = self.cap.own_device(rank, gid)
        if own != ctx.own_device:
            ctx = RankContext(ctx.rank, ctx.local_rank, own, ctx.group_keys, ctx.coordinates, ctx.group_positions)
        return ctx

    def normalizer(self, rank: int, gid: str) -> GraphNormalizer:
        key = (rank, gid)
        n = self._norm.get(key)
        if n is None:
            n = graph_normalizer(self.tables(rank, gid), self._stage_ctx(rank, gid))
            self._norm.put(key, n, 1)
        return n

    # -- ranks -----------------------------------------------------------------------------------

    @property
    def rank_classes(self):
        """The ranks whose graph at a stage is the same after this context's normalization
        (`checks.rank_classes`): a rank diff within a class is empty, and one per class is made."""
        if self._classes is None:
            from graphtrain_inspect.inspector.checks.rank_classes import RankClasses

            self._classes = RankClasses(self.cap, self.index, self._stage_ctx)
        return self._classes

    def rank_groups(self) -> list[list[int]]:
        """Ranks whose graphs ought to agree: all ranks, split by pipeline-parallel stage if any."""
        if self._groups is None:
            from graphtrain_inspect.inspector.checks.pipeline_stages import stage_groups

            groups = stage_groups(self.cap.ranks, lambda r: self.rank_ctx(r).coordinates)
            self._groups = [members for _stage, members in groups]
        return self._groups

    def compared_groups(self) -> list[list[int]]:
        """Each group of `rank_groups` as its ranks that have graphs, where at least two do: what a
        check that compares ranks compares."""
        present = [[r for r in g if self.index.by_rank.get(r)] for g in self.rank_groups()]
        return [ranks for ranks in present if len(ranks) >= 2]

    def vectors(self) -> dict[str, dict[int, int]]:
        """Rank-derived integer vectors: global rank, local rank, mesh coordinates, group ranks."""
        if self._vectors is None:
            vec: dict[str, dict[int, int]] = {"rank": {r: r for r in self.cap.ranks}}
            local = {r: self.cap.local_rank(r) for r in self.cap.ranks}
            if all(isinstance(v, int) for v in local.values()):
                vec["local_rank"] = local  # type: ignore[assignment]  # every value checked to be an int just above
            dims: dict[str, dict[int, int]] = {}
            groups: dict[str, dict[int, int]] = {}
            for r in self.cap.ranks:
                ctx = self.rank_ctx(r)
                for d, c in ctx.coordinates.items():
                    dims.setdefault(d, {})[r] = c
                for g, pos in ctx.group_positions.items():
                    groups.setdefault(g, {})[r] = pos
            for d, m in dims.items():
                if len(m) == len(self.cap.ranks):
                    vec[f"coordinate[{d}]"] = m
            for g, m in groups.items():
                if len(m) == len(self.cap.ranks) and g != "world":
                    vec[f"group_rank[{g}]"] = m
            self._vectors = vec
        return self._vectors

    def content_key(self, rank: int, gid: str, *kinds: str) -> tuple:
        """A key for what a graph's records say, equal across ranks that logged the same records
        (by the md5s in their envelopes): work on a graph's content is done once for all ranks.
        Falls back to the rank when a record has no md5."""
        keys = [self.cap.content_key(rank, gid, kind) for kind in kinds]  # (gid, md5) or (rank, gid)
        if any(k[0] != gid for k in keys):
            return (rank, gid, *kinds)
        return (gid, *(md5 for _, md5 in keys))

    def identical(self, ra: int, ga: str, rb: int, gb: str) -> bool:
        """Two ranks logged the very same graph (`diff.rank_diffs.same_logged_graph`)."""
        return same_logged_graph(self.cap, ra, ga, rb, gb)

    def rank_diff(self, key: StageKey, ref: int, other: int) -> GraphDiff | None:
        """Normalized diff of one stage's graph on two ranks (cached), listing its changes only
        (`unlisted_same`); None if unavailable. Made by the first of this context's strategies
        that gives one (`diff.rank_diffs`), reduced to its changes (`GraphDiff.only_changes`)."""
        k = (key, ref, other)
        if k in self._rdiff:
            return self._rdiff.get(k)
        stages = self.index.across(key)
        d = None
        if ref in stages and other in stages:
            ga, gb = stages[ref].gid, stages[other].gid
            # a pass that returned its graph unchanged on both ranks: the diff of the stage before
            # (the same two graphs, the same normalization)
            same_graphs = ("graphs", ref, ga, other, gb)
            if same_graphs in self._rdiff:
                d = self._rdiff.get(same_graphs)
                self._rdiff.put(k, d, 1)
                return d
            pair = RankPair(
                self.cap,
                ref,
                ga,
                self._stage_ctx(ref, ga),
                other,
                gb,
                self._stage_ctx(other, gb),
                tables=self.tables,
                normalizer=self.normalizer,
                from_classes=(lambda: class_rank_diff(self, key, ref, other)) if self.classes else None,
            )
            d = diff_ranks(pair, self.strategies)
            # kept as the checks read it: its changes (a diff of every node of two graphs would
            # crowd the others out of the cache: 8 ranks of a 50k-node graph make 7 per stage)
            d = d.only_changes() if d is not None else None
            self._rdiff.put(same_graphs, d, 1 + (d.size if d is not None else 0))
        self._rdiff.put(k, d, 1)
        return d

    def keep_rank_diff(self, key: StageKey, ref: int, other: int, d: GraphDiff | None) -> None:
        """Keep a rank diff made elsewhere (`check -j`: in another process) for `rank_diff`."""
        stages = self.index.across(key)
        self._rdiff.put(
            ("graphs", ref, stages[ref].gid, other, stages[other].gid), d, 1 + (d.size if d is not None else 0)
        )
        self._rdiff.put((key, ref, other), d, 1)

    def collectives(self, st: Stage) -> list[Collective] | None:
        """The collectives `st`'s graph runs, in order (`diff.collectives`); None if unreadable."""
        k = (st.rank, st.gid, st.key.role == BACKWARD_ROLE)
        if k not in self._colls and self.classes:
            # a rank of a class runs its lowest rank's collectives: their rows differ in group
            # names and the own device alone, and a collective names its group by role
            rep = class_rep_stage(self, st)
            if rep is not None:
                self._colls[k] = self.collectives(rep)
        if k not in self._colls:
            self._colls[k] = collective_sequence(
                self.cap, st.rank, st.gid, self._stage_ctx(st.rank, st.gid), backward=k[2]
            )
        return self._colls[k]

    def collective_parts(self, key: StageKey, ref: int, other: int) -> list[Part] | None:
        """Where `other`'s collectives at stage `key` part from `ref`'s (empty: they agree); None
        if a rank lacks the stage or its graph cannot be read."""
        stages = self.index.across(key)
        if ref not in stages or other not in stages:
            return None
        if self.identical(ref, stages[ref].gid, other, stages[other].gid):
            return []
        if self.classes:
            # one class: the normalized graphs agree, collectives and their groups included
            classes = self.rank_classes
            if classes.class_of(key, ref) is classes.class_of(key, other) is not None:
                return []
        sa, sb = stages[ref], stages[other]
        if self.classes:
            # a rank of a class runs its lowest rank's collectives (`collectives`): compared once
            sb = class_rep_stage(self, sb) or sb
        k = (sa.rank, sa.gid, sb.rank, sb.gid, key.role == BACKWARD_ROLE)
        if k not in self._parts:
            ctx_a, ctx_b = self._stage_ctx(sa.rank, sa.gid), self._stage_ctx(sb.rank, sb.gid)
            if same_by_digests(self.cap, sa.rank, sa.gid, ctx_a, sb.rank, sb.gid, ctx_b):
                self._parts[k] = []  # the rows that differ are no collective's
            else:
                self._parts[k] = self._compared_collectives(sa, sb)
        return self._parts[k]

    def _compared_collectives(self, sa: Stage, sb: Stage) -> list[Part] | None:
        """How two stages' collectives differ: in what they are, else in the order they send what
        they send (`diff.collective_operands`); None if unreadable."""
        a, b = self.collectives(sa), self.collectives(sb)
        if a is None or b is None:
            return None
        parts = compare(a, b)
        if parts or len(a) < 2:
            return parts
        oa, ob = self.operands(sa), self.operands(sb)
        return order_parts(a, b, oa, ob) if oa is not None and ob is not None else []

    def operands(self, st: Stage) -> list[Operand] | None:
        """What each of `st`'s collectives sends (`diff.collective_operands`); None if unreadable."""
        k = (st.rank, st.gid, st.key.role == BACKWARD_ROLE)
        if k not in self._operands:
            tables, colls = self.tables(st.rank, st.gid), self.collectives(st)
            ctx = self._stage_ctx(st.rank, st.gid)
            self._operands[k] = operands(tables, ctx, colls) if tables is not None and colls else None
        return self._operands[k]

    def parent_key(self, key: StageKey, rank: int) -> StageKey | None:
        st = self.index.across(key).get(rank)
        return st.parent.key if st is not None and st.parent is not None else None

    # -- blame -----------------------------------------------------------------------------------

    def blame_per_rank(self, kind: str, observe: Callable[[Stage], Iterable[Observation]]) -> list[Finding]:
        """Observations made on each rank's stages, chained within the rank, merged across ranks."""
        chains: list[_Chain] = []
        for r in self.cap.ranks:
            stages = self.index.by_rank.get(r, [])
            chains.extend(_chains(stages, lambda s: s.parent, observe, lambda s: s.order, r))
        merged: dict[tuple, list[_Chain]] = {}
        for ch in chains:
            merged.setdefault((ch.first.key, ch.okey, ch.obs.severity), []).append(ch)
        out = []
        for group in merged.values():
            # every chain here was made with its rank (none is None)
            group.sort(key=lambda c: c.rank or 0)
            first = group[0]
            ranks = sorted({rank for c in group if (rank := c.rank) is not None})
            out.append(self._finding(kind, first.first, first.last, first.obs, ranks, fixed=True))
        return out

    def blame_across(self, kind: str, observe: Callable[[StageKey, list[int]], Iterable[Observation]]) -> list[Finding]:
        """Observations made on stage keys across a group of ranks, chained through the lowest rank."""
        out = []
        for group in self.rank_groups():
            if len(group) < 2:
                continue
            ref = group[0]
            keys = [st.key for st in self.index.by_rank.get(ref, [])]
            order = {k: i for i, k in enumerate(keys)}
            chains = _chains(
                keys,
                lambda k: self.parent_key(k, ref),
                lambda k: observe(k, group),
                lambda k: order.get(k, -1),
                None,
            )
            for ch in chains:
                ranks = ch.obs.evidence.get("_ranks") or group
                ch.obs.evidence.pop("_ranks", None)
                st_first = self.index.across(ch.first)[ref]
                st_last = self.index.across(ch.last)[ref]
                out.append(self._finding(kind, st_first, st_last, ch.obs, sorted(ranks), fixed=True))
        return out

    def children(self, st: Stage) -> list[Stage]:
        """Stages whose pass received `st`'s graph (on the same rank)."""
        kids = self.__dict__.setdefault("_kids", {})
        if not kids:
            for stages in self.index.by_rank.values():
                for x in stages:
                    if x.parent is not None:
                        kids.setdefault(id(x.parent), []).append(x)
        return kids.get(id(st), [])

    def _finding(
        self, kind: str, first: Stage, last: Stage, o: Observation, ranks: list[int], *, fixed: bool = False
    ) -> Finding:
        """A Finding from a chain of observations. With `fixed`, a chain that ends before the
        pipeline does (a later pass received the graph and its output no longer has it) is
        downgraded to info: the graph that runs does not have the problem."""
        intro = TRACE if first.pass_rec is None else first.pass_name
        last_name = TRACE if last.pass_rec is None else last.pass_name
        ev = dict(o.evidence)
        ev.setdefault("stage", first.key.label())
        if last is not first:
            ev.setdefault("last_stage", last.key.label())
        severity, message = o.severity, o.message
        # where the value is now: a literal the partitioner sent to the backward graph lives there
        # (and is blamed and graded there), not "gone" with the joint graph it came from
        if last.key.pipeline != first.key.pipeline:
            ev.setdefault("graph_now", last.gid)
            ev.setdefault("pipeline_now", last.key.pipeline)
        x: Stage | None = last
        while x is not None and x is not first:
            if x.key.role == BACKWARD_ROLE:
                ev.setdefault("lives_in", "backward")
                message += f"; lives in the backward graph ({pipeline_label(last.key.pipeline)})"
                break
            x = x.parent
        if fixed:
            kids = [k for k in self.children(last) if k.pass_rec is not None]
            if kids:
                ev["fixed_by"] = kids[0].pass_name
                if severity in ("error", "warning"):
                    ev["severity_before_fix"] = severity
                    severity = o.severity_if_fixed or "info"
                message += f" (gone after {kids[0].pass_name})"
        return Finding(
            kind=kind,
            severity=severity,
            message=message,
            introduced_by=intro,
            pass_=last_name,
            ranks=ranks,
            graph=first.gid,
            subgraph=o.subgraph or None,
            node=o.node,
            evidence=ev,
            pipeline=first.key.pipeline,
            introduced_seq=first.seq,
            last_seq=last.seq,
        )
