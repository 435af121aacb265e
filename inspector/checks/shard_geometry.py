"""How a dimension splits over ranks: a literal that is each rank's own chunk of a dimension.

A dimension the mesh does not divide splits unevenly (torch.chunk, DTensor's Shard: chunks of
ceil(S / n), the last short or empty; tensor_split: the first S % n chunks one longer), so ranks
that trace their own graphs hold different literals that are all right: a local size, the index
of their own chunk of a split, the bounds of a slice taking it. Such a literal is the rank's own
value, whatever form a pass gives it (`getitem(split(t, 4, 1), 1)` and `slice(t, 1, 4, 7)` take
the same chunk). A slice whose bounds are one rank's own chunk and no chunk of the dimension on
another rank (`rank * local_rows` where the split is uneven) is the bug, and the chunk it should
have taken is known.

Pure functions over node rows (dicts) and rank-derived vectors; rank_baked_constant reads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from graphtrain_inspect.capture.shared.logformat import NodeRow
from graphtrain_inspect.inspector.read.graphmodel import is_ref

SPLIT_OPS = ("aten.split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default", "aten.tensor_split.sections")
SLICE_OPS = ("aten.slice.Tensor", "aten.narrow.default")
_SHAPE_ELEMENT = re.compile(r"args\[\d\]\[\d+\]")  # an element of a shape argument (view, expand, ...)
HOW = ("chunk", "tensor_split")  # torch.chunk and DTensor's Shard; tensor_split


def chunk_of(size: int, n: int, c: int, how: str = "chunk") -> tuple[int, int]:
    """[start, end) of chunk `c` of a dimension of `size` split in `n`."""
    if how == "tensor_split":
        q, r = divmod(size, n)
        start = c * q + min(c, r)
        return start, start + q + (1 if c < r else 0)
    s = -(-size // n)
    return min(c * s, size), min((c + 1) * s, size)


def _int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _shape(by_name: dict[str, NodeRow], leaf: Any) -> list | None:
    if is_ref(leaf):
        row = by_name.get(leaf["n"])
        v = row.get("val") if row is not None else None
        if isinstance(v, dict) and v.get("t") == "tensor" and isinstance(v.get("shape"), list):
            return v["shape"]
    return None


def _dim_size(by_name: dict[str, NodeRow], leaf: Any, dim: Any) -> int | None:
    shape = _shape(by_name, leaf)
    if shape is None or not _int(dim) or not -len(shape) <= dim < len(shape):
        return None
    size = shape[dim]
    return size if _int(size) else None


def dim_sizes(rows: list[NodeRow]) -> set[int]:
    """Every concrete dimension size of a tensor in a graph (the dimensions a split can be of)."""
    shapes = []
    for row in rows:
        v = row.get("val")
        if isinstance(v, dict) and v.get("t") == "tensor":
            shapes.append(v.get("shape") or ())
    # decoded JSON: an int is of type int exactly (a bool is not)
    return {x for shape in shapes for x in shape if type(x) is int}


@dataclass
class RankNode:
    """A node on one rank: its row, its graph's rows by name, and the graph's dimension sizes
    (`dim_sizes`; or the function that gives them, called when a judgement first needs them: one
    pass over every row of the graph, which most literals are judged without)."""

    row: NodeRow
    by_name: dict[str, NodeRow]
    _sizes: set[int] | Callable[[], set[int]] = field(default_factory=set)

    @property
    def sizes(self) -> set[int]:
        if callable(self._sizes):
            self._sizes = self._sizes()
        return self._sizes


@dataclass
class Verdict:
    """`own`: every rank's literal is its own chunk's (right per rank); `wrong`: a slice that is
    no chunk of the dimension on some rank, with the chunk it should have taken."""

    own: bool
    message: str
    evidence: dict[str, Any]


def _split_chunk(node: RankNode) -> tuple[int, int, int] | None:
    """(chunk index, pieces, dimension size) a `getitem(split(t, s, d), i)` takes."""
    row = node.row
    args = row.get("args") or []
    if str(row.get("target")) != "operator.getitem" or len(args) < 2 or not is_ref(args[0]) or not _int(args[1]):
        return None
    split = node.by_name.get(args[0]["n"])
    if split is None:
        return None
    sargs = split.get("args") or []
    kwargs = split.get("kwargs") or {}
    target = str(split.get("target"))
    if target not in SPLIT_OPS or len(sargs) < 2:
        return None
    dim = sargs[2] if len(sargs) > 2 else kwargs.get("dim", 0)
    size = _dim_size(node.by_name, sargs[0], dim)
    if size is None or size == 0:
        return None
    if target == "aten.split.Tensor" and _int(sargs[1]) and sargs[1] > 0:
        pieces = -(-size // sargs[1])
        if chunk_of(size, pieces, 0)[1] != sargs[1]:
            return None  # not the split torch.chunk makes
    elif target in ("aten.chunk.default", "aten.tensor_split.sections") and _int(sargs[1]):
        pieces = sargs[1]
    else:
        return None
    return args[1], pieces, size


def _slice_bounds(node: RankNode) -> tuple[int, int, int] | None:
    """(start, end, dimension size) a slice/narrow with literal bounds takes (end clipped)."""
    row = node.row
    args = row.get("args") or []
    target = str(row.get("target"))
    if target not in SLICE_OPS or len(args) < 4 or not all(_int(x) for x in args[1:4]):
        return None
    size = _dim_size(node.by_name, args[0], args[1])
    if size is None:
        return None
    if target == "aten.narrow.default":
        start, end = args[2], args[2] + args[3]
    else:
        start, end = args[2], args[3]
    if start < 0:
        start += size
    if end < 0:
        end += size
    return start, min(end, size), size


def _splits(vectors: dict[str, dict[int, int]], pieces: dict[str, int], ranks: list[int]):
    """(vector name, n) of each rank-derived vector that says which chunk a rank holds."""
    for name, vec in vectors.items():
        n = pieces.get(name)
        if n and n > 1 and all(r in vec and 0 <= vec[r] < n for r in ranks):
            yield name, vec, n


def may_judge(where: str, target: Any, values: dict[int, Any]) -> bool:
    """Whether `judge` can give a verdict on a literal at `where` of a node whose target (on the
    lowest rank) is `target`: a split's chunk index, a slice's bounds, an int element of a shape.
    Decided without the graphs' rows, so a literal that is none of these costs no table read."""
    t = str(target)
    if where == "args[1]" and t == "operator.getitem":
        return True
    if where in ("args[2]", "args[3]") and t in SLICE_OPS:
        return True
    return bool(_SHAPE_ELEMENT.fullmatch(where)) and all(_int(v) for v in values.values())


def judge(
    where: str,
    nodes: dict[int, RankNode],
    values: dict[int, Any],
    vectors: dict[str, dict[int, int]],
    pieces: dict[str, int],
) -> Verdict | None:
    """What the literal at `where` of one aligned node, differing across ranks, says about chunks;
    None where it is not about a chunk of a dimension."""
    ranks = sorted(nodes)
    if len(ranks) < 2 or any(r not in values for r in ranks):
        return None
    if where == "args[1]":
        chunks = {r: c for r in ranks if (c := _split_chunk(nodes[r])) is not None}
        if len(chunks) == len(ranks):
            return _judge_index(chunks, vectors, pieces, ranks)
    if where in ("args[2]", "args[3]"):
        bounds = {r: b for r in ranks if (b := _slice_bounds(nodes[r])) is not None}
        if len(bounds) == len(ranks):
            return _judge_slice(where, bounds, vectors, pieces, ranks)
    if _SHAPE_ELEMENT.fullmatch(where) and all(_int(v) for v in values.values()):
        return _judge_length(where, nodes, values, vectors, pieces, ranks)
    return None


def _judge_index(got: dict[int, tuple[int, int, int]], vectors, pieces, ranks) -> Verdict | None:
    for name, vec, n in _splits(vectors, pieces, ranks):
        if all(got[r][1] == n and got[r][0] == vec[r] for r in ranks):
            size = got[ranks[0]][2]
            return Verdict(
                True,
                f"each rank takes its own chunk ({name}) of a dimension of {size} split in {n}",
                {"chunk_of": name, "chunks": n, "dim_size": size},
            )
    return None


def _judge_slice(where: str, got: dict[int, tuple[int, int, int]], vectors, pieces, ranks) -> Verdict | None:
    sizes = {got[r][2] for r in ranks}
    if len(sizes) != 1:
        return None
    size = sizes.pop()
    bounds = {r: got[r][:2] for r in ranks}
    best = None
    for name, vec, n in _splits(vectors, pieces, ranks):
        for how in HOW:
            own = {r: chunk_of(size, n, vec[r], how) for r in ranks}
            right = [r for r in ranks if bounds[r] == own[r]]
            if len(right) == len(ranks):
                return Verdict(
                    True,
                    f"each rank slices its own chunk ({name}) of a dimension of {size} split in {n}",
                    {"chunk_of": name, "chunks": n, "dim_size": size, "split": how},
                )
            if right and best is None:
                best = (name, vec, n, how, own, right)
    if best is None:
        return None
    name, vec, n, how, own, right = best
    chunks = {chunk_of(size, n, c, how) for c in range(n)}
    wrong = [r for r in ranks if r not in right]
    if any(bounds[r] in chunks for r in wrong):
        return None  # another rank's chunk: a rank-baked literal, not a bound of no chunk
    first = wrong[0]
    s, e = bounds[first]
    es, ee = own[first]
    return Verdict(
        False,
        f"rank {first} slices [{s}, {e}) of a dimension of {size} split in {n} ({name}): no chunk of it; "
        f"its own chunk is [{es}, {ee})",
        {
            "chunk_of": name,
            "chunks": n,
            "dim_size": size,
            "split": how,
            "bounds": {str(r): list(bounds[r]) for r in ranks},
            "expected": {str(r): list(own[r]) for r in ranks},
        },
    )


def _judge_length(where: str, nodes: dict[int, RankNode], values, vectors, pieces, ranks) -> Verdict | None:
    """A local size: each rank's value is the length of its own chunk of a dimension of S split
    in n, where S is the size of some dimension of a tensor the graphs hold on every rank."""
    common = set.intersection(*(nodes[r].sizes for r in ranks))
    got = _own_lengths(values, common, vectors, pieces, ranks, times=False)
    if got is None:
        return None
    name, n, size, how, _ = got
    return Verdict(
        True,
        f"each rank's local size of a dimension of {size} split in {n} ({name})",
        {"chunk_of": name, "chunks": n, "dim_size": size, "split": how},
    )


def scaled_local_size(values: dict[int, Any], sizes: set[int], vectors, pieces, ranks) -> Verdict | None:
    """A size in code each rank generated for itself: each rank's value is k times the length of
    its own chunk of a dimension of S split in n (k >= 1, the same on every rank: the other
    dimensions of the local tensor a kernel walks flat), where S is a dimension size the ranks'
    graphs all hold and the chunks differ in length (an uneven split)."""
    if not all(type(values[r]) is int and values[r] > 0 for r in ranks):
        return None
    got = _own_lengths(values, sizes, vectors, pieces, ranks, times=True)
    if got is None:
        return None
    name, n, size, how, k = got
    times = "" if k == 1 else f" times {k}"
    return Verdict(
        True,
        f"each rank's local size{times} of a dimension of {size} split in {n} ({name})",
        {"chunk_of": name, "chunks": n, "dim_size": size, "split": how, "times": k},
    )


def _own_lengths(values, sizes: set[int], vectors, pieces, ranks, *, times: bool) -> tuple | None:
    """(vector name, n, S, how, k) where each rank's value is k times the length of its own chunk
    of a dimension of S split in n: k is 1, or with `times` any whole k >= 1 where the chunks
    differ in length."""
    for name, vec, n in _splits(vectors, pieces, ranks):
        for size in sorted(sizes):
            for how in HOW:
                lengths = {r: (lambda b: b[1] - b[0])(chunk_of(size, n, vec[r], how)) for r in ranks}
                k = _multiple(values, lengths, ranks) if times else 1
                if k is not None and all(values[r] == k * lengths[r] for r in ranks):
                    return name, n, size, how, k
    return None


def _multiple(values, lengths: dict[int, int], ranks) -> int | None:
    """The whole k >= 1 with values = k x lengths on the first rank, for chunks of uneven length."""
    if len(set(lengths.values())) == 1 or min(lengths.values()) <= 0:
        return None
    k, rest = divmod(values[ranks[0]], lengths[ranks[0]])
    return k if rest == 0 and k >= 1 else None


# comparisons of an index tensor with a literal: the bound each sets ([lower, upper) of a range)
_BOUND_AT = {"aten.lt.Scalar": 0, "aten.ge.Scalar": 0, "aten.le.Scalar": 1, "aten.gt.Scalar": 1}
_BOUND_AT.update({k.replace(".Scalar", ".Tensor"): v for k, v in _BOUND_AT.items()})
_OFFSET_SIGN = {"aten.sub.Tensor": 1, "aten.sub.Scalar": 1, "aten.add.Tensor": -1, "aten.add.Scalar": -1}


@dataclass
class IndexRange:
    """An integer tensor compared with two literal bounds and offset by the lower one: the range
    of the dimension it indexes that this graph handles (`ids - L` where `L <= ids < U`)."""

    tensor: str
    lower: int
    upper: int
    nodes: list[str]  # the comparisons and offsets, in graph order


def index_ranges(rows: list[NodeRow]) -> list[IndexRange]:
    by_name = {r["name"]: r for r in rows}
    bounds: dict[str, dict[int, list[str]]] = {}
    offsets: dict[str, dict[int, list[str]]] = {}
    for row in rows:
        t = str(row.get("target"))
        args = row.get("args") or []
        if len(args) < 2 or not is_ref(args[0]) or not _int(args[1]):
            continue
        src = by_name.get(args[0]["n"])
        v = src.get("val") if src is not None else None
        if not (isinstance(v, dict) and v.get("t") == "tensor" and str(v.get("dtype", "")).startswith(("int", "uint"))):
            continue
        if t in _BOUND_AT:
            bounds.setdefault(args[0]["n"], {}).setdefault(args[1] + _BOUND_AT[t], []).append(row["name"])
        elif t in _OFFSET_SIGN and len(args) == 2:
            offsets.setdefault(args[0]["n"], {}).setdefault(_OFFSET_SIGN[t] * args[1], []).append(row["name"])
    out = []
    for x, by_bound in bounds.items():
        for lower in sorted(by_bound):
            if lower not in offsets.get(x, {}):
                continue  # a range check alone (no offset into a shard) says nothing of a split
            for upper in sorted(b for b in by_bound if b > lower):
                nodes = [*by_bound[lower], *by_bound[upper], *offsets[x][lower]]
                order = {r["name"]: i for i, r in enumerate(rows)}
                out.append(IndexRange(x, lower, upper, sorted(nodes, key=order.__getitem__)))
    return out


def chunk_dimension(lower: int, upper: int, n: int, c: int) -> tuple[int, str] | None:
    """(size, split) of a dimension whose chunk `c` of `n` is [lower, upper), if any."""
    s = upper - lower
    if s <= 0 or not 0 <= c < n:
        return None
    lengths = {s} | ({lower // c} if c and lower % c == 0 else set())
    for how in HOW:
        for length in sorted(lengths):
            # the even split first: a range of 16 at chunk 0 of 2 is of 32 (31 splits so too)
            for size in sorted(
                range(max(1, n * (length - 1)), n * (length + 1) + 1), key=lambda x: abs(x - n * length)
            ):
                if chunk_of(size, n, c, how) == (lower, upper):
                    return size, how
    return None


def takes_chunk(rows: list[NodeRow], size: int, n: int, c: int) -> bool:
    """Whether a graph takes chunk `c` of `n` of some dimension of `size`, in any form: a split's
    chunk or a slice of its bounds (torch.chunk's or tensor_split's)."""
    by_name = {r["name"]: r for r in rows}
    bounds = {chunk_of(size, n, c, how) for how in HOW}
    for row in rows:
        node = RankNode(row, by_name)
        got = _split_chunk(node)
        if got is not None and got == (c, n, size):
            return True
        sl = _slice_bounds(node)
        if sl is not None and sl[2] == size and sl[:2] in bounds:
            return True
    return False
