"""Which literals are each rank's own chunk of a dimension (uneven splits included)."""

from graphtrain_inspect.inspector.checks.shard_geometry import (
    RankNode,
    chunk_dimension,
    chunk_of,
    dim_sizes,
    index_ranges,
    judge,
)

RANK = {"rank": {0: 0, 1: 1}}
PIECES = {"rank": 2}


def tensor(name, shape, target="aten.mm.default", args=None):
    return {"name": name, "target": target, "args": args or [], "val": {"t": "tensor", "shape": shape}}


def ref(name):
    return {"n": name}


def graph(*rows):
    by_name = {r["name"]: r for r in rows}
    return by_name, dim_sizes(list(rows))


def node(rows, name):
    by_name, sizes = graph(*rows)
    return RankNode(by_name[name], by_name, sizes)


def test_chunks_of_an_uneven_dimension():
    assert [chunk_of(7, 2, c) for c in range(2)] == [(0, 4), (4, 7)]
    assert [chunk_of(5, 4, c) for c in range(4)] == [(0, 2), (2, 4), (4, 5), (5, 5)]  # torch.chunk: last empty
    assert [chunk_of(5, 4, c, "tensor_split") for c in range(4)] == [(0, 2), (2, 3), (3, 4), (4, 5)]


def _split_getitem(index):
    return [
        tensor("grad", [5, 7]),
        {"name": "split", "target": "aten.split.Tensor", "args": [ref("grad"), 4, 1], "val": None},
        tensor("getitem", [5, 4 - index], "operator.getitem", [ref("split"), index]),
    ]


def test_own_chunk_index_of_a_split_is_right():
    nodes = {r: node(_split_getitem(r), "getitem") for r in (0, 1)}
    v = judge("args[1]", nodes, {0: 0, 1: 1}, RANK, PIECES)
    assert v is not None and v.own and v.evidence["dim_size"] == 7
    # chunk 1 on rank 0 and chunk 0 on rank 1: no rank's own chunk
    swapped = {r: node(_split_getitem(1 - r), "getitem") for r in (0, 1)}
    assert judge("args[1]", swapped, {0: 1, 1: 0}, RANK, PIECES) is None


def _slice(start, end):
    return [tensor("grad", [5, 7]), tensor("sl", [5, end - start], "aten.slice.Tensor", [ref("grad"), 1, start, end])]


def test_own_chunk_as_a_slice_is_right_and_a_bound_of_no_chunk_is_named():
    right = {0: node(_slice(0, 4), "sl"), 1: node(_slice(4, 7), "sl")}
    v = judge("args[2]", right, {0: 0, 1: 4}, RANK, PIECES)
    assert v is not None and v.own
    wrong = {0: node(_slice(0, 4), "sl"), 1: node(_slice(3, 6), "sl")}
    v = judge("args[2]", wrong, {0: 0, 1: 3}, RANK, PIECES)
    assert v is not None and not v.own
    assert "rank 1 slices [3, 6)" in v.message and "its own chunk is [4, 7)" in v.message
    assert v.evidence["expected"] == {"0": [0, 4], "1": [4, 7]}
    # the other rank's chunk is a rank-baked literal, not a bound of no chunk: left to the vectors
    other = {0: node(_slice(0, 4), "sl"), 1: node(_slice(0, 4), "sl")}
    assert judge("args[2]", other, {0: 0, 1: 0}, RANK, PIECES) is None


def test_local_sizes_need_the_dimension_in_the_graph():
    def view(rows):
        return [tensor("w", [rows, 8]), tensor("v", [rows, 8], "aten.view.default", [ref("w"), [rows, 8]])]

    nodes = {0: node([*view(4), tensor("t", [5, 7])], "v"), 1: node([*view(3), tensor("t", [5, 7])], "v")}
    v = judge("args[1][0]", nodes, {0: 4, 1: 3}, RANK, PIECES)
    assert v is not None and v.own and v.evidence["dim_size"] == 7
    # no tensor of 7 along any dimension: nothing says the 4 and 3 are chunks of one
    bare = {0: node(view(4), "v"), 1: node(view(3), "v")}
    assert judge("args[1][0]", bare, {0: 4, 1: 3}, RANK, PIECES) is None
    # a size that grows with the rank is no chunk length
    grows = {0: node([*view(3), tensor("t", [5, 7])], "v"), 1: node([*view(4), tensor("t", [5, 7])], "v")}
    assert judge("args[1][0]", grows, {0: 3, 1: 4}, RANK, PIECES) is None


def _vocab_rows(lower, upper, offset=True):
    ids = {"name": "ids", "target": "ids", "args": [], "val": {"t": "tensor", "shape": [6], "dtype": "int64"}}
    w = tensor("w", [upper - lower, 4])
    rows = [
        ids,
        w,
        tensor("lt", [6], "aten.lt.Scalar", [ref("ids"), lower]),
        tensor("ge", [6], "aten.ge.Scalar", [ref("ids"), upper]),
    ]
    if offset:
        rows.append(tensor("sub", [6], "aten.sub.Tensor", [ref("ids"), lower]))
    return rows


def test_index_ranges_need_both_bounds_and_the_offset():
    (rng,) = index_ranges(_vocab_rows(0, 16))
    assert (rng.tensor, rng.lower, rng.upper, rng.nodes) == ("ids", 0, 16, ["lt", "ge", "sub"])
    assert index_ranges(_vocab_rows(0, 16, offset=False)) == []  # a range check alone
    floats = [{**r, "val": {**r["val"], "dtype": "float32"}} if r["name"] == "ids" else r for r in _vocab_rows(0, 16)]
    assert index_ranges(floats) == []  # not indices


def test_chunk_dimension_finds_the_split_a_range_is_a_chunk_of():
    assert chunk_dimension(0, 16, 2, 0) == (32, "chunk")  # the even split first
    assert chunk_dimension(16, 32, 2, 1) == (32, "chunk")
    assert chunk_dimension(4, 7, 2, 1) == (7, "chunk")  # the short last chunk
    assert chunk_dimension(2, 9, 2, 1) is None  # chunk 1 of 2 starts halfway
    assert chunk_dimension(16, 32, 2, 0) is None  # chunk 1's range on the rank of chunk 0
