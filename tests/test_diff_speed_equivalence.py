"""The fast node-table diff (inspector/align.py, inspector/diff.py) gives exactly what the plain one
gave (tests/diff_reference.py, the code before it was made fast): same alignment, same statuses,
same changes, on real captures and on random graphs built to hit the fast paths' edges (rows
equal across the sides, dict literals, NaN, dangling refs, duplicate names, collectives with
group names, own-device literals)."""

from __future__ import annotations

import copy
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from inspector import diff as gdiff
from inspector.capture_index import open_capture
from inspector.graphmodel import GraphTables, SubGraph
from inspector.normalize import GraphNormalizer, RankContext
from inspector.stages import StageIndex
from tests.diff_reference import reference_diff_tables


def fingerprint(d: gdiff.GraphDiff):
    subs = [(s.path, s.status, [(n.status, n.subgraph, n.names, n.args, n.meta, n.structural) for n in s.nodes]) for s in d.subgraphs]
    return subs, d.to_json(), d.empty, d.structural, d.counts


def same_as_reference(a: GraphTables, b: GraphTables, ctx_a=None, ctx_b=None, **kw) -> None:
    """The fast diff (normalizers built as rank diffs build them) against the reference."""
    na = gdiff.graph_normalizer(a, ctx_a) if ctx_a is not None else None
    nb = gdiff.graph_normalizer(b, ctx_b) if ctx_b is not None else None
    ra = GraphNormalizer(a, ctx_a) if ctx_a is not None else None
    rb = GraphNormalizer(b, ctx_b) if ctx_b is not None else None
    for n, r in ((na, ra), (nb, rb)):
        if n is not None:
            assert list(n.ordinals.items()) == list(r.ordinals.items())
    fast = gdiff.diff_tables(a, b, norm_a=na, norm_b=nb, **kw)
    ref = reference_diff_tables(a, b, na=ra, nb=rb, **kw)
    assert fingerprint(fast) == fingerprint(ref)


def _capture_pairs(path, cross: int = 40):
    """Every pass diff on every rank, every stage across the first and last rank, and `cross`
    random pairs of graphs (any two, any ranks)."""
    cap = open_capture(str(path))
    graphs = {}
    for r in cap.ranks:
        for p in cap.passes(r):
            before = cap.node_table(r, p.before) if p.before else None
            for gid in p.after.values():
                after = cap.node_table(r, gid)
                if before is None or after is None:
                    continue
                graphs[(r, p.before)], graphs[(r, gid)] = before, after
                for kw in ({}, {"meta": False}, {"stack": True}):
                    yield before, after, None, None, kw
    idx = StageIndex(cap)
    ra, rb = cap.ranks[0], cap.ranks[-1]
    for st_ in idx.by_rank[ra]:
        stages = idx.across(st_.key)
        if rb in stages:
            ga, gb = stages[ra].gid, stages[rb].gid
            ta, tb = cap.node_table(ra, ga), cap.node_table(rb, gb)
            if ta is not None and tb is not None:
                yield ta, tb, gdiff.rank_context(cap, ra, ga), gdiff.rank_context(cap, rb, gb), {}
    rng = random.Random(0)
    keys = sorted(graphs, key=str)
    for _ in range(cross if len(keys) > 1 else 0):
        (r1, g1), (r2, g2) = rng.sample(keys, 2)
        ctx = (gdiff.rank_context(cap, r1, g1), gdiff.rank_context(cap, r2, g2)) if rng.random() < 0.5 else (None, None)
        yield graphs[(r1, g1)], graphs[(r2, g2)], *ctx, {}


def test_fast_diff_equals_reference_on_a_capture(sample_capture):
    n = 0
    for a, b, ca, cb, kw in _capture_pairs(sample_capture("rank-baked")):
        same_as_reference(a, b, ca, cb, **kw)
        n += 1
    assert n > 50


def test_fast_diff_equals_reference_on_the_small_capture(tui_small_capture):
    n = 0
    for a, b, ca, cb, kw in _capture_pairs(tui_small_capture):
        same_as_reference(a, b, ca, cb, **kw)
        n += 1
    assert n > 10


# ---------------------------------------------------------------------------------------------
# random graphs and edits

_TARGETS = ("aten.add.Tensor", "aten.mul.Tensor", "aten.relu.default", "aten.view.default", "aten.cat.default",
            "_c10d_functional.all_reduce.default", "aten.full.default", "aten.to.dtype_layout")
_LITERALS = (0, 1, True, 1.0, -0.0, 0.0, float("nan"), None, "cuda:0", "cuda:1", "cpu", "sum", "1", "2", "x",
             {"dev": "cuda:0"}, {"dev": "cuda:1"}, {"dtype": "float32"}, {"float": "inf"}, [2, 3], [True, 1], [],
             {"dict": [["a", 1], [1, 2]]}, {"dict": [[True, 2], ["b", 1]]}, {"dict": [[1.0, 2]]}, {"n": "nowhere"})


def _rows(rng: random.Random, n: int) -> list[dict]:
    rows = [{"name": "x", "op": "placeholder", "target": "x", "args": [], "kwargs": {}, "val": {"t": "tensor", "dtype": "float32", "shape": [4], "device": "cuda:0"}}]
    for i in range(n):
        t = rng.choice(_TARGETS)
        args: list = []
        for _ in range(rng.randint(0, 3)):
            k = rng.random()
            if k < 0.55:
                args.append({"n": rows[max(0, len(rows) - rng.randint(1, 4))]["name"]})
            elif k < 0.62:
                args.append([{"n": rows[-1]["name"]}, copy.deepcopy(rng.choice(_LITERALS))])
            elif k < 0.65:  # a dict literal holding refs, its keys repeated or equal across types
                key = rng.choice(("k", 1, True))
                args.append({"dict": [[key, {"n": rows[-1]["name"]}], [rng.choice(("k", 1, True)), {"n": rows[0]["name"]}]]})
            else:
                args.append(copy.deepcopy(rng.choice(_LITERALS)))
        kwargs = {}
        if rng.random() < 0.2:
            kwargs[rng.choice(("device", "dtype", "group", "dim"))] = copy.deepcopy(rng.choice(_LITERALS))
        row = {"name": f"n{i}", "op": "call_function", "target": t, "args": args, "kwargs": kwargs}
        if rng.random() < 0.5:
            row["val"] = {"t": "tensor", "dtype": "float32", "shape": [rng.randint(1, 3)], "device": rng.choice(("cuda:0", "cuda:1"))}
        rows.append(row)
    rows.append({"name": "output", "op": "output", "target": "output", "args": [[{"n": rows[-1]["name"]}]], "kwargs": {}})
    return rows


def _edit(rng: random.Random, rows: list[dict], edits: int) -> list[dict]:
    rows = copy.deepcopy(rows)
    for _ in range(edits):
        k = rng.random()
        i = rng.randrange(1, len(rows) - 1) if len(rows) > 2 else 0
        if k < 0.2 and len(rows) > 3:
            del rows[i]
        elif k < 0.4:
            new = copy.deepcopy(rows[i])
            new["name"] = f"ins{rng.randrange(10**6)}"
            rows.insert(i, new)
        elif k < 0.55:
            rows[i]["args"] = rows[i]["args"] + [copy.deepcopy(rng.choice(_LITERALS))]
        elif k < 0.65:
            rows[i]["name"] = rows[rng.randrange(len(rows))]["name"]  # duplicate name
        elif k < 0.75:
            j = rng.randrange(1, len(rows) - 1) if len(rows) > 2 else 0
            rows[i], rows[j] = rows[j], rows[i]
        elif k < 0.85:
            rows[i]["target"] = rng.choice(_TARGETS)
        else:
            rows[i]["val"] = {"t": "tensor", "dtype": "float16", "shape": [1], "device": "cuda:1"}
    return rows


def _tables(gid: str, rows: list[dict], sub: list[dict] | None = None) -> GraphTables:
    graphs = [SubGraph("", None, rows)]
    if sub is not None:
        graphs.append(SubGraph("body", rows[1]["name"], sub))
    return GraphTables(gid, graphs)


def _ctx(rank: int) -> RankContext:
    return RankContext(rank, local_rank=rank, own_device=f"cuda:{rank}", group_keys={"1": "world", str(rank + 2): "group[tp]"})


@settings(max_examples=1500, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 60), edits=st.integers(0, 6), renames=st.booleans())
def test_fast_diff_equals_reference_on_random_edits(seed, size, edits, renames):
    rng = random.Random(seed)
    a_rows = _rows(rng, size)
    b_rows = _edit(rng, a_rows, edits)
    if renames:  # a pass shifting name counters: every name differs, the structure does not
        names = {r["name"]: r["name"] + "_1" for r in b_rows if r["op"] == "call_function"}

        def rename(v):
            if isinstance(v, list):
                return [rename(x) for x in v]
            if isinstance(v, dict) and set(v) == {"n"}:
                return {"n": names.get(v["n"], v["n"])}
            return v

        for r in b_rows:
            r["name"] = names.get(r["name"], r["name"])
            r["args"] = rename(r["args"])
    sub = _rows(rng, 4) if rng.random() < 0.3 else None
    a, b = _tables("a", a_rows, sub), _tables("b", b_rows, _edit(rng, sub, 1) if sub else None)
    for kw in ({}, {"meta": False}, {"stack": True}):
        same_as_reference(a, b, **kw)
    same_as_reference(a, b, _ctx(0), _ctx(1))
    same_as_reference(a, b, _ctx(0), _ctx(0))
    # the same rows on both sides (the rank diff of a rank-agnostic graph), normalized
    same_as_reference(a, _tables("a2", copy.deepcopy(a_rows), sub), _ctx(0), _ctx(1))
    same_as_reference(a, a)


def test_fast_diff_equals_reference_on_large_random_graphs():
    rng = random.Random(7)
    a_rows = _rows(rng, 3000)
    for edits in (0, 1, 30):
        b_rows = _edit(rng, a_rows, edits)
        same_as_reference(_tables("a", a_rows), _tables("b", b_rows))
        same_as_reference(_tables("a", a_rows), _tables("b", b_rows), _ctx(0), _ctx(1))
