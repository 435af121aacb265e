"""How one stage's graph on two ranks is diffed: one ordered list of strategies, each a named entry
saying when it applies and what it makes, tried in order until one gives a diff.

    pair = RankPair(cap, ra, ga, ctx_a, rb, gb, ctx_b)
    d = diff_ranks(pair)                          # every strategy in order: what `check` reads
    d = diff_ranks(pair, VIEWS)                   # what `diff --ranks`, the TUI and the report show
    d = diff_ranks(pair, without("positional"))   # a test's choice

A strategy returns None where it cannot say the diff exactly (or would not save the work), and
the next is tried. The last, `tables`, diffs the decoded tables and answers wherever both read. A
caller that knows more than the capture says (the checks' rank classes) hands it in on the pair
(`RankPair.from_classes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.inspector.diff.anchored import anchored_rank_diff
from graphtrain_inspect.inspector.diff.graph_diff import diff_tables, graph_normalizer, rank_context
from graphtrain_inspect.inspector.diff.node_diff import GraphDiff, NodeDiff, SubgraphDiff
from graphtrain_inspect.inspector.diff.normalize import GraphNormalizer, RankContext
from graphtrain_inspect.inspector.diff.row_rank_diff import positional_rank_diff
from graphtrain_inspect.inspector.read.graphmodel import GraphTables

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.read.capture_reader import Capture
    from graphtrain_inspect.inspector.read.stages import StageKey


@dataclass
class RankPair:
    """One graph on two ranks (`ga` on rank `ra`, `gb` on `rb`) with each rank's context, and where
    the caller keeps what the strategies read: `tables` and `normalizer` (by rank and graph id;
    default: from the capture), `from_classes` (the diff the caller's rank classes say, or None)."""

    cap: "Capture"
    ra: int
    ga: str
    ctx_a: RankContext
    rb: int
    gb: str
    ctx_b: RankContext
    tables: Callable[[int, str], GraphTables | None] | None = None
    normalizer: Callable[[int, str], GraphNormalizer] | None = None
    from_classes: Callable[[], GraphDiff | None] | None = None

    def table(self, rank: int, gid: str) -> GraphTables | None:
        return self.tables(rank, gid) if self.tables is not None else self.cap.node_table(rank, gid)

    def norm(self, rank: int, gid: str) -> GraphNormalizer:
        if self.normalizer is not None:
            return self.normalizer(rank, gid)
        return graph_normalizer(self.table(rank, gid), self.ctx_a if rank == self.ra else self.ctx_b)

    def empty(self) -> GraphDiff:
        return GraphDiff(f"rank {self.ra}", f"rank {self.rb}", self.ga, self.gb, [], unlisted_same=True)


@dataclass(frozen=True)
class RankDiffStrategy:
    name: str
    applies: str  # when it gives a diff (else None, and the next is tried)
    makes: str  # what the diff it gives lists
    make: Callable[[RankPair], GraphDiff | None]


def same_logged_graph(cap: "Capture", ra: int, ga: str, rb: int, gb: str) -> bool:
    """Two ranks logged the very same graph: same id, and the same md5 of its code and of its node
    table (the envelopes carry it), so neither needs to be read to know they agree. A record
    without an md5 is keyed by its rank (`Capture.content_key`): then nothing is known."""
    if ga != gb:
        return False
    kinds = (logformat.GRAPH_CODE, logformat.NODES)
    ka = [cap.content_key(ra, ga, kind) for kind in kinds]
    return all(k[0] == ga for k in ka) and ka == [cap.content_key(rb, gb, kind) for kind in kinds]


def same_code_diff(ta: GraphTables, tb: GraphTables, ra: int, rb: int) -> GraphDiff:
    """Two ranks printed the very same code: only what the code does not show can differ, the
    values of small tensor constants. Node by node, no alignment needed."""
    subs = []
    for ga, gb in zip(ta.graphs, tb.graphs):
        nodes = []
        changed = False
        for x, y in zip(ga.nodes, gb.nodes):
            aa, ab = x.get("attr"), y.get("attr")
            if aa != ab:
                nodes.append(NodeDiff("changed", ga.path, x, y, [], [("attr", aa, ab)], False))
                changed = True
            else:
                nodes.append(NodeDiff("same", ga.path, x, y, [], [], False))
        subs.append(SubgraphDiff(ga.path, "changed" if changed else "same", nodes))
    return GraphDiff(f"rank {ra}", f"rank {rb}", ta.gid, tb.gid, subs)


def _identical(p: RankPair) -> GraphDiff | None:
    return p.empty() if same_logged_graph(p.cap, p.ra, p.ga, p.rb, p.gb) else None


def _classes(p: RankPair) -> GraphDiff | None:
    return p.from_classes() if p.from_classes is not None else None


def _positional(p: RankPair) -> GraphDiff | None:
    return positional_rank_diff(p.cap, p.ra, p.ga, p.ctx_a, p.rb, p.gb, p.ctx_b)


def _anchored(p: RankPair) -> GraphDiff | None:
    # one graph id is one code: what differs is in constants, which `same_code` compares alone
    if p.ga == p.gb:
        return None
    return anchored_rank_diff(p.cap, p.ra, p.ga, p.ctx_a, p.rb, p.gb, p.ctx_b)


def _same_code(p: RankPair) -> GraphDiff | None:
    if p.ga != p.gb:
        return None
    ta, tb = p.table(p.ra, p.ga), p.table(p.rb, p.gb)
    return same_code_diff(ta, tb, p.ra, p.rb) if ta is not None and tb is not None else None


def _tables(p: RankPair) -> GraphDiff | None:
    ta, tb = p.table(p.ra, p.ga), p.table(p.rb, p.gb)
    if ta is None or tb is None:
        return None
    return diff_tables(
        ta, tb, a_label=f"rank {p.ra}", b_label=f"rank {p.rb}", norm_a=p.norm(p.ra, p.ga), norm_b=p.norm(p.rb, p.gb)
    )


IDENTICAL = RankDiffStrategy(
    "identical",
    "both ranks logged the very same graph (one id, the same md5s of code and table)",
    "nothing: the ranks agree, and neither graph is read",
    _identical,
)
CLASSES = RankDiffStrategy(
    "classes",
    "the caller's rank classes place both ranks (checks.rank_classes)",
    "nothing within a class; across classes the diff of their lowest ranks, as it reads here",
    _classes,
)
POSITIONAL = RankDiffStrategy(
    "positional",
    "both tables lay out the same subgraphs and row counts one row per line (row_rank_diff.py)",
    "the changed nodes alone, from the rows whose bytes or digests differ, paired by position",
    _positional,
)
ANCHORED = RankDiffStrategy(
    "anchored",
    "two graph ids whose tables have row digests and refs, mostly the same bytes (anchored.py)",
    "the changed nodes alone, from the rows around those that differ",
    _anchored,
)
SAME_CODE = RankDiffStrategy(
    "same-code",
    "one graph id (the same code) whose tables read",
    "every node, paired by position; changed where a small constant's value differs",
    _same_code,
)
TABLES = RankDiffStrategy(
    "tables",
    "both decoded tables read",
    "every node, aligned structurally after rank normalization (graph_diff.diff_tables)",
    _tables,
)

# in order: answers that read nothing first, the decoded tables last
STRATEGIES: tuple[RankDiffStrategy, ...] = (IDENTICAL, CLASSES, POSITIONAL, ANCHORED, SAME_CODE, TABLES)


def only(*names: str) -> tuple[RankDiffStrategy, ...]:
    """The strategies of these names, in the list's order."""
    unknown = set(names) - {s.name for s in STRATEGIES}
    if unknown:
        raise ValueError(f"no rank-diff strategy {sorted(unknown)}")
    return tuple(s for s in STRATEGIES if s.name in names)


def without(*names: str) -> tuple[RankDiffStrategy, ...]:
    """Every strategy but these, in order (tests compare a path with the next one's diffs)."""
    only(*names)  # an unknown name is an error, not a no-op
    return tuple(s for s in STRATEGIES if s.name not in names)


# what `diff --ranks`, the TUI and the report show: each node compared after normalization
# (`tables`), or, for two graph ids whose tables have row digests, their changes (`anchored`: a
# graph of 100k nodes); the checks' shortcuts (the same md5s, rank classes, rows by position,
# constants alone) answer only what a check asks of a diff
VIEWS = only("anchored", "tables")


def diff_ranks(pair: RankPair, strategies: Iterable[RankDiffStrategy] = STRATEGIES) -> GraphDiff | None:
    """The diff the first strategy that gives one gives; None where none does (a table unreadable)."""
    return diff_ranks_by(pair, strategies)[1]


def diff_ranks_by(
    pair: RankPair, strategies: Iterable[RankDiffStrategy] = STRATEGIES
) -> tuple[RankDiffStrategy | None, GraphDiff | None]:
    """`diff_ranks`, and the strategy that made it (None with the diff where none did)."""
    for s in strategies:
        d = s.make(pair)
        if d is not None:
            return s, d
    return None, None


def rank_diff_gids(cap: "Capture", rank_a: int, gid_a: str, rank_b: int, gid_b: str) -> GraphDiff | None:
    """One graph on two ranks, normalized, as the views show it (`VIEWS`)."""
    ctx_a, ctx_b = rank_context(cap, rank_a, gid_a), rank_context(cap, rank_b, gid_b)
    return diff_ranks(RankPair(cap, rank_a, gid_a, ctx_a, rank_b, gid_b, ctx_b), VIEWS)


def rank_diff(cap: "Capture", key: "StageKey", rank_a: int, rank_b: int, *, index=None) -> GraphDiff | None:
    """The graph of one stage on two ranks, as the views show it; None if a rank lacks it or it is
    unreadable."""
    from graphtrain_inspect.inspector.read.stages import StageIndex

    stages = (index or StageIndex(cap)).across(key)
    if rank_a not in stages or rank_b not in stages:
        return None
    return rank_diff_gids(cap, rank_a, stages[rank_a].gid, rank_b, stages[rank_b].gid)
