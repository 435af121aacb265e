"""Graph diffs of tables that do not line up row by row, from their row digests and refs.

A pass that decides differently on one rank leaves that rank's graph with nodes added or moved,
and every later stage differs in layout too: the positional diff (row_rank_diff.py) cannot pair
the rows, and a structural diff of the decoded tables aligns every row of both (the bulk of
`check`'s time on such a capture, and of `diff --pass` on a large graph). Most rows are still the
very same bytes on both sides. With row digests and refs (`gti_row_digests`), per subgraph (paired
by path as the table diff pairs them; one on one side only is added or removed whole):

1. anchors: rows whose digest occurs once on each side, paired (the longest run in order on
   both sides): for two ranks the normalized digests where both tables have them
   (`rank_digests`); else the digests, except rows that mention either rank's indexed own device
   (the same bytes mean another thing after normalization); never rows with a ref to no row (the
   structural diff always lists those);
2. the rows that are no anchor are read, with the anchors next to them (their inputs and their
   users, found from the refs alone) and those anchors' partners; rows read that have the same
   name and op on both sides are paired (a pass that tags or rewires a node keeps its name, a
   copy it makes gets a new one), and the rest aligned as the structural diff aligns the rows
   between its common prefix and suffix (`align.align_seeded`, the pairs so far given). Where
   every such row of one side pairs by name (a pass that changes nodes in place; two ranks whose
   rows differ in a literal), the alignment has nothing left to decide, and of the anchors next
   to them only those whose refs do not follow the pairing are read (`_named_gap_seeds`);
3. the pairs read are compared as the structural diff compares them, the rows left unpaired are
   added or removed, and every other anchor is the same on both sides: its inputs are anchors
   themselves (else it would have been read), paired with the rows of their own names.

Used for two ranks' graphs of one stage (`anchored_rank_diff`: the checks' rank diffs and `diff
--ranks`) and for a pass's input and output on one rank (`anchored_pass_diff`: `diff --pass`).
The result is the structural diff reduced to its changes (`GraphDiff.only_changes`). Rows the
same bytes on both sides are the same node here; the structural diff of the decoded tables
aligns by structure alone and may pair such a node with a renamed copy instead. None where
this path cannot say it exactly or would not save the work: tables without digests or refs, a
subgraph path twice, fewer than half the rows the same bytes on both sides, digests that occur twice on a
side, refs that do not agree with the rows read, a row that is not what its digest says, a
collective naming a process group the rank tables do not know; the caller then diffs the decoded
tables. Byte-equal collective rows are taken as equal, as row_rank_diff.py takes them.
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import contains, is_not, not_
from typing import TYPE_CHECKING

from graphtrain_inspect.capture.shared import logformat, rank_tokens
from graphtrain_inspect.inspector.diff.align import align_seeded
from graphtrain_inspect.inspector.diff.node_diff import GraphDiff, NodeDiff, SubgraphDiff, compare_parts
from graphtrain_inspect.inspector.diff.normalize import (
    IDENTITY,
    GraphNormalizer,
    RankContext,
    knows_groups,
    own_device_tokens,
)
from graphtrain_inspect.inspector.diff.row_parts import Parts, shallow_sig
from graphtrain_inspect.inspector.diff.sequence_match import lis
from graphtrain_inspect.inspector.read.row_digests import RowDigests

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.read.capture_reader import Capture


def rank_digests(
    cap: "Capture",
    ra: int,
    ga: str,
    ctx_a: RankContext,
    rb: int,
    gb: str,
    ctx_b: RankContext,
    cap_b: "Capture | None" = None,
) -> tuple[RowDigests, RowDigests, list[bytes]] | None:
    """Two ranks' tables' row digests as a rank diff compares them, and the tokens whose rows it
    reads even where their digests are equal: the normalized digests where both tables have them,
    made with what these ranks' normalizers rewrite (no token then: the own device is rewritten in
    them, and a GPU rank's rows, which all name it, compare), else the digests and each rank's
    indexed own device (the same bytes mean another thing after normalization). None where a
    table has no digests. `cap_b`: rank b's capture where it is another run's."""
    da, db = cap.row_digests(ra, ga), (cap_b or cap).row_digests(rb, gb)
    if da is None or db is None:
        return None
    na = da.normalized(rank_tokens.digest_rewrites(ctx_a.group_keys, ctx_a.own_device))
    nb = db.normalized(rank_tokens.digest_rewrites(ctx_b.group_keys, ctx_b.own_device))
    if na is not None and nb is not None:
        return na, nb, []
    return da, db, own_device_tokens(ctx_a, ctx_b)


def anchored_rank_diff(
    cap: "Capture",
    ra: int,
    ga: str,
    ctx_a: RankContext,
    rb: int,
    gb: str,
    ctx_b: RankContext,
    cap_b: "Capture | None" = None,
    labels: tuple[str, str] | None = None,
) -> GraphDiff | None:
    """One stage's graph on two ranks, normalized, as `CheckContext.rank_diff` keeps it. `cap_b`:
    rank b's capture where it is another run's (`compare`), `labels` then the sides' names."""
    got = rank_digests(cap, ra, ga, ctx_a, rb, gb, ctx_b, cap_b)
    if got is None:
        return None
    da, db, tokens = got
    norms = (GraphNormalizer(None, ctx_a), GraphNormalizer(None, ctx_b))
    a, b = _Side(cap, ra, ga, norms[0], ctx_a, da), _Side(cap_b or cap, rb, gb, norms[1], ctx_b, db)
    return _anchored_diff(a, b, tokens, *(labels or (f"rank {ra}", f"rank {rb}")))


def anchored_pass_diff(
    cap: "Capture", rank: int, before: str, after: str, a_label: str, b_label: str
) -> GraphDiff | None:
    """A pass's input and output graph on one rank (nothing normalized), as `diff --pass` lists
    their changes: the rows the pass left alone are the same bytes before and after it."""
    a, b = _Side(cap, rank, before, IDENTITY, None), _Side(cap, rank, after, IDENTITY, None)
    return _anchored_diff(a, b, [], a_label, b_label)


class _Side:
    """One table of the diff: where its rows are read from, how they are normalized, and the rank
    context whose process groups a collective must name (None: nothing is normalized)."""

    def __init__(
        self,
        cap: "Capture",
        rank: int,
        gid: str,
        norm: GraphNormalizer,
        ctx: RankContext | None,
        digests: RowDigests | None = None,
    ):
        self.cap, self.rank, self.gid, self.norm, self.ctx = cap, rank, gid, norm, ctx
        # what rows are compared by (rank_digests); rows are read by the table's own digests
        self.d: RowDigests | None = digests if digests is not None else cap.row_digests(rank, gid)

    def parts(self, rows: list, like: Parts | None = None) -> Parts:
        return Parts(rows, self.norm.leaf if self.norm is not IDENTITY else None, like=like)

    def knows_groups(self, rows: list) -> bool:
        ctx = self.ctx
        return ctx is None or all(knows_groups(r, ctx) for r in rows)


def _paths(d: RowDigests) -> list[str] | None:
    """Each subgraph's path, from its head; None where a head does not read or a path is twice."""
    paths: list[str] = []
    for head in d.heads:
        path = logformat.sub_head_path(head)
        if path is None:
            return None
        paths.append(path)
    return paths if len(set(paths)) == len(paths) else None


def _anchored_diff(sa: _Side, sb: _Side, tokens: list[bytes], a_label: str, b_label: str) -> GraphDiff | None:
    da, db = sa.d, sb.d
    if da is None or db is None:
        return None
    if 2 * da.shared(db) < max(sum(da.counts), sum(db.counts)):
        # few rows the same (a GPU rank's own device is in most of its rows, where the tables have
        # no normalized digests): reading and aligning the others costs what diffing the decoded
        # tables does, and that is the reference
        return None
    paths_a, paths_b = _paths(da), _paths(db)
    if paths_a is None or paths_b is None:
        return None
    sens_a: list[set[int]] = [set() for _ in paths_a]
    sens_b: list[set[int]] = [set() for _ in paths_b]
    for k, i in da.rows_with(tokens):
        sens_a[k].add(i)
    for k, i in db.rows_with(tokens):
        sens_b[k].add(i)
    # subgraphs paired as the table diff pairs them: by path, then those left on each side in
    # order (a pass that renamed them), then those left on one side added or removed
    at_b = {p: k for k, p in enumerate(paths_b)}
    in_a = set(paths_a)
    left_a = [k for k, p in enumerate(paths_a) if p not in at_b]
    left_b = [k for k, p in enumerate(paths_b) if p not in in_a]
    renamed_subs = dict(zip(left_a, left_b))
    renamed: dict[tuple[str, str], str] = {}
    subs: list[SubgraphDiff] = []
    for ka, path in enumerate(paths_a):
        kb = at_b.get(path, renamed_subs.get(ka))
        if kb is None:
            got = _one_side(sa, ka, path, "removed")
        else:
            got = _sub_diff(ka, kb, paths_b[kb], sa, sb, sens_a[ka], sens_b[kb], renamed)
        if got is None:
            return None
        subs.append(got)
    paired = {at_b[p] for p in paths_a if p in at_b} | set(renamed_subs.values())
    for kb, path in enumerate(paths_b):
        if kb not in paired:
            got = _one_side(sb, kb, path, "added")
            if got is None:
                return None
            subs.append(got)
    return GraphDiff(a_label, b_label, sa.gid, sb.gid, subs, unlisted_same=True, renamed=renamed)


def _one_side(side: _Side, k: int, path: str, status: str) -> SubgraphDiff | None:
    """A subgraph on one side only: every row of it added or removed."""
    assert side.d is not None
    rows = side.cap.digest_rows(side.rank, side.gid, k, range(side.d.counts[k]))
    if rows is None:
        return None
    if status == "added":
        return SubgraphDiff(path, status, [NodeDiff(status, path, None, r) for r in rows])
    return SubgraphDiff(path, status, [NodeDiff(status, path, r, None) for r in rows])


def _anchors(xa, xb, sens_a: set[int], sens_b: set[int]) -> list[tuple[int, int]] | None:
    """Pairs of rows of equal digests, in order on both sides; None where a digest occurs twice
    on a side (rows are then not told apart by their digests)."""
    xa, xb = list(xa), list(xb)  # each digest made an int once
    pos_b = dict(zip(xb, range(len(xb))))
    if len(pos_b) != len(xb) or len(set(xa)) != len(xa):
        return None
    js = list(map(pos_b.get, xa))
    if sens_a or sens_b:
        pairs = [(i, j) for i, j in enumerate(js) if j is not None and i not in sens_a and j not in sens_b]
    else:  # at C speed: the rows of a whose digest b has
        found = list(map(is_not, js, repeat(None)))
        pairs = list(zip(compress(range(len(js)), found), compress(js, found)))
    return lis(pairs)  # the pairs as they are where already in order on both sides


def _users(refs: list[list[int]], rows: set[int]) -> list[int]:
    """The rows whose refs name one of `rows`."""
    return list(compress(range(len(refs)), map(not_, map(rows.isdisjoint, refs))))


def _sub_diff(
    ka: int,
    kb: int,
    path: str,
    sa: _Side,
    sb: _Side,
    sens_a: set[int],
    sens_b: set[int],
    renamed: dict[tuple[str, str], str],
) -> SubgraphDiff | None:
    assert sa.d is not None and sb.d is not None  # _anchored_diff returns before without
    xa, xb = sa.d.sub_digests(ka), sb.d.sub_digests(kb)
    refs_a, refs_b = sa.d.sub_refs(ka), sb.d.sub_refs(kb)
    if refs_a is None or refs_b is None:
        return None
    n_a, n_b = len(xa), len(xb)
    # rows with a ref to no row: the structural diff lists them as changed (no name maps there)
    loose_a = set(compress(range(n_a), map(contains, refs_a, repeat(-1))))
    loose_b = set(compress(range(n_b), map(contains, refs_b, repeat(-1))))
    if xa == xb and not (sens_a or sens_b or loose_a or loose_b):
        return SubgraphDiff(path, "same", [])
    pairs = _anchors(xa, xb, sens_a, sens_b)
    if pairs is None:
        return None
    ma = [-1] * n_a
    mb = [-1] * n_b
    for i, j in pairs:
        ma[i] = j
        mb[j] = i
    gap_a = {i for i in range(n_a) if ma[i] < 0}
    gap_b = {j for j in range(n_b) if mb[j] < 0}
    seeds_a = _anchors_to_read(sa, sb, ka, kb, ma, mb, gap_a, gap_b, refs_a, refs_b, loose_a, loose_b)
    rows_a = sorted(gap_a | seeds_a)
    rows_b = sorted(gap_b | {ma[i] for i in seeds_a})
    read = _read_rows(sa, sb, ka, kb, rows_a, rows_b, refs_a, refs_b)
    if read is None:
        return None
    got_a, got_b, pa, pb = read
    local_a = dict(zip(rows_a, range(len(rows_a))))
    local_b = dict(zip(rows_b, range(len(rows_b))))
    seeds = [(local_a[i], local_b[ma[i]]) for i in seeds_a]
    # rows read that keep their name and op on both sides: the same node, changed (a pass that
    # tags, retargets or rewires a node keeps its name; a copy it makes gets a new one)
    gap_names_b = {got_b[local_b[j]]["name"]: local_b[j] for j in gap_b}
    for i in gap_a:
        s = local_a[i]
        t = gap_names_b.get(got_a[s]["name"])
        if t is not None and pa.sigs[s] == pb.sigs[t]:
            seeds.append((s, t))
    la, lb, _ = align_seeded(pa, pb, sorted(seeds))
    for s, i in enumerate(rows_a):
        t = la[s]
        ma[i] = rows_b[t] if t >= 0 else -1
    for t, j in enumerate(rows_b):
        s = lb[t]
        mb[j] = rows_a[s] if s >= 0 else -1
    nm = _ref_names(pa, rows_a, refs_a, local_a, la, [r["name"] for r in got_b])
    nodes = _listed_nodes(path, sa, sb, (rows_a, got_a, pa, la), (rows_b, got_b, pb, lb), ma, nm, renamed)
    return SubgraphDiff(path, "changed" if nodes else "same", nodes)


def _listed_nodes(
    path: str,
    sa: _Side,
    sb: _Side,
    side_a: tuple[list[int], list[logformat.NodeRow], Parts, list[int]],
    side_b: tuple[list[int], list[logformat.NodeRow], Parts, list[int]],
    ma: list[int],
    nm: dict[str, str],
    renamed: dict[tuple[str, str], str],
) -> list[NodeDiff]:
    """The rows read as the diff lists them, in b's order (each side: its rows read, those rows,
    their Parts, each one's partner among the other side's rows read): added, changed, and each
    removed a row after the b row of the matched a row before it. Renamed pairs go to `renamed`."""
    rows_a, got_a, pa, la = side_a
    rows_b, got_b, pb, lb = side_b
    listed: list[tuple[int, int, int, NodeDiff]] = []
    for t, j in enumerate(rows_b):
        s = lb[t]
        rb = got_b[t]
        if s < 0:
            listed.append((j, 0, 0, NodeDiff("added", path, None, rb)))
            continue
        ra = got_a[s]
        if ra["name"] != rb["name"]:
            renamed[(path, ra["name"])] = rb["name"]
        args, metas, structural = compare_parts(s, t, pa, pb, nm, sa.norm, sb.norm, meta=True, stack=False)
        if args or metas or structural:
            listed.append((j, 0, 0, NodeDiff("changed", path, ra, rb, args, metas, structural)))
    # a rows matched with none: each after the b row of the matched a row before it
    for s, i in enumerate(rows_a):
        if la[s] >= 0:
            continue
        x = i - 1
        while x >= 0 and ma[x] < 0:
            x -= 1
        listed.append((ma[x] if x >= 0 else -1, 1, i, NodeDiff("removed", path, got_a[s], None)))
    listed.sort(key=lambda e: e[:3])
    return [e[3] for e in listed]


def _anchors_to_read(
    sa: _Side,
    sb: _Side,
    ka: int,
    kb: int,
    ma: list[int],
    mb: list[int],
    gap_a: set[int],
    gap_b: set[int],
    refs_a: list[list[int]],
    refs_b: list[list[int]],
    loose_a: set[int],
    loose_b: set[int],
) -> set[int]:
    """The anchors (as a's rows) read with the gap rows, and given to the alignment as matched."""
    # where the gap rows pair by name, only the anchors next to them whose refs do not follow
    # that pairing are read (a pass that tags or concretizes nodes in place; on two ranks, rows
    # that differ in a literal): the pairing is structural, whatever the rows' normalization
    seeds_a = _named_gap_seeds(sa, sb, ka, kb, ma, mb, gap_a, gap_b, refs_a, refs_b)
    if seeds_a is not None:
        return seeds_a | {i for i in loose_a if ma[i] >= 0} | {mb[j] for j in loose_b if mb[j] >= 0}
    # the anchors next to a gap row (its inputs and its users) on either side, with those
    # that have a ref to no row
    near_a = set(_users(refs_a, gap_a)) | loose_a
    near_a.update(x for i in gap_a for x in refs_a[i])
    near_b = set(_users(refs_b, gap_b)) | loose_b
    near_b.update(y for j in gap_b for y in refs_b[j])
    near_a.discard(-1)
    near_b.discard(-1)
    return {i for i in near_a if ma[i] >= 0} | {mb[j] for j in near_b if mb[j] >= 0}


def _read_rows(
    sa: _Side,
    sb: _Side,
    ka: int,
    kb: int,
    rows_a: list[int],
    rows_b: list[int],
    refs_a: list[list[int]],
    refs_b: list[list[int]],
) -> tuple[list[logformat.NodeRow], list[logformat.NodeRow], Parts, Parts] | None:
    """The rows to compare, read from the logs, and their Parts; None where a row is not what its
    digest says, names a group the rank tables do not know, a name occurs twice, or the refs do
    not agree with the rows read."""
    got_a = sa.cap.digest_rows(sa.rank, sa.gid, ka, rows_a)
    got_b = sb.cap.digest_rows(sb.rank, sb.gid, kb, rows_b)
    if got_a is None or got_b is None:
        return None
    if not (sa.knows_groups(got_a) and sb.knows_groups(got_b)):
        return None
    pa = sa.parts(got_a)
    pb = sb.parts(got_b, like=pa)
    if not (pa.names_unique and pb.names_unique):
        return None
    local_a = dict(zip(rows_a, range(len(rows_a))))
    local_b = dict(zip(rows_b, range(len(rows_b))))
    if not (_refs_agree(pa, rows_a, refs_a, local_a) and _refs_agree(pb, rows_b, refs_b, local_b)):
        return None
    return got_a, got_b, pa, pb


def _ref_names(
    pa: Parts, rows_a: list[int], refs_a: list[list[int]], local_a: dict[int, int], la: list[int], names_b: list[str]
) -> dict[str, str]:
    """The names compare_parts maps a's refs through: a row read, to its partner's name; an anchor
    not read, to its own (its partner is the same bytes)."""
    nm: dict[str, str] = {}
    for s, i in enumerate(rows_a):
        for name, x in zip(pa.names[s], refs_a[i]):
            if x < 0 or name in nm:
                continue
            if x in local_a:
                t = la[local_a[x]]
                if t >= 0:
                    nm[name] = names_b[t]
            else:
                nm[name] = name
    return nm


def _named_gap_seeds(
    sa: _Side,
    sb: _Side,
    ka: int,
    kb: int,
    ma: list[int],
    mb: list[int],
    gap_a: set[int],
    gap_b: set[int],
    refs_a: list[list[int]],
    refs_b: list[list[int]],
) -> set[int] | None:
    """The anchors (a's rows) a diff must read where the gap rows alone decide the
    alignment: every gap row of one side keeps its name and signature on the other (a pass that
    tags or rewires nodes in place, and adds or removes others), so `align_seeded` would pair
    nothing past the rows paired by name, whatever anchors it were given. An anchor next to the
    gap is then read only where it may differ: a user of a gap row whose refs do not go to its
    partner's refs through that pairing (an input of a gap row is an anchor whose own inputs are
    anchors: the same). None where the gap rows do not pair so (the caller reads every anchor
    next to the gap), or a row does not read."""
    rows_a, rows_b = sorted(gap_a), sorted(gap_b)
    got_a = sa.cap.digest_rows(sa.rank, sa.gid, ka, rows_a)
    got_b = sb.cap.digest_rows(sb.rank, sb.gid, kb, rows_b)
    if got_a is None or got_b is None:
        return None
    by_name = {r["name"]: (j, r) for j, r in zip(rows_b, got_b)}
    if len(by_name) != len(rows_b):
        return None
    pair = dict(enumerate(ma))  # a row -> its b row: anchors, then the gap rows paired by name
    paired_b: set[int] = set()
    for i, r in zip(rows_a, got_a):
        hit = by_name.get(r["name"])
        if hit is not None and shallow_sig(hit[1]) == shallow_sig(r):
            pair[i] = hit[0]
            paired_b.add(hit[0])
    if len(paired_b) != len(rows_a) and len(paired_b) != len(rows_b):
        return None  # rows left on both sides: the alignment may pair them, given the anchors
    seeds: set[int] = set()
    for i in _users(refs_a, gap_a):
        j = ma[i]
        if j >= 0 and list(map(pair.get, refs_a[i])) != refs_b[j]:
            seeds.add(i)
    back = {j: i for i, j in pair.items() if j >= 0}
    for j in _users(refs_b, gap_b):
        i = mb[j]
        if i >= 0 and list(map(back.get, refs_b[j])) != refs_a[i]:
            seeds.add(i)
    return seeds


def _refs_agree(p: Parts, rows: list[int], refs: list[list[int]], local: dict[int, int]) -> bool:
    """The refs column says of each row read what its decoded row says: the same number of refs,
    each to the row read of its name, or to a row not read (or none) where no row read has it."""
    n = len(rows)
    for s, i in enumerate(rows):
        want = tuple([local.get(x, n) for x in refs[i]])
        if want != tuple(p.ins[s]):
            return False
    return True
