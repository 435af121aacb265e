"""inspector/diff/align.py on its own: which node of one graph is which node of the other.

Node lists are generated with every call distinct (each carries its own id literal), so the right
alignment is known: a list against itself matches every node to itself, a against b is b against
a turned round, and nodes inserted into (or deleted from) a copy are exactly the unmatched ones,
every other node matched to its copy. Parts built from the other side (`like=`, what a rank diff
does to share the pieces of equal rows) align as Parts built alone.

Symmetry holds where the evidence decides: a node whose argument count changed leaves a tie in the
gap match on shallow signatures, and the two directions may break it differently (seed 7, 7 calls,
5 inserted, one node given a third argument).
"""

from __future__ import annotations

import copy
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from graphtrain_inspect.inspector.diff.align import align_parts, align_rows
from graphtrain_inspect.inspector.diff.row_parts import Parts, freeze, same_frozen
from graphtrain_inspect.inspector.diff.sequence_match import lis, lis_of

_TARGETS = ("aten.add.Tensor", "aten.mul.Tensor", "aten.relu.default", "aten.view.default")


def _rows(rng: random.Random, n: int) -> list[dict]:
    """A placeholder, n calls (call i: inputs among the 4 nodes before it, id literal 1000 + i), the output."""
    rows = [{"name": "x", "op": "placeholder", "target": "x", "args": [], "kwargs": {}}]
    for i in range(n):
        refs = [{"n": rows[max(0, len(rows) - rng.randint(1, 4))]["name"]} for _ in range(rng.randint(1, 2))]
        rows.append({"name": f"n{i}", "op": "call_function", "target": rng.choice(_TARGETS), "args": [*refs, 1000 + i]})
    rows.append({"name": "output", "op": "output", "target": "output", "args": [[{"n": rows[-1]["name"]}]]})
    return rows


def _with_inserted(rng: random.Random, rows: list[dict], k: int) -> tuple[list[dict], set[int]]:
    """A copy of `rows` with k new calls (id 5000 + m) that nothing reads, each after a random node;
    and their indices in the copy."""
    out = copy.deepcopy(rows)
    for m in range(k):
        at = rng.randint(1, len(out) - 1)  # after the placeholder, before the output
        src = out[rng.randint(0, at - 1)]["name"]
        new = {"name": f"new{m}", "op": "call_function", "target": rng.choice(_TARGETS), "args": [{"n": src}, 5000 + m]}
        out.insert(at, new)
    return out, {i for i, r in enumerate(out) if r["name"].startswith("new")}


def _matched(a: list[dict], b: list[dict]) -> dict[int, int]:
    return {i: j for i, j in align_rows(a, b) if i is not None and j is not None}


graphs = st.builds(lambda seed, n: (random.Random(seed), n), st.integers(0, 2**32), st.integers(0, 60))


@settings(max_examples=60, deadline=None)
@given(graphs)
def test_a_list_against_itself_matches_every_node_to_itself(g):
    rng, n = g
    rows = _rows(rng, n)
    assert align_rows(rows, rows) == [(i, i) for i in range(len(rows))]
    assert align_rows(rows, copy.deepcopy(rows)) == [(i, i) for i in range(len(rows))]


@settings(max_examples=60, deadline=None)
@given(graphs, st.integers(1, 8))
def test_a_against_b_is_b_against_a_turned_round(g, k):
    rng, n = g
    a = _rows(rng, n)
    b, _ = _with_inserted(rng, a, k)
    # and one changed literal (the node's shape kept): matched or not, the same both ways
    b[len(b) // 2]["args"][-1] = 7
    assert _matched(b, a) == {j: i for i, j in _matched(a, b).items()}


@settings(max_examples=60, deadline=None)
@given(graphs, st.integers(1, 8))
def test_inserted_nodes_are_the_unmatched_ones(g, k):
    rng, n = g
    a = _rows(rng, n)
    b, inserted = _with_inserted(rng, a, k)
    kept = [j for j in range(len(b)) if j not in inserted]  # b's copies of a's nodes, in order
    assert _matched(a, b) == dict(enumerate(kept))
    merged = align_rows(a, b)
    assert {j for i, j in merged if i is None} == inserted
    assert [j for _, j in merged if j is not None] == list(range(len(b)))  # in b's order


@settings(max_examples=60, deadline=None)
@given(graphs, st.integers(1, 8))
def test_deleted_nodes_are_the_unmatched_ones(g, k):
    rng, n = g
    b = _rows(rng, n)
    a, deleted = _with_inserted(rng, b, k)  # a has nodes b lacks: deleted on the way to b
    kept = [i for i in range(len(a)) if i not in deleted]
    assert _matched(a, b) == {i: j for j, i in enumerate(kept)}
    assert {i for i, j in align_rows(a, b) if j is None} == deleted


@settings(max_examples=40, deadline=None)
@given(graphs, st.integers(0, 8))
def test_parts_made_like_the_other_side_align_the_same(g, k):
    """Parts(b, like=pa) shares pa's pieces for b's rows equal to a's (by position, or by name
    when the names differ in order): the alignment is the one of Parts made alone."""
    rng, n = g
    a = _rows(rng, n)
    b, _ = _with_inserted(rng, a, k)
    pa = Parts(a)
    alone = align_parts(pa, Parts(b))
    assert align_parts(pa, Parts(b, like=pa)) == alone
    assert align_parts(pa, Parts(copy.deepcopy(a), like=pa)) == {i: i for i in range(len(a))}


# values as rows hold them (JSON), with NaN, tuples and the string "nan", which freeze folds
_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_infinity=False)
    | st.sampled_from(["nan", "s0", "cpu"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["t", "shape", "device", "a"]), inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(_VALUES, _VALUES)
def test_same_frozen_says_what_freeze_says(x, y):
    """The node comparison's value test (`same_frozen`) is `freeze(x) == freeze(y)` for any pair,
    equal or not, of the same shape or not."""
    assert same_frozen(x, y) == (freeze(x) == freeze(y))
    assert same_frozen(x, copy.deepcopy(x))


def _moved(order: list[int], moves: list[tuple[int, int, int]]) -> list[int]:
    """`order` with blocks moved: each (start, length, to) cuts a block out and puts it back at `to`."""
    out = list(order)
    for start, length, to in moves:
        if not out:
            break
        start %= len(out)
        block = out[start : start + length]
        del out[start : start + length]
        to %= len(out) + 1
        out[to:to] = block
    return out


@settings(max_examples=500, deadline=None)
@given(
    st.integers(0, 90),
    st.lists(st.tuples(st.integers(0, 90), st.integers(1, 30), st.integers(0, 90)), max_size=5),
    st.lists(st.integers(0, 300), max_size=8),
    st.booleans(),
)
def test_longest_run_searched_between_cuts_is_patience_sortings(n, moves, extra, halve):
    """`lis` (searched only between the places where every pair before is below every pair
    after) is the very run patience sorting finds over all the pairs (`lis_of`): pairs in order
    with blocks moved, as a pass that moves nodes leaves them, stray values, and equal values."""
    js = _moved(list(range(0, 3 * n, 3)), moves)
    js += [3 * x + 1 for x in extra]
    if halve:
        js = [j // 2 for j in js]  # ties: equal second coordinates, which are not increasing
    pairs = list(enumerate(js))
    run = lis(pairs)
    assert run == lis_of(pairs)
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(run, run[1:]))
