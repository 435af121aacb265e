"""The collectives a graph runs, in order: what ranks must agree on, and where two ranks part.

A rank's graph and another rank's may differ in what they compute (what is saved or recomputed,
fusion, folding, kernels chosen from each rank's sizes) and still run together; they cannot differ
in the collectives they issue: every rank of a group must call the same collective on the same
group, in the same order, with the same sizes, or the ranks wait on each other for ever (or
reduce the wrong tensors). This module reads that sequence from a graph's node table and compares
two ranks' sequences.

Derived from the node rows the capture already writes (target, args, `val`, `bwd`), so every
capture has it, older ones included, and no second record can disagree with the table. Where the
table has row digests only the collective rows are read (`RowDigests.rows_by_target`); a graph
with collectives inside nested subgraphs is read whole, to put each subgraph's collectives at the
node of the enclosing graph that holds it.

A collective is named by its op (`all_gather_into_tensor`), its group by role (the rank
normalizer's `<pg:KEY>` token: `mesh.dp[2]`, `world`, the same on every rank), the sizes of what
it returns (symbols as the graph writes them), its dtype and whether it runs in the backward.
`wait_tensor` and the like are not collectives of their own (they complete one).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from graphtrain_inspect.capture.shared.logformat import NodeRow
from graphtrain_inspect.capture.shared.rank_tokens import REDUCE_OPS, is_collective_target
from graphtrain_inspect.inspector.diff.anchored import rank_digests
from graphtrain_inspect.inspector.diff.normalize import GraphNormalizer, RankContext
from graphtrain_inspect.inspector.read.graphmodel import GraphTables, row_leaves

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.read.capture_reader import Capture

# namespaces whose targets read `namespace.op.overload`
_OP_NAMESPACES = frozenset(
    {"_c10d_functional", "c10d_functional", "_c10d_functional_autograd", "c10d", "_dtensor", "symm_mem"}
)
# what a collective is called (the functional ops, c10d's `allreduce_`, `_dtensor.shard_dim_alltoall`,
# symm_mem's fused ops, funcol's Python functions in a Dynamo graph). Not send/recv: a rank's send
# pairs with another's recv, so point-to-point sequences differ across ranks by design (pipeline
# stages)
_COMM_WORDS = re.compile(
    r"all_?reduce|all_?gather|reduce_scatter|all_?to_?all|broadcast|barrier|gather|scatter|reduce|permute"
)
# ops whose result has the same size on every rank of the group (the others, all_to_all with its
# split sizes, send/recv, gather/scatter, may legitimately move a different amount per rank)
_SAME_SIZE = re.compile(r"all_?reduce|all_?gather|reduce_scatter|broadcast")


def op_name(target: str) -> str:
    """`_c10d_functional.all_gather_into_tensor.default` -> `all_gather_into_tensor`;
    `torch.distributed._functional_collectives.all_reduce` -> `all_reduce`."""
    parts = target.split(".")
    if len(parts) >= 2 and parts[0] in _OP_NAMESPACES:
        return parts[1]
    return parts[-1]


_IS_COMM: dict[str, bool] = {}


def is_communication_target(target: Any) -> bool:
    """A target that exchanges data with other ranks (not a wait, not a mesh coordinate op)."""
    if type(target) is not str:
        return False
    known = _IS_COMM.get(target)
    if known is None:
        name = op_name(target)
        known = (
            is_collective_target(target)
            and not target.startswith("device_mesh.")
            and not name.startswith("wait")
            and bool(_COMM_WORDS.search(name))
        )
        if len(_IS_COMM) < 65_536:
            _IS_COMM[target] = known
    return known


@dataclass(frozen=True)
class Collective:
    op: str  # all_gather_into_tensor
    group: str  # the group by role: `<pg:mesh.dp[2]>`, `<pg:world>`, or an ordinal `<pg#0>`; "" if none
    shapes: tuple  # each returned tensor's shape (ints, or symbols as strings)
    dtype: str | None
    backward: bool
    node: str  # the node's name on its rank (not compared)
    subgraph: str = ""

    @property
    def kind(self) -> tuple[str, str, bool]:
        """What two ranks must agree on besides sizes."""
        return (self.op, self.group, self.backward)

    @property
    def phase(self) -> str:
        return "backward" if self.backward else "forward"

    def group_label(self) -> str:
        return group_label(self.group)

    def describe(self) -> str:
        size = ", ".join(_shape_text(s) for s in self.shapes)
        return f"{self.op} (group {self.group_label()}){f' -> {size}' if size else ''}"

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "group": self.group_label(),
            "shapes": [list(s) if s is not None else None for s in self.shapes],
            "dtype": self.dtype,
            "phase": self.phase,
            "node": self.node,
            **({"subgraph": self.subgraph} if self.subgraph else {}),
        }


def group_label(token: str) -> str:
    """`<pg:mesh.dp[2]>` -> `dp`, `<pg:mesh.batch+fsdp[4]>` -> `batch+fsdp`, `<pg:world>` ->
    `world`, `<pg#0>` -> `#0`: how a message names a group."""
    m = re.fullmatch(r"<pg:mesh\.(.+)\[[^\]]*\]>", token)
    if m:
        return m.group(1)
    m = re.fullmatch(r"<pg[:]?(.*)>", token)
    if m:
        return m.group(1)
    return token or "?"


def _shape_text(shape: Any) -> str:
    return "?" if shape is None else "[" + ", ".join(str(x) for x in shape) + "]"


def _tensor_vals(val: Any) -> Iterator[dict]:
    if isinstance(val, dict) and val.get("t") == "tensor":
        yield val
    elif isinstance(val, list):
        for v in val:
            yield from _tensor_vals(v)


def collective_of(row: NodeRow, norm: GraphNormalizer, *, backward: bool = False, subgraph: str = "") -> Collective:
    target = str(row.get("target"))
    group = ""
    for _where, leaf in row_leaves(row):
        if isinstance(leaf, str) and leaf not in REDUCE_OPS:
            group = norm.group(leaf)
            break
    vals = list(_tensor_vals(row.get("val")))
    shapes = tuple(tuple(v["shape"]) if isinstance(v.get("shape"), list) else None for v in vals)
    dtype = vals[0].get("dtype") if vals else None
    return Collective(
        op_name(target),
        group,
        shapes,
        dtype if isinstance(dtype, str) else None,
        backward or bool(row.get("bwd")),
        str(row.get("name")),
        subgraph,
    )


def _ordered_rows(tables: GraphTables) -> Iterator[tuple[str, NodeRow]]:
    """(subgraph path, row) of every collective, each nested subgraph's at the node of the
    enclosing graph that names it (its get_attr), subgraphs no node names at the end."""
    children: dict[tuple[str, str], list] = {}
    for g in tables.graphs:
        if g.path and g.parent_node is not None:
            children.setdefault((g.path.rpartition("/")[0], g.parent_node), []).append(g)
    seen: set[str] = set()

    def walk(g) -> Iterator[tuple[str, NodeRow]]:
        seen.add(g.path)
        for row in g.nodes:
            if is_communication_target(row.get("target")):
                yield g.path, row
            for child in children.get((g.path, str(row.get("name"))), ()):
                if child.path not in seen:
                    yield from walk(child)

    for g in tables.graphs:
        if g.path not in seen and (not g.path or g.parent_node is None or g is tables.graphs[0]):
            yield from walk(g)
    for g in tables.graphs:
        if g.path not in seen:
            yield from walk(g)


def collective_sequence(
    cap: "Capture", rank: int, gid: str, ctx: RankContext | None, *, backward: bool = False
) -> list[Collective] | None:
    """The collectives one rank's graph runs, in order (`backward`: the graph is a backward graph,
    so all of them run in the backward); None where the graph's table cannot be read."""
    rows = _digest_rows(cap, rank, gid)
    if rows is not None:
        norm = GraphNormalizer(rows, ctx)
        return [collective_of(r, norm, backward=backward) for r in rows]
    tables = cap.node_table(rank, gid)
    if tables is None:
        return None
    ordered = list(_ordered_rows(tables))
    norm = GraphNormalizer((r for g in tables.graphs for r in g.nodes if is_collective_target(r.get("target"))), ctx)
    return [collective_of(r, norm, backward=backward, subgraph=path) for path, r in ordered]


def _digest_rows(cap: "Capture", rank: int, gid: str) -> list[NodeRow] | None:
    """The root graph's collective rows read by the row digests; None where the table has no
    digests, or collectives in a nested subgraph (their place in the order needs the whole table).
    The normalizer numbers unknown groups from collective rows alone, so these rows are enough."""
    d = cap.row_digests(rank, gid)
    places = d.rows_by_target(is_collective_target) if d is not None else None
    if places is None or any(k != 0 for k, _ in places):
        return None
    got = cap.digest_rows(rank, gid, 0, [i for _, i in places]) if places else []
    if got is None:
        return None
    return [r for r in got if is_communication_target(r.get("target"))] if places else []


def same_by_digests(cap: "Capture", ra: int, ga: str, ctx_a: RankContext, rb: int, gb: str, ctx_b: RankContext) -> bool:
    """Whether two ranks' graphs run the same collectives, known from their tables' normalized
    row digests without reading their collective rows: tables of one layout (subgraph heads and
    row counts) whose rows differ only where neither rank's row is a collective's. Every other
    row reads the same on both once group names and the own device are normalized, so the
    sequences, groups and sizes are the same. False where that is not known (no normalized
    digests, other layouts, a differing row that is a collective's): then read the rows."""
    got = rank_digests(cap, ra, ga, ctx_a, rb, gb, ctx_b)
    if got is None:
        return False
    da, db, tokens = got
    if tokens or da.counts != db.counts or da.heads != db.heads:
        return False  # not normalized digests, or not row for row
    by_sub: dict[int, list[int]] = {}
    for k, i in da.differing(db):
        by_sub.setdefault(k, []).append(i)
    for k, rows in by_sub.items():
        for r, g in ((ra, ga), (rb, gb)):
            got_rows = cap.digest_rows(r, g, k, rows)
            if got_rows is None or any(is_collective_target(x.get("target")) for x in got_rows):
                return False
    return True


# ---------------------------------------------------------------------------------------------
# two ranks' sequences


@dataclass
class Part:
    """One place where two ranks' sequences differ: collectives only one of them runs (`a` or `b`
    empty), ones that differ in op, group or phase, or the same collective of another size."""

    how: str  # "only_a", "only_b", "other", "size"
    a: list[Collective]
    b: list[Collective]


def _same_size(x: Collective, y: Collective) -> bool:
    if not _SAME_SIZE.search(x.op) or len(x.shapes) != len(y.shapes):
        return True
    for sa, sb in zip(x.shapes, y.shapes):
        if sa is None or sb is None or len(sa) != len(sb):
            continue
        # a symbol matches anything: its value is each rank's own
        if any(type(p) is int and type(q) is int and p != q for p, q in zip(sa, sb)):
            return False
    return x.dtype is None or y.dtype is None or x.dtype == y.dtype


def compare(a: list[Collective], b: list[Collective]) -> list[Part]:
    """Where sequence `b` parts from `a`: empty when every collective lines up."""
    ka, kb = [c.kind for c in a], [c.kind for c in b]
    parts: list[Part] = []
    if ka == kb:
        opcodes: Iterable = [("equal", 0, len(a), 0, len(b))]
    else:
        opcodes = difflib.SequenceMatcher(None, ka, kb, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            for x, y in zip(a[i1:i2], b[j1:j2]):
                if not _same_size(x, y):
                    parts.append(Part("size", [x], [y]))
        elif tag == "delete":
            parts.append(Part("only_a", a[i1:i2], []))
        elif tag == "insert":
            parts.append(Part("only_b", [], b[j1:j2]))
        else:
            parts.append(Part("other", a[i1:i2], b[j1:j2]))
    return parts


def _counted(cs: list[Collective]) -> str:
    """`2 all_gather_into_tensor (group dp), 1 all_reduce (group tp)`"""
    counts: dict[tuple[str, str], int] = {}
    for c in cs:
        k = (c.op, c.group_label())
        counts[k] = counts.get(k, 0) + 1
    return ", ".join(f"{n} {op} (group {g})" for (op, g), n in counts.items())


def _phases(cs: list[Collective]) -> str:
    ph = sorted({c.phase for c in cs})
    return ph[0] if len(ph) == 1 else "forward and backward"


def describe_part(p: Part, ra: int, rb: int) -> str:
    """One line of a finding: what rank `rb` runs that rank `ra` does not, or otherwise."""
    if p.how == "only_b":
        return f"rank {rb}'s {_phases(p.b)} runs {_counted(p.b)} that rank {ra}'s does not"
    if p.how == "only_a":
        return f"rank {ra}'s {_phases(p.a)} runs {_counted(p.a)} that rank {rb}'s does not"
    if p.how == "size":
        x, y = p.a[0], p.b[0]
        return (
            f"{x.op} (group {x.group_label()}, {x.phase}) returns "
            f"{', '.join(_shape_text(s) for s in y.shapes)} {y.dtype or ''} on rank {rb} and "
            f"{', '.join(_shape_text(s) for s in x.shapes)} {x.dtype or ''} on rank {ra}"
        ).replace("  ", " ")
    return f"rank {rb}'s {_phases(p.b)} runs {_counted(p.b)} where rank {ra}'s runs {_counted(p.a)}"


# ---------------------------------------------------------------------------------------------
# generated code

_CODE_OP = re.compile(r"\b(" + "|".join(sorted(_OP_NAMESPACES, key=len, reverse=True)) + r")\.(\w+)")
_CODE_GROUP = re.compile(r"<group:[^>]*>")


def code_collectives(lines: Iterable[str]) -> list[tuple[str, tuple[str, ...]]]:
    """The collectives a rank's generated code calls, in order: (op, the groups its line names)
    from lines normalized by `diff.output_code` (groups written `<group:KEY>`). Waits are left
    out, as in a graph's sequence."""
    out = []
    for line in lines:
        for m in _CODE_OP.finditer(line):
            target = f"{m.group(1)}.{m.group(2)}"
            if is_communication_target(target):
                out.append((m.group(2), tuple(_CODE_GROUP.findall(line))))
    return out
