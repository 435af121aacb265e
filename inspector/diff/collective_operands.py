"""What each collective sends: an identity of its operands that survives renaming and reordering.

Two ranks whose collectives agree in op, group and size may still pair the wrong tensors:
collectives pair by the order each rank issues them, so a pass that schedules rank 1's gradient
all_reduces in another order than rank 0's sums rank 0's gradient of one parameter with rank 1's
gradient of another, and nothing hangs. To see that, each collective gets an identity of what it
computes: a structural (Merkle) hash of the expression that makes it from the graph's inputs,
read from the node rows the reader already has (never unpickled): each node's hash is that of its
op, its target, its literal leaves as the rank normalizer rewrites them (group names by role, the
own device) and the hashes of the nodes it reads; a placeholder is its position among the graph's
inputs, an attribute its target. Node names take no part, so a pass that names nodes anew in
another order leaves the identities as they were.

Ranks whose identities are the same multiset in a different order issue the same collectives in
another order: an `OperandOrder` part. Where the identities differ otherwise (a rank's own literal,
uneven shards traced per rank) nothing is said: the ranks compute different things, which is not
an order to fix. Only read for rank pairs whose graphs differ and whose collectives otherwise agree.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping

import orjson

from graphtrain_inspect.capture.shared.logformat import NodeRow
from graphtrain_inspect.capture.shared.rank_tokens import is_collective_target
from graphtrain_inspect.inspector.diff.collectives import Collective, Part
from graphtrain_inspect.inspector.diff.normalize import GraphNormalizer, RankContext
from graphtrain_inspect.inspector.read.graphmodel import GraphTables, is_ref
from graphtrain_inspect.inspector.read.source_lines import parse_frame

# what a collective's verb does to the other ranks' tensors, for the message
_VERBS = (("reduce_scatter", "reduce"), ("all_reduce", "reduce"), ("allreduce", "reduce"), ("gather", "gather"))


@dataclass
class Operand:
    """One collective's identity on one rank, and the node that feeds it (for messages)."""

    identity: str
    node: str | None  # the collective's first input node on this rank
    source: dict[str, Any] | None  # that node's source line (its stack, else the line that made it)


@dataclass
class OperandOrder(Part):
    """Ranks that issue the same collectives (by operands) in another order: `b` holds the other
    rank's collectives at the positions where the two orders differ, `a` the reference's
    collective of the same operands at each (where the reference issues it)."""

    moves: list[dict[str, Any]] = field(default_factory=list)


class _Canon:
    """Encoded args with node refs replaced by their hashes and literals normalized (a string as
    the normalizer reads it in a row of this kind: group names in collective rows, devices)."""

    def __init__(self, hashes: Mapping[str, str], norm: GraphNormalizer):
        self.hashes, self.norm = hashes, norm
        self.strs: dict[tuple[bool, str], Any] = {}

    def value(self, v: Any, target: Any, coll: bool) -> Any:
        """`v` of a row of `target` (`coll`: a collective's, whose strings may name groups)."""
        t = type(v)
        if t is list:
            return [self.value(x, target, coll) for x in v]
        if t is str:
            got = self.strs.get((coll, v))
            if got is None:
                got = self.strs[(coll, v)] = self.norm.leaf(target, v)
            return got
        if t is not dict:
            return v  # a number, a bool, None: the normalizer leaves them as they are
        if is_ref(v):
            return self.hashes.get(v["n"], "?")
        if "dev" in v and len(v) == 1:
            return self.norm.leaf(None, v)
        return {str(k): self.value(x, target, coll) for k, x in v.items()}


def node_hashes(rows: list[NodeRow], norm: GraphNormalizer) -> dict[str, str]:
    """Each node's structural hash (rows in graph order: a node's inputs come before it; a ref to
    a node not yet seen, as a nested graph's ref to its parent's, hashes as unknown)."""
    hashes: dict[str, str] = {}
    canon = _Canon(hashes, norm)
    inputs = 0
    for row in rows:
        op, target = row.get("op"), row.get("target")
        if op == "placeholder":
            key: Any = ["in", inputs]
            inputs += 1
        elif op == "get_attr":
            key = ["attr", target]
        else:
            coll = is_collective_target(target)
            args, kwargs = row.get("args") or [], row.get("kwargs") or {}
            key = [op, target, canon.value(args, target, coll), canon.value(kwargs, target, coll)]
        data = orjson.dumps(key, option=orjson.OPT_NON_STR_KEYS, default=str)
        hashes[str(row.get("name"))] = hashlib.blake2b(data, digest_size=12).hexdigest()
    return hashes


def _first_input(row: NodeRow | None) -> str | None:
    for v in (row.get("args") if row else None) or []:
        if is_ref(v):
            return v["n"]
        if isinstance(v, list):
            refs = [x["n"] for x in v if is_ref(x)]
            if refs:
                return refs[0]
    return None


def _source(row: NodeRow | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return parse_frame(row.get("stack")) or parse_frame(row.get("created"))


def operands(tables: GraphTables, ctx: RankContext | None, colls: list[Collective]) -> list[Operand] | None:
    """Each collective's operand identity, in the order of `colls` (a rank's `collective_sequence`
    of the graph `tables` holds); None where one of them is not found in the table."""
    norm = GraphNormalizer((r for g in tables.graphs for r in g.nodes), ctx)
    by_path = {g.path: g for g in tables.graphs}
    hashes: dict[str, dict[str, str]] = {}
    out = []
    for c in colls:
        g = by_path.get(c.subgraph)
        if g is None:
            return None
        if c.subgraph not in hashes:
            hashes[c.subgraph] = node_hashes(g.nodes, norm)
        h = hashes[c.subgraph].get(c.node)
        if h is None:
            return None
        arg = _first_input(g.node(c.node))
        out.append(Operand(h, arg, _source(g.node(arg) if arg else None)))
    return out


def order_parts(a: list[Collective], b: list[Collective], oa: list[Operand], ob: list[Operand]) -> list[Part]:
    """One `OperandOrder` where rank b issues the same collectives as rank a (by operands) in
    another order; none where the order is the same or the operands differ otherwise."""
    ia, ib = [o.identity for o in oa], [o.identity for o in ob]
    if ia == ib or len(ia) != len(ib) or Counter(ia) != Counter(ib):
        return []
    at = [i for i in range(len(ia)) if ia[i] != ib[i]]
    moves, mine = [], []
    for i in at:
        j = _position(ia, ib[i], ib[: i + 1].count(ib[i]))
        mine.append(a[j])
        moves.append(
            {
                "op": b[i].op,
                "rank_position": i + 1,
                "reference_position": j + 1,
                "collective": b[i].node,
                "operand": ob[i].node,
                "reference_collective": a[j].node,
                "reference_operand": oa[j].node,
                "source": oa[j].source,
            }
        )
    return [OperandOrder("order", mine, [b[i] for i in at], moves)]


def _position(ids: list[str], identity: str, nth: int) -> int:
    """Where the `nth` occurrence of `identity` stands in `ids`."""
    seen = 0
    for k, x in enumerate(ids):
        if x == identity:
            seen += 1
            if seen == nth:
                return k
    return -1


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def where(src: dict[str, Any] | None) -> str:
    """`, at passes.py:45` (the file's last part), or nothing."""
    if not src or not src.get("file") or not src.get("line"):
        return ""
    return f", at {str(src['file']).replace(chr(92), '/').rsplit('/', 1)[-1]}:{src['line']}"


def describe_order(p: OperandOrder, ra: int, rb: int) -> str:
    """`rank 1 issues the all_reduce of mm_7 (all_reduce_2, at model.py:45; rank 1: mm_default_4)
    1st, rank 0 issues it 3rd`: the first place where rank `rb`'s order parts from rank `ra`'s,
    the operand and collective named as the reference rank names them."""
    m = p.moves[0]
    theirs = f"; rank {rb}: {m['operand']}" if m["operand"] != m["reference_operand"] else ""
    more = f" (and {len(p.moves) - 1} more moved)" if len(p.moves) > 1 else ""
    return (
        f"rank {rb} issues the {m['op']} of {m['reference_operand']} ({m['reference_collective']}"
        f"{where(m['source'])}{theirs}) {ordinal(m['rank_position'])}, rank {ra} issues it "
        f"{ordinal(m['reference_position'])}{more}"
    )


def operand_labels(ref: list[Operand] | None, ops: list[Operand] | None, ref_rank: int) -> list[str]:
    """` of NODE` for each collective of a rank's sequence, with ` (rN: NODE)` where the reference
    rank names the same operand otherwise: two ranks' orders side by side."""
    if ops is None:
        return []
    names = {o.identity: o.node for o in ref or []}
    return [
        f" of {o.node}" + (f" (r{ref_rank}: {names[o.identity]})" if names.get(o.identity, o.node) != o.node else "")
        for o in ops
    ]


def consequence(parts: list[Part]) -> str:
    """What issuing them in another order does: `collectives pair by order, so each rank would
    reduce another rank's different tensor`."""
    op = next((c.op for p in parts for c in p.b), "")
    verb = next((v for k, v in _VERBS if k in op), "exchange")
    return f"collectives pair by order, so each rank would {verb} another rank's different tensor"
