"""The checks' fast paths (rank diffs from undecoded rows, stale symbols from the rows that name
one, results shared by ranks that agree) report exactly what reading every table whole reports,
on real sample captures with each bug switch: the same findings, messages and evidence."""

from __future__ import annotations

import pytest

from graphtrain_inspect.inspector.checks import check_report
from graphtrain_inspect.inspector.diff.rank_diffs import STRATEGIES, without
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.samples.bugs import ALL as ALL_BUGS


def report(path, fast: bool) -> dict:
    # without the positional rank diff the checks read every table whole (rank diffs, stale symbols)
    return check_report(open_capture(str(path)), strategies=STRATEGIES if fast else without("positional")).to_json()


@pytest.mark.parametrize(
    "bugs, coor",
    [
        ((), False),
        (("rank-baked",), False),
        (("stale-symbol",), False),
        (tuple(ALL_BUGS), False),
        (("rank-baked",), True),
    ],
)
def test_fast_paths_report_what_whole_tables_report(sample_capture, bugs, coor):
    path = sample_capture(*bugs, coor=coor)
    fast, slow = report(path, True), report(path, False)
    assert fast == slow
    if bugs:
        assert fast["findings"], "the bug was found"


def test_fast_paths_are_taken_on_format_2_captures(sample_capture):
    """Guard against a fast path that silently never applies: on a capture with a rank-baked
    constant every rank diff is made from rows, and no table is read whole for a rank diff."""
    from graphtrain_inspect.inspector.checks.context import CheckContext
    from graphtrain_inspect.inspector.read.stages import StageIndex

    cap = open_capture(str(sample_capture("rank-baked")))
    ctx = CheckContext(cap)
    keys = [st.key for st in StageIndex(cap).by_rank[0]]
    diffs = [ctx.rank_diff(k, 0, 1) for k in keys]
    assert diffs and all(d is not None and d.unlisted_same for d in diffs)
    assert any(not d.empty for d in diffs)  # the baked literal shows up
    assert len(cap._tables) == 0  # no node table was parsed whole


# ---------------------------------------------------------------------------------------------
# The stale-symbol walk's fast paths (inspector/checks/stale_unbacked_symbol.py): the row selections are
# exactly `rows_with`'s, the walk of one graph is handed to the next graph whose kept rows and
# symbol map are the same bytes, and the walk's reference scan is `row_leaves`'.


def test_fast_paths_report_what_whole_tables_report_on_bundled_captures(bundled_capture):
    """The GPU captures whose tables are laid out one row per line (the others have no fast path
    to compare): the same report both ways."""
    from graphtrain_inspect.inspector.read import bundled

    compared = 0
    for name in bundled.names():
        path = bundled_capture(name)
        cap = open_capture(str(path))
        if any(cap.node_rows(r, g) is not None for r in cap.ranks for g in cap.graphs(r)):
            assert report(path, True) == report(path, False), name
            compared += 1
    assert compared, "no bundled capture has tables laid out one row per line"


# rows the selections must get right: symbols at a row's start, after a word byte (no match), in
# the middle of words, `zuf` floats, digits past 0, names of subgraphs by key and by reference,
# keys with spaces (not the pattern's: never kept), a name split across two rows
_EDGE_ROWS = [
    b"u0",
    b"au0",
    b"_u1",
    b"x u9,",
    b'"u12"',
    b"zuf3",
    b"azuf3",
    b'"zuf0"',
    b"uzuf1",
    b"zu1",
    b"u",
    b"",
    b'{"name":"mu1","syms":["u4"]},',
    b'{"name":"relu_1","args":[{"n":"sum_2"}]},',
    b'"expr":"2*u7 + zuf12"',
    b'{"name":"body_0","op":"get_attr"},',
    b'{"name":"cond","args":[{"n":"body_1"},{"n":"x"}]},',
    b'{"name":"cond_1","args":[{"n" : "body_0"}]},',
    b'{"name":"c2","args":[{"n":"body_01"}]},',
    b'{"name":"c3","args":[{"n":"body_0',
    b'"}]},',
    b'{"target":"body_0","args":[{"n":"notbody_0"}]},',
    b'{"n":"body_1"}',
    b'"name":"other_body"',
    b'xx"name":"body_1"',
]


def _real_rows() -> list[list[bytes]]:
    """Every subgraph's row lines of the bundled captures laid out one row per line."""
    from graphtrain_inspect.inspector.read import bundled

    out = []
    for name in ("h200x2-fsdp2-compile-rank-literal", "h200x2-codegen-per-rank"):
        if name not in bundled.names():
            continue
        cap = open_capture(str(bundled.path_of(name)))
        for r in cap.ranks:
            for g in cap.graphs(r):
                out.extend(rows for _, rows in cap.node_rows(r, g) or [])
    return out


def test_unbacked_rows_are_rows_with_the_symbol_pattern():
    from graphtrain_inspect.capture.shared import symbol_rows as sr

    cases = [_EDGE_ROWS, list(reversed(_EDGE_ROWS)), [b"u0"], [b""], [], *[[r] for r in _EDGE_ROWS], *_real_rows()]
    for rows in cases:
        assert sr.unbacked_rows(rows) == sr.rows_with(rows, (), sr.UNBACKED_BYTES, sr.symbol_start), rows


def test_scope_rows_are_rows_with_the_scope_pattern():
    from graphtrain_inspect.capture.shared import symbol_rows as sr

    name_sets = [
        {b"body_0"},
        {b"body_0", b"body_1"},
        {b"body_1", b"other_body"},
        {b"x", b"body_0"},
        {b"notbody_0"},
        {b"body_0\n"},
    ]
    cases = [_EDGE_ROWS, list(reversed(_EDGE_ROWS)), [b""], *[[r] for r in _EDGE_ROWS]]
    real = _real_rows()
    for names in name_sets:
        for rows in cases + real[:50]:
            assert sr.scope_rows(rows, names) == sr.rows_with(rows, (), *sr.scope_pattern(names)), (names, rows)


def test_walk_reads_the_references_row_leaves_yields():
    """The walk's `row_refs` (names of node references, no paths made) against `row_leaves`, on
    every row of the bundled captures with tables and on nested arguments."""
    from graphtrain_inspect.capture.shared import logformat
    from graphtrain_inspect.capture.shared.symbol_rows import row_refs as _row_refs
    from graphtrain_inspect.inspector.read.graphmodel import is_ref, row_leaves

    rows = [
        {
            "name": "a",
            "op": "call_function",
            "args": [{"n": "x"}, [{"n": "y"}, 1, {"n": 3}], {"dict": [["k", {"n": "z"}], ["bad"], [1, [{"n": "w"}]]]}],
            "kwargs": {"t": {"n": "v"}, "u": {"dict": [[2, {"n": "q"}]]}, "s": {"n": "r", "extra": 1}},
        },
        {
            "name": "b",
            "op": "call_function",
            "args": [{"dict": [["k", {"n": "z"}]], "other": 1}, {"dict": "notalist"}, {}],
        },
        {"name": "c", "op": "get_attr"},
    ]
    for line_rows in _real_rows():
        rows.extend(logformat.decode_row(line) for line in line_rows)
    for row in rows:
        assert _row_refs(row) == [leaf["n"] for _, leaf in row_leaves(row) if is_ref(leaf)], row


def test_a_walk_is_handed_on_only_where_rows_and_symbol_map_agree(sample_capture, monkeypatch):
    """On the sample's capture with a stale symbol, consecutive passes that change no row naming
    a symbol share one walk (guard against a reuse that never applies), and every graph's
    observations are what walking it alone gives (a fresh context each)."""
    from graphtrain_inspect.inspector.checks import stale_unbacked_symbol as ss
    from graphtrain_inspect.inspector.checks.context import CheckContext

    cap = open_capture(str(sample_capture("stale-symbol")))
    ctx = CheckContext(cap)
    monkeypatch.setattr(ss, "SCOPES", False)  # every graph walked from its rows (else its events say)
    walks = []
    real = ss.stale_symbols
    monkeypatch.setattr(ss, "stale_symbols", lambda *a: walks.append(1) or real(*a))
    graphs = list(dict.fromkeys((r, st.gid) for r in cap.ranks for st in ctx.index.by_rank.get(r, [])))
    shared = {g: ss.graph_observations(ctx, *g) for g in graphs}
    assert len(walks) < len(graphs)
    assert any(obs for obs, _ in shared.values()), "the stale symbol was found"
    for g in graphs:
        alone = ss.graph_observations(CheckContext(cap), *g)
        assert [o.__dict__ for o in alone[0]] == [o.__dict__ for o in shared[g][0]] and alone[1] == shared[g][1], g
