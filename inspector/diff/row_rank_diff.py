"""Rank diffs from undecoded rows: two ranks' tables of one stage, compared line by line.

Graphs that ought to agree across ranks usually have the same nodes in the same order and differ
in a few rows (process-group names of collectives, a baked literal). When both tables are laid
out one row per line (log format 2) with the same subgraphs and row counts, rows are paired by
position; only rows whose bytes differ, or that mention either rank's indexed own device (equal
bytes, different meaning after normalization: `cuda:0` is rank 0's own device and a baked literal
on rank 1), are parsed and compared through the rank normalizers. Every other row is the same on
both ranks. The result is a GraphDiff that lists only the changed nodes, with `unlisted_same` set.

Where both tables have row digests (`gti_row_digests`, written for large tables),
the rows that differ are found by comparing digests and read alone from the logs, each checked
against its digest (inspector/read/row_digests.py); the payloads are not read whole.

Anything this path cannot decide exactly gives None, and the caller diffs the parsed tables:
tables of another layout or damaged, a different subgraph structure or row count, a row pair
with different names, a row that does not parse or validate, or a collective naming a process
group the rank tables do not know (the normalizer would number such groups by first appearance
in the whole graph, which needs every row).

Byte-equal collective rows are taken as equal: the same group name is the same group on every
rank that uses it.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Callable

import orjson

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.capture.shared.symbol_rows import rows_with
from graphtrain_inspect.inspector.diff.anchored import rank_digests
from graphtrain_inspect.inspector.diff.node_diff import GraphDiff, NodeDiff, SubgraphDiff, compare_rows
from graphtrain_inspect.inspector.diff.normalize import (
    GraphNormalizer,
    RankContext,
    is_collective_target,
    knows_groups,
    own_device_tokens,
)
from graphtrain_inspect.inspector.read.graphmodel import row_ok

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.read.capture_reader import Capture


class _SameNames(dict):
    """Positional pairing of rows with equal names: every node maps to the node of its name."""

    def get(self, key: Any, default: Any = None) -> Any:  # dict.get's signature
        return key


_SAME_NAMES = _SameNames()


def _group_substitutions(ctx: RankContext) -> list[tuple[bytes, bytes]]:
    """Each process-group name of the rank as a JSON string, and the normalized name it becomes."""
    return [(orjson.dumps(name), orjson.dumps(f"<pg:{key}>")) for name, key in sorted(ctx.group_keys.items())]


_TARGET = b'"target":"'


def _same_after_group_names(x: bytes, y: bytes, groups_a: list, groups_b: list) -> bool:
    """Two rows of a collective that differ only in the process-group names the normalizer
    rewrites (each rank's dp group has its own name): equal once each rank's names are replaced,
    without parsing them. Only for collectives, where the normalizer rewrites every string."""
    at = x.find(_TARGET)
    if at < 0:
        return False
    end = x.find(b'"', at + len(_TARGET))
    if end < 0 or not is_collective_target(x[at + len(_TARGET) : end].decode("utf-8", "replace")):
        return False
    for name, norm in groups_a:
        x = x.replace(name, norm)
    for name, norm in groups_b:
        y = y.replace(name, norm)
    return x == y


NO_DIGESTS = object()  # _pairs_from_digests: a table has no row digests

# per subgraph: its head, the rows to compare, those that mention an own device, each side's row i
_Pairs = list[tuple[bytes, list[int], set[int], Callable[[int], bytes | None], Callable[[int], bytes | None]]]


def _pairs_from_digests(
    cap: "Capture", ra: int, ga: str, ctx_a: RankContext, rb: int, gb: str, ctx_b: RankContext
) -> _Pairs | None | object:
    """Per subgraph: (head, rows to compare, rows that mention an own device, a's row i, b's
    row i), from the tables' row digests (`gti_row_digests`, normalized where both have them:
    `anchored.rank_digests`): the rows whose digests differ and those the stored payloads show a
    token in, read alone. None where the layouts differ (the tables' rows would say the same);
    NO_DIGESTS where a table has none."""
    got = rank_digests(cap, ra, ga, ctx_a, rb, gb, ctx_b)
    if got is None:
        return NO_DIGESTS
    da, db, tokens = got
    if da.counts != db.counts or da.heads != db.heads:
        return None
    todo: list[list[int]] = [[] for _ in da.counts]
    for k, i in da.differing(db):
        todo[k].append(i)
    sensitive: list[set[int]] = [set() for _ in da.counts]
    for k, i in da.rows_with(tokens) | db.rows_with(tokens):
        sensitive[k].add(i)
    return [
        (head, sorted(set(todo[k]) | sensitive[k]), sensitive[k], partial(da.row, k), partial(db.row, k))
        for k, head in enumerate(da.heads)
    ]


def _item_of(lines: list[bytes]) -> Callable[[int], bytes | None]:
    return lines.__getitem__


def _pairs_from_rows(cap: "Capture", ra: int, ga: str, rb: int, gb: str, tokens: list[bytes]) -> _Pairs | None:
    """`_pairs_from_digests` from the tables' undecoded rows (`Capture.node_rows`)."""
    a_subs, b_subs = cap.node_rows(ra, ga), cap.node_rows(rb, gb)
    if a_subs is None or b_subs is None or len(a_subs) != len(b_subs):
        return None
    if any(ha != hb or len(xa) != len(xb) for (ha, xa), (hb, xb) in zip(a_subs, b_subs)):
        return None
    out: _Pairs = []
    for (head, xa), (_, xb) in zip(a_subs, b_subs):
        todo = set() if xa == xb else {i for i, (x, y) in enumerate(zip(xa, xb)) if x != y}
        sensitive = rows_with(xa, tokens) | rows_with(xb, tokens)
        out.append((head, sorted(todo | sensitive), sensitive, _item_of(xa), _item_of(xb)))
    return out


def positional_rank_diff(
    cap: "Capture", ra: int, ga: str, ctx_a: RankContext, rb: int, gb: str, ctx_b: RankContext
) -> GraphDiff | None:
    pairs = _pairs_from_digests(cap, ra, ga, ctx_a, rb, gb, ctx_b)
    if pairs is NO_DIGESTS:
        pairs = _pairs_from_rows(cap, ra, ga, rb, gb, own_device_tokens(ctx_a, ctx_b))
    if not isinstance(pairs, list):
        return None
    na, nb = GraphNormalizer(None, ctx_a), GraphNormalizer(None, ctx_b)
    groups_a, groups_b = _group_substitutions(ctx_a), _group_substitutions(ctx_b)
    subs: list[SubgraphDiff] = []
    for head, todo, sensitive, row_a, row_b in pairs:
        path = logformat.sub_head_path(head)
        if path is None:
            return None
        nodes: list[NodeDiff] = []
        for i in todo:
            xa, xb = row_a(i), row_b(i)
            if xa is None or xb is None:
                return None  # a row that is not what its digest says
            if i not in sensitive and _same_after_group_names(xa, xb, groups_a, groups_b):
                continue
            try:
                a, b = logformat.decode_row(xa), logformat.decode_row(xb)
            except orjson.JSONDecodeError:
                return None
            if not (row_ok(a, xa) and row_ok(b, xb)) or a["name"] != b["name"]:
                return None
            if not (knows_groups(a, ctx_a) and knows_groups(b, ctx_b)):
                return None
            args, metas, structural = compare_rows(a, b, _SAME_NAMES, na, nb)
            if args or metas or structural:
                nodes.append(NodeDiff("changed", path, a, b, args, metas, structural))
        subs.append(SubgraphDiff(path, "changed" if nodes else "same", nodes))
    return GraphDiff(f"rank {ra}", f"rank {rb}", ga, gb, subs, unlisted_same=True)
