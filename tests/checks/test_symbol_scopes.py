"""The capture's `gti_symbol_scopes` records (capture/shared/symbol_rows.py `scope_events`): where a
graph's symbol rows first use and bind each unbacked symbol and hand scopes on. The stale-symbol
check of a graph whose events show no stale symbol reads them instead of walking its rows; it
reports what the walk of the rows reports."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtrain_inspect.capture.shared import logformat, symbol_rows
from graphtrain_inspect.inspector.checks import check_report
from graphtrain_inspect.inspector.checks import stale_unbacked_symbol as ss
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.graphmodel import GraphTables
from graphtrain_inspect.samples.bugs import ALL as ALL_BUGS


def _report(path, jobs: int = 1) -> dict:
    with open_capture(str(path)) as cap:
        return check_report(cap, jobs=jobs).to_json()


def _events_find(graphs: list[dict]) -> bool:
    tables = ss.event_tables("g", symbol_rows.scope_events(graphs))
    assert tables is not None
    return bool(ss.stale_symbols(tables, None))


def _rows_find(graphs: list[dict]) -> bool:
    return bool(ss.stale_symbols(GraphTables.from_payload("g", {"graphs": graphs}), None))


def test_scopes_report_what_the_rows_report(sample_capture, monkeypatch):
    """The capture with every bug planted (stale symbols in nested subgraphs and placeholders):
    every graph has its record; the report reading them is the report walking every graph's
    rows, with -j 2 too; graphs with a stale symbol are walked, the others are not."""
    path = sample_capture(*ALL_BUGS)
    with monkeypatch.context() as m:
        m.setattr(ss, "SCOPES", False)
        reference = _report(path)
    said: list[bool] = []
    real = ss._scopes_say_none

    def counted(*a):
        got = real(*a)
        said.append(got)
        return got

    monkeypatch.setattr(ss, "_scopes_say_none", counted)
    assert _report(path) == reference
    assert _report(path, jobs=2) == reference
    assert True in said and False in said
    assert [f for f in reference["findings"] if f["kind"] == ss.KIND]
    with open_capture(str(path)) as cap:
        for r in cap.ranks:
            for gid in cap.graphs(r):
                if cap.graph_record(r, gid, logformat.NODES) is None:
                    continue
                rec = cap.graph_record(r, gid, logformat.SYMBOL_SCOPES)
                assert rec is not None and rec.meta.get("rule") == symbol_rows.RULE
                # the events decide as the rows do, graph by graph
                kept = orjson.loads(cap.log_file(r).payload_text(cap.graph_record(r, gid, logformat.SYMBOL_ROWS))[0])
                assert _events_find(kept["graphs"]) == _rows_find(kept["graphs"])


def test_gpu_captures_events_decide_as_their_rows(bundled_capture):
    """The bundled GPU captures (recorded before the record, the stale-symbol ones included): the
    events made of each graph's symbol rows decide as the walk of those rows, graph by graph."""
    decided = {True: 0, False: 0}
    for name in ("h200x2-stale-symbol", "h200x2-clean", "h200x4-stale-symbol"):
        with open_capture(str(bundled_capture(name))) as cap:
            for r in cap.ranks:
                for gid in cap.graphs(r):
                    rec = cap.graph_record(r, gid, logformat.SYMBOL_ROWS)
                    if rec is None:
                        continue
                    kept = orjson.loads(cap.log_file(r).payload_text(rec)[0])["graphs"]
                    found = _rows_find(kept)
                    assert _events_find(kept) == found, (name, r, gid)
                    decided[found] += 1
    assert decided[True] and decided[False]


def _rewritten(src, dst, edit) -> int:
    """A copy of capture `src` at `dst` whose `gti_symbol_scopes` records are re-encoded after
    `edit(payload, meta)`; how many."""
    import shutil

    from graphtrain_inspect.capture.shared.logformat import split_records

    shutil.copytree(src, dst)
    edited = 0
    for log in dst.glob("*_gti.log"):
        out = []
        for _, line, payload_lines in split_records(log.read_bytes()):
            env = logformat.parse_envelope_line(line)
            if logformat.record_kind(env) != logformat.SYMBOL_SCOPES:
                out.append(b"\n".join([line, *payload_lines]) + b"\n")
                continue
            payload = orjson.loads(b"\n".join(p[1:] for p in payload_lines))
            meta = {"gid": env["artifact"]["gid"], "rule": env["artifact"]["rule"]}
            edit(payload, meta)
            out.append(logformat.encode_record(logformat.SYMBOL_SCOPES, payload, rank=env["rank"], meta=meta))
            edited += 1
        log.write_bytes(b"".join(out))
    return edited


def test_a_record_this_reader_cannot_take_leaves_the_rows_walked(sample_capture, tmp_path, monkeypatch):
    """Records of other rules, saying the map has renamings or symbols unknown to the ShapeEnv,
    or whose events do not read, are not taken: every graph is walked, and the report is the
    same."""
    src = sample_capture(*ALL_BUGS)
    reference = _report(src)
    edits = {
        "rule": lambda p, m: m.update(rule=7),
        "renamings": lambda p, m: p.update(renamings=1),
        "unknown": lambda p, m: p.update(unknown=2),
        "events": lambda p, m: p["graphs"][0].update(uses=[]),
    }
    for name, edit in edits.items():
        path = tmp_path / name
        assert _rewritten(src, path, edit) > 0
        said: list[bool] = []
        real = ss._scopes_say_none

        def counted(*a, _real=real, _said=said):
            _said.append(_real(*a))
            return _said[-1]

        monkeypatch.setattr(ss, "_scopes_say_none", counted)
        assert _report(path) == reference, name
        assert said and not any(said), name
        monkeypatch.setattr(ss, "_scopes_say_none", real)


# -- the events against the rows, on graphs made up ------------------------------------------------

_SYMS = ["u0", "u1", "u2", "s0", "zuf0"]


@st.composite
def _graphs(draw) -> list[dict]:
    """A graph and nested subgraphs (paths "", "a", "a/b", "c"), rows naming and binding a few
    symbols, placeholders among them, and rows handing the subgraphs' scopes on."""
    layout = draw(st.sampled_from([[""], ["", "a"], ["", "a", "a/b"], ["", "a", "c"], ["", "c", "a", "a/b"]]))
    parents = {p: (draw(st.sampled_from([f"sub_{p}", None])) if p else None) for p in layout}
    graphs = []
    for p in layout:
        own = [parents[q] for q in layout if q and (q.rsplit("/", 1)[0] if "/" in q else "") == p and parents[q]]
        rows = []
        for i in range(draw(st.integers(0, 7))):
            op = draw(st.sampled_from(["placeholder", "call_function", "call_function", "get_attr"]))
            name = draw(st.sampled_from(own)) if op == "get_attr" and own and draw(st.booleans()) else f"n{i}"
            row: dict = {"name": name, "op": op}
            syms = draw(st.lists(st.sampled_from(_SYMS), max_size=2, unique=True))
            if syms:
                row["syms"] = syms
            binds = draw(st.lists(st.sampled_from(_SYMS), max_size=1))
            if binds:
                row["unbacked_bindings"] = {s: "" for s in binds}
            if own and op == "call_function" and draw(st.booleans()):
                row["args"] = [{"n": draw(st.sampled_from(own))}]
            rows.append(row)
        graphs.append({"path": p, "parent_node": parents[p], "nodes": rows})
    return graphs


@settings(max_examples=600, deadline=None)
@given(_graphs())
def test_events_find_a_stale_symbol_where_the_rows_do(graphs):
    assert _events_find(graphs) == _rows_find(graphs)
