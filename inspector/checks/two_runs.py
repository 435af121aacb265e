"""Two runs of one program, paired: ranks by role, pipelines and passes by identity, and each
paired graph said the same or changed (`compare BASE NEW`).

Ranks pair by their coordinates in the run's full device mesh (the rank table's mesh of most
dimensions), a dimension one run lacks taken as one of size 1 there, else by number: a run on a
2-rank dp mesh against one on a 2 x 2 dp x ep mesh pairs dp=0 with dp=0,ep=0 and dp=1 with
dp=1,ep=0, and names the ranks at ep=1 as having no counterpart.

Pipelines pair by their key (`identity.pipeline_key`: compile id, origin, ordinal, module), the
key the checks compare ranks by; inside a pipeline the stages (`stages.StageKey`:
pass name, occurrence, output role) pair by key, in order, and where one run has other passes in
the place of the other's, one for one from the first: a pass renamed. What is left is a pass
added or removed.

Two paired graphs are the same when their normalized digests agree (the capture's `norm` hash,
the rank classes' hash where it has none: node names, process-group names and the own device
rewritten, as a rank diff normalizes them), known without decoding either table. Where they
differ with as many nodes on both sides, the normalized node diff (as `diff --ranks` makes it,
across the two captures) decides: a node renamed or a stack line moved changes the bytes, not the
graph. A graph whose node count differs has changed without a diff being made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import TYPE_CHECKING, Any

from graphtrain_inspect.capture.shared.rank_tokens import table_meshes
from graphtrain_inspect.inspector.checks.rank_classes import RankClasses
from graphtrain_inspect.inspector.read.stages import StageIndex, StageKey

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.diff.node_diff import GraphDiff
    from graphtrain_inspect.inspector.read.capture_reader import Capture
    from graphtrain_inspect.inspector.read.stages import Stage

# what a paired graph is on one pair of ranks
SAME, CHANGED, UNREADABLE = "same", "changed", "unreadable"
BASE_ONLY, NEW_ONLY = "base only", "new only"  # the stage ran on one side's rank alone


@dataclass
class RankPairs:
    """How the ranks of the two runs pair: `pairs` (base rank, new rank) in base order, `by`
    "rank" (by number) or "mesh" (by coordinates), the ranks of each run with no counterpart,
    each paired rank's role (its coordinates as `dim=i` text, by base rank) and a note where the
    meshes could not pair them."""

    pairs: list[tuple[int, int]]
    by: str
    base_only: list[int]
    new_only: list[int]
    roles: dict[int, str] = field(default_factory=dict)
    note: str | None = None

    def new_of(self) -> dict[int, int]:
        return {n: b for b, n in self.pairs}

    def label(self, b: int, n: int) -> str:
        return f"rank {b}" if b == n else f"rank {b}/{n}"

    def to_json(self) -> dict[str, Any]:
        return {
            "by": self.by,
            "pairs": [list(p) for p in self.pairs],
            "base_only": self.base_only,
            "new_only": self.new_only,
            "roles": {str(b): r for b, r in self.roles.items()},
            "note": self.note,
        }


def mesh_roles(cap: "Capture") -> tuple[tuple[str, ...], dict[int, tuple[int, ...]]] | None:
    """The dimension names of the run's full mesh and each rank's coordinates in it; None where a
    rank has no mesh, or its ranks' meshes do not have the same dimensions."""
    dims: tuple[str, ...] | None = None
    out: dict[int, tuple[int, ...]] = {}
    for r in cap.ranks:
        meshes = table_meshes(cap.rank_table(r) or {})
        if not meshes or meshes[0]["coordinate"] is None:
            return None
        m = meshes[0]
        names = tuple(m["dim_names"])
        if dims is None:
            dims = names
        if names != dims or len(m["coordinate"]) != len(names):
            return None
        out[r] = tuple(m["coordinate"])
    return (dims, out) if dims is not None else None


def pair_ranks(base: "Capture", new: "Capture") -> RankPairs:
    """Ranks of equal mesh coordinates paired; a dimension one run's mesh lacks is one of size 1
    there (a run on a dp mesh against one on dp x ep: its ranks pair with those at ep=0)."""
    mb, mn = mesh_roles(base), mesh_roles(new)
    note = None
    if mb is not None and mn is not None:
        dims = (*mb[0], *(d for d in mn[0] if d not in mb[0]))

        def roles(m: tuple[tuple[str, ...], dict[int, tuple[int, ...]]]) -> dict[int, tuple[int, ...]]:
            return {r: tuple(dict(zip(m[0], c)).get(d, 0) for d in dims) for r, c in m[1].items()}

        rb, rn = roles(mb), roles(mn)
        by_role = {c: r for r, c in rn.items()}
        if len(by_role) == len(rn) and len(set(rb.values())) == len(rb):
            pairs = [(b, by_role[c]) for b, c in sorted(rb.items()) if c in by_role]
            text = {b: ",".join(f"{d}={i}" for d, i in zip(dims, rb[b])) for b, _ in pairs}
            lacks = [
                f"the {which} run's mesh has no {'/'.join(d for d in dims if d not in m[0])} dimension: "
                "its ranks are taken at coordinate 0 there"
                for which, m in (("base", mb), ("new", mn))
                if any(d not in m[0] for d in dims)
            ]
            return _pairs(base, new, pairs, "mesh", text, "; ".join(lacks) or None)
        note = "two ranks of one run have the same mesh coordinates: ranks paired by number"
    elif (mb is None) != (mn is None):
        note = "one run has no device mesh: ranks paired by number"
    pairs = [(r, r) for r in base.ranks if r in set(new.ranks)]
    return _pairs(base, new, pairs, "rank", {}, note)


def _pairs(base: "Capture", new: "Capture", pairs: list, by: str, roles: dict, note: str | None) -> RankPairs:
    paired_b, paired_n = {b for b, _ in pairs}, {n for _, n in pairs}
    return RankPairs(
        pairs,
        by,
        [r for r in base.ranks if r not in paired_b],
        [r for r in new.ranks if r not in paired_n],
        roles,
        note,
    )


@dataclass
class RankChange:
    """One paired stage on one pair of ranks."""

    base_rank: int
    new_rank: int
    status: str  # SAME, CHANGED, UNREADABLE, BASE_ONLY, NEW_ONLY
    base_nodes: int | None = None
    new_nodes: int | None = None
    # from the node diff where one was made: {"added", "removed", "changed"}
    counts: dict[str, int] | None = None
    input_changed: bool = False  # the graph the pass received had changed as well

    def to_json(self) -> dict[str, Any]:
        return {
            "base_rank": self.base_rank,
            "new_rank": self.new_rank,
            "status": self.status,
            "base_nodes": self.base_nodes,
            "new_nodes": self.new_nodes,
            "nodes": self.counts,
            "input_changed": self.input_changed,
        }


@dataclass
class StageChange:
    """A stage of one run and its counterpart in the other (None: added or removed)."""

    pipeline: str
    base: StageKey | None
    new: StageKey | None
    ranks: list[RankChange] = field(default_factory=list)

    @property
    def status(self) -> str:
        """added, removed, or what its graphs did: changed (on some rank), the input changed (every
        change carried from an earlier stage), same."""
        if self.base is None:
            return "added"
        if self.new is None:
            return "removed"
        moved = [c for c in self.ranks if c.status != SAME]
        if not moved:
            return "same"
        if all(c.status == CHANGED and c.input_changed for c in moved):
            return "input changed"
        return "changed"

    @property
    def key(self) -> StageKey:
        """The base run's key, else the new run's (a stage has at least one)."""
        key = self.base if self.base is not None else self.new
        assert key is not None
        return key

    @property
    def renamed(self) -> bool:
        return self.base is not None and self.new is not None and self.base.pass_name != self.new.pass_name

    def label(self) -> str:
        if self.base is not None and self.new is not None and self.renamed:
            return f"{self.base.label()} -> {self.new.label()}"
        return self.key.label()

    def to_json(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "base": self.base.label() if self.base else None,
            "new": self.new.label() if self.new else None,
            "pass": self.key.pass_name,
            "status": self.status,
            "renamed": self.renamed,
            "ranks": [c.to_json() for c in self.ranks],
        }


class TwoRuns:
    """The two runs' stages paired, and each paired graph compared (when first asked)."""

    def __init__(self, base: "Capture", new: "Capture"):
        self.base, self.new = base, new
        self.ranks = pair_ranks(base, new)
        self.base_index, self.new_index = StageIndex(base), StageIndex(new)
        self._classes = (RankClasses(base, self.base_index), RankClasses(new, self.new_index))
        self.pipelines: list[str] = []
        self.stages: list[StageChange] = []
        self._pair_stages()
        # base key -> new key of every paired stage (a renamed pass's findings follow it)
        self.new_key = {s.base: s.new for s in self.stages if s.base is not None and s.new is not None}
        self._compared = False

    # -- pairing ------------------------------------------------------------------------------

    def _pair_stages(self) -> None:
        by_pl_b = _by_pipeline(self.base_index.keys)
        by_pl_n = _by_pipeline(self.new_index.keys)
        self.pipelines = list(by_pl_b) + [p for p in by_pl_n if p not in by_pl_b]
        for pl in self.pipelines:
            kb, kn = by_pl_b.get(pl, []), by_pl_n.get(pl, [])
            self.stages.extend(StageChange(pl, b, n) for b, n in _align_keys(kb, kn))

    # -- graphs -------------------------------------------------------------------------------

    def compare(self) -> list[StageChange]:
        """Every paired stage compared on every pair of ranks (made once)."""
        if self._compared:
            return self.stages
        self._compared = True
        changed: set[tuple[int, int, int]] = set()  # (id of a base stage, base rank, new rank) changed
        for s in self.stages:
            if s.base is None or s.new is None:
                continue
            on_b, on_n = self.base_index.across(s.base), self.new_index.across(s.new)
            for b, n in self.ranks.pairs:
                sb, sn = on_b.get(b), on_n.get(n)
                if sb is None and sn is None:
                    continue
                if sb is None or sn is None:
                    st = BASE_ONLY if sn is None else NEW_ONLY
                    s.ranks.append(RankChange(b, n, st, self._nodes(self.base, sb), self._nodes(self.new, sn)))
                    continue
                c = self._graph_change(b, sb, n, sn)
                if c.status == CHANGED:
                    changed.add((id(sb), b, n))
                    c.input_changed = self._input_changed(sb, sn, changed)
                s.ranks.append(c)
        return self.stages

    def _input_changed(self, sb: "Stage", sn: "Stage", changed: set[tuple[int, int, int]]) -> bool:
        """Whether the graph the pass received differs as well: its input's stage changed on these
        ranks, or is not the counterpart of the other run's (a pass added or removed before it)."""
        pb, pn = sb.parent, sn.parent
        if pb is None or pn is None:
            return (pb is None) != (pn is None)
        if self.new_key.get(pb.key) != pn.key:
            return True
        return (id(pb), sb.rank, sn.rank) in changed

    @staticmethod
    def _nodes(cap: "Capture", st: "Stage | None") -> int | None:
        return cap.node_count(st.rank, st.gid) if st is not None else None

    def _graph_change(self, b: int, sb: "Stage", n: int, sn: "Stage") -> RankChange:
        nb, nn = self._nodes(self.base, sb), self._nodes(self.new, sn)
        cb, cn = self._classes
        db, dn = cb.digest(b, sb.gid), cn.digest(n, sn.gid)
        if db is not None and db == dn:
            return RankChange(b, n, SAME, nb, nn)
        if nb is not None and nn is not None and nb != nn:
            return RankChange(b, n, CHANGED, nb, nn)
        d = run_diff(self.base, b, sb.gid, self.new, n, sn.gid)
        if d is None:
            return RankChange(b, n, UNREADABLE, nb, nn)
        if d.empty:
            return RankChange(b, n, SAME, nb, nn)
        return RankChange(b, n, CHANGED, nb, nn, dict(d.counts))

    # -- in words (the command, its page and the TUI say the same) ------------------------------

    def pairing_lines(self) -> list[tuple[str, str]]:
        """How the ranks paired, a line each with its kind: "" (the pairing), "note", "unpaired"."""
        from graphtrain_inspect.capture.shared.rank_ranges import format_ranks

        rp = self.ranks
        count = f"{len(rp.pairs)} pair{'s' if len(rp.pairs) != 1 else ''}"
        if rp.by == "mesh" and (any(b != n for b, n in rp.pairs) or rp.base_only or rp.new_only):
            pairs = ", ".join(f"{rp.label(b, n)} ({rp.roles.get(b, '')})" for b, n in rp.pairs)
            out = [(f"ranks paired by mesh coordinates (base/new): {pairs}", "")]
        elif rp.by == "mesh":
            out = [(f"ranks paired by number, their mesh coordinates the same ({count})", "")]
        else:
            out = [(f"ranks paired by number ({count})", "")]
        if rp.note:
            out.append((f"note: {rp.note}", "note"))
        for which, ranks in (("base", rp.base_only), ("new", rp.new_only)):
            if ranks:
                out.append((f"no counterpart for the {which} run's rank(s) {format_ranks(ranks)}", "unpaired"))
        return out

    def describe(self, s: StageChange) -> str:
        """What a paired pass did, in a few words: added or removed (on which ranks), same, or
        changed / its input changed on which pairs of ranks, with the node counts."""
        status = s.status
        if status in ("added", "removed"):
            ranks = sorted(self.new_index.across(s.new) if s.new is not None else self.base_index.across(s.key))
            which = "new" if s.new is not None else "base"
            return f"{status}: ran in the {which} run only (ranks {','.join(map(str, ranks))})"
        prefix = "renamed; " if s.renamed else ""
        if status == "same":
            return prefix + "same"
        # pairs of ranks that changed alike said once: "ranks 0-63: 899 -> 893 nodes (-6)"
        alike: dict[str, list[RankChange]] = {}
        for c in s.ranks:
            if c.status != SAME:
                alike.setdefault(self._rank_part(c), []).append(c)
        parts = "; ".join(f"{self._where(cs)}{': ' + what if what else ''}" for what, cs in alike.items())
        return prefix + ("its input changed on " if status == "input changed" else "changed on ") + parts

    def _where(self, cs: list[RankChange]) -> str:
        from graphtrain_inspect.capture.shared.rank_ranges import format_ranks

        if len(cs) == 1:
            return self.ranks.label(cs[0].base_rank, cs[0].new_rank)
        if all(c.base_rank == c.new_rank for c in cs):
            return f"ranks {format_ranks([c.base_rank for c in cs])}"
        return "ranks " + ", ".join(self.ranks.label(c.base_rank, c.new_rank).removeprefix("rank ") for c in cs)

    @staticmethod
    def _rank_part(c: RankChange) -> str:
        """What changed on one pair of ranks, without naming them."""
        if c.status == CHANGED:
            if c.base_nodes is not None and c.new_nodes is not None and c.base_nodes != c.new_nodes:
                return f"{c.base_nodes} -> {c.new_nodes} nodes ({c.new_nodes - c.base_nodes:+d})"
            if c.counts:
                added, removed, changed = (c.counts.get(k, 0) for k in ("added", "removed", "changed"))
                return f"{added} added, {removed} removed, {changed} changed"
            return ""
        if c.status in (BASE_ONLY, NEW_ONLY):
            return f"ran in the {c.status.split()[0]} run only"
        return c.status

    # -- look-ups -----------------------------------------------------------------------------

    def find(self, name: str, rank: int | None = None) -> list[StageChange]:
        """The paired stages of a pass by name (either run's: a renamed pass by its old or new
        name), `module:qualname` or `#SEQ` (on the base rank, else the new)."""
        kb = set(self.base_index.find(name, rank))
        kn = set(self.new_index.find(name, rank))
        return [s for s in self.stages if (s.base is not None and s.base in kb) or (s.new is not None and s.new in kn)]


def _by_pipeline(keys: list[StageKey]) -> dict[str, list[StageKey]]:
    out: dict[str, list[StageKey]] = {}
    for k in keys:
        out.setdefault(k.pipeline, []).append(k)
    return out


def _align_keys(kb: list[StageKey], kn: list[StageKey]) -> list[tuple[StageKey | None, StageKey | None]]:
    """The stages of one pipeline in the two runs, paired: equal keys in order, then where each
    side has others in one place, one for one from the first while their roles agree (a pass
    renamed); the rest one side's alone (added, removed)."""
    ident = lambda k: (k.pass_name, k.occurrence, k.role)  # noqa: E731
    out: list[tuple[StageKey | None, StageKey | None]] = []
    sm = SequenceMatcher(None, [ident(k) for k in kb], [ident(k) for k in kn], autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        xs, ys = kb[i1:i2], kn[j1:j2]
        if tag == "equal":
            out.extend(zip(xs, ys))
            continue
        k = 0
        if tag == "replace":  # renamed, the first ones of each side one for one while their roles agree
            while k < min(len(xs), len(ys)) and xs[k].role == ys[k].role:
                k += 1
            out.extend(zip(xs[:k], ys[:k]))
        out.extend((x, None) for x in xs[k:])
        out.extend((None, y) for y in ys[k:])
    return out


def run_diff(
    base: "Capture", rb: int, gb: str, new: "Capture", rn: int, gn: str, *, meta: bool = True, stack: bool = False
) -> "GraphDiff | None":
    """One graph of each run, normalized as a rank diff is (group names, own device; node names
    through the alignment): from the row digests where both tables have them, else decoded. None
    where a table is unreadable."""
    from graphtrain_inspect.inspector.diff.anchored import anchored_rank_diff
    from graphtrain_inspect.inspector.diff.graph_diff import diff_tables, graph_normalizer, rank_context

    labels = (f"base rank {rb}", f"new rank {rn}")
    ctx_b, ctx_n = rank_context(base, rb, gb), rank_context(new, rn, gn)
    if meta and not stack:
        d = anchored_rank_diff(base, rb, gb, ctx_b, rn, gn, ctx_n, cap_b=new, labels=labels)
        if d is not None:
            return d
    ta, tn = base.node_table(rb, gb), new.node_table(rn, gn)
    if ta is None or tn is None:
        return None
    return diff_tables(
        ta,
        tn,
        a_label=labels[0],
        b_label=labels[1],
        norm_a=graph_normalizer(ta, ctx_b),
        norm_b=graph_normalizer(tn, ctx_n),
        meta=meta,
        stack=stack,
    )
