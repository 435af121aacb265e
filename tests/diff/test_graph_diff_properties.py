"""The node-table diff against what is known to be true.

Graphs are generated with every node distinct (each call carries its own id literal), then edited
in ways whose right answer is known by construction: literals changed at chosen nodes, nodes
inserted or deleted, every name shifted (as a pass shifting name counters does). A correct diff
reports exactly those nodes. A small quadratic reference (an LCS over node contents, with inputs
named by the id of the node they refer to) says the same thing a second way; and whatever the
input, any diff must partition both graphs' nodes and call `same` only nodes that are the same.
"""

from __future__ import annotations

import copy
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from graphtrain_inspect.inspector.diff.graph_diff import diff_tables
from graphtrain_inspect.inspector.diff.node_diff import GraphDiff
from graphtrain_inspect.inspector.read.graphmodel import GraphTables, SubGraph

_TARGETS = ("aten.add.Tensor", "aten.mul.Tensor", "aten.relu.default", "aten.view.default", "aten.cat.default")


def _graph(rng: random.Random, n: int) -> list[dict]:
    """A root graph of n calls; call i carries the id literal 1000 + i, so no two nodes look alike."""
    rows = [{"name": "x", "op": "placeholder", "target": "x", "args": [], "kwargs": {}}]
    for i in range(n):
        refs = [{"n": rows[max(0, len(rows) - rng.randint(1, 4))]["name"]} for _ in range(rng.randint(1, 2))]
        rows.append(
            {
                "name": f"n{i}",
                "op": "call_function",
                "target": rng.choice(_TARGETS),
                "args": [*refs, 1000 + i, rng.choice((0, 1, 2.5, "sum"))],
                "kwargs": {},
            }
        )
    rows.append(
        {"name": "output", "op": "output", "target": "output", "args": [[{"n": rows[-1]["name"]}]], "kwargs": {}}
    )
    return rows


def _tables(gid: str, rows: list[dict]) -> GraphTables:
    return GraphTables(gid, [SubGraph("", None, rows)])


def _calls(rows):
    return [r for r in rows if r["op"] == "call_function"]


def _id(row: dict):
    return row["args"][-2] if row["op"] == "call_function" else row["name"]


def reference_lcs(a: list[dict], b: list[dict]) -> tuple[int, int, int]:
    """(same, only in a, only in b): an LCS of the nodes' contents, inputs named by their node's id.
    Quadratic and plain on purpose: it is the second opinion."""

    def content(rows):
        ids = {r["name"]: _id(r) for r in rows}

        def key(v):
            if isinstance(v, dict) and set(v) == {"n"}:
                return ("ref", ids.get(v["n"]))
            if isinstance(v, list):
                return tuple(key(x) for x in v)
            return ("lit", repr(v))

        return [(r["op"], r["target"], key(r["args"]), key(sorted(r["kwargs"].items()))) for r in rows]

    ca, cb = content(a), content(b)
    m = [[0] * (len(cb) + 1) for _ in range(len(ca) + 1)]
    for i in range(len(ca) - 1, -1, -1):
        for j in range(len(cb) - 1, -1, -1):
            m[i][j] = m[i + 1][j + 1] + 1 if ca[i] == cb[j] else max(m[i + 1][j], m[i][j + 1])
    same = m[0][0]
    return same, len(ca) - same, len(cb) - same


def assert_well_formed(d: GraphDiff, a: list[dict], b: list[dict]) -> None:
    """Any diff: every node of a and of b appears exactly once, and `same` pairs are the same node
    (op, target, kwargs, literals equal; inputs paired with each other)."""
    nodes = [n for s in d.subgraphs for n in s.nodes]
    a_seen = [n.a["name"] for n in nodes if n.a is not None]
    b_seen = [n.b["name"] for n in nodes if n.b is not None]
    assert sorted(a_seen) == sorted(r["name"] for r in a)
    assert sorted(b_seen) == sorted(r["name"] for r in b)
    pair = {n.a["name"]: n.b["name"] for n in nodes if n.a is not None and n.b is not None}
    for n in nodes:
        assert (n.status in ("same", "changed")) == (n.a is not None and n.b is not None)
        if n.status == "same":

            def mapped(v):
                if isinstance(v, dict) and set(v) == {"n"}:
                    return {"n": pair.get(v["n"], "<unpaired>")}
                return [mapped(x) for x in v] if isinstance(v, list) else v

            assert (n.a["op"], n.a["target"], mapped(n.a["args"]), n.a["kwargs"]) == (
                n.b["op"],
                n.b["target"],
                n.b["args"],
                n.b["kwargs"],
            )


def counts(d: GraphDiff) -> tuple[int, int, int]:
    c = d.counts
    return c["changed"], c["added"], c["removed"]


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 80), k=st.integers(0, 5))
def test_changed_literals_are_exactly_the_changed_nodes(seed, size, k):
    rng = random.Random(seed)
    a = _graph(rng, size)
    b = copy.deepcopy(a)
    edited = rng.sample(range(1, size + 1), min(k, size))
    for i in edited:
        b[i]["args"][-1] = f"edited{i}"  # a literal no generated node has
    d = diff_tables(_tables("a", a), _tables("b", b))
    assert_well_formed(d, a, b)
    assert counts(d) == (len(edited), 0, 0)
    got = {n.a["name"]: n.args for n in d.changes()}
    assert got == {a[i]["name"]: [(f"args[{len(a[i]['args']) - 1}]", a[i]["args"][-1], f"edited{i}")] for i in edited}


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    size=st.integers(2, 80),
    ins=st.integers(0, 4),
    dels=st.integers(0, 4),
    rename=st.booleans(),
)
def test_inserted_and_deleted_nodes_are_exactly_added_and_removed(seed, size, ins, dels, rename):
    rng = random.Random(seed)
    a = _graph(rng, size)
    b = copy.deepcopy(a)
    # delete calls nothing else uses (their users would change too), then insert fresh ones
    used = {v["n"] for r in b for v in r["args"] if isinstance(v, dict)} | {v["n"] for v in b[-1]["args"][0]}
    dead = [i for i in range(1, len(b) - 1) if b[i]["name"] not in used]
    gone = rng.sample(dead, min(dels, len(dead)))
    b = [r for i, r in enumerate(b) if i not in set(gone)]
    for j in range(ins):
        at = rng.randint(1, len(b) - 1)
        b.insert(
            at,
            {
                "name": f"ins{j}",
                "op": "call_function",
                "target": "aten.relu.default",
                "args": [{"n": b[at - 1]["name"]}, 5000 + j],
                "kwargs": {},
            },
        )
    if rename:  # every call's name shifted, the structure untouched
        names = {r["name"]: r["name"] + "_7" for r in _calls(b)}

        def ren(v):
            if isinstance(v, dict) and set(v) == {"n"}:
                return {"n": names.get(v["n"], v["n"])}
            return [ren(x) for x in v] if isinstance(v, list) else v

        b = [{**r, "name": names.get(r["name"], r["name"]), "args": ren(r["args"])} for r in b]
    d = diff_tables(_tables("a", a), _tables("b", b))
    assert_well_formed(d, a, b)
    assert counts(d) == (0, ins, len(gone))
    assert reference_lcs(a, b) == (len(a) - len(gone), len(gone), ins)
    assert sorted(n.b["args"][-1] for n in d.changes() if n.status == "added") == [5000 + j for j in range(ins)]


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 40), edits=st.integers(0, 6))
def test_any_edit_gives_a_well_formed_diff(seed, size, edits):
    """Edits with no single right answer (targets swapped, nodes duplicated, arity changed): still a
    partition of both graphs, and `same` only for nodes that are the same."""
    rng = random.Random(seed)
    a = _graph(rng, size)
    b = copy.deepcopy(a)
    for _ in range(edits):
        i = rng.randrange(1, len(b) - 1)
        k = rng.random()
        if k < 0.4:
            b[i]["target"] = rng.choice([t for t in _TARGETS if t != b[i]["target"]])
        elif k < 0.7:
            b.insert(i, {**copy.deepcopy(b[i]), "name": f"dup{rng.randrange(10**6)}"})
        else:
            b[i]["args"] = b[i]["args"] + [rng.choice((0, 1, None))]
    d = diff_tables(_tables("a", a), _tables("b", b))
    assert_well_formed(d, a, b)
    assert d.empty == (a == b)  # edits can undo each other (a target changed and changed back)


def test_identical_graphs_diff_empty():
    rng = random.Random(3)
    a = _graph(rng, 500)
    assert diff_tables(_tables("a", a), _tables("b", copy.deepcopy(a))).empty


def test_a_large_gap_is_matched_by_a_longest_common_subsequence():
    """A gap past difflib's limit (here 700 x 600 rows left between two anchors) is matched by a
    compiled LCS: as many pairs as the quadratic reference finds, in order on both sides, each of
    equal signatures."""
    from graphtrain_inspect.inspector.diff import sequence_match

    rng = random.Random(7)
    sa = [rng.randrange(6) for _ in range(700)]
    sb = [rng.randrange(6) for _ in range(600)]
    assert len(sa) * len(sb) > sequence_match.DIFFLIB_LIMIT
    ia, ib = list(range(100, 800)), list(range(50, 650))  # the gap's rows, away from 0
    xa, xb = [0] * 100 + sa, [0] * 50 + sb
    out: list[tuple[int, int]] = []
    sequence_match.match_gap(xa, xb, ia, ib, out)
    assert all(xa[i] == xb[j] for i, j in out)
    assert all(i1 < i2 and j1 < j2 for (i1, j1), (i2, j2) in zip(out, out[1:]))
    m = [[0] * (len(sb) + 1) for _ in range(len(sa) + 1)]
    for i in range(len(sa) - 1, -1, -1):
        for j in range(len(sb) - 1, -1, -1):
            m[i][j] = m[i + 1][j + 1] + 1 if sa[i] == sb[j] else max(m[i + 1][j], m[i][j + 1])
    assert len(out) == m[0][0]
