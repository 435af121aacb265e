"""The capture's `gti_symbol_rows` records (capture/shared/symbol_rows.py): the stale-symbol check reads
them instead of selecting rows from whole node tables, and reports the same."""

from __future__ import annotations

import shutil

import pytest

from graphtrain_inspect.capture.shared import logformat, symbol_rows
from graphtrain_inspect.inspector.checks import check_report
from graphtrain_inspect.inspector.checks import stale_unbacked_symbol as ss
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.samples.bugs import ALL as ALL_BUGS


def _report(path, jobs: int = 1) -> dict:
    with open_capture(str(path)) as cap:
        return check_report(cap, jobs=jobs).to_json()


def _no_table_selection(monkeypatch) -> list:
    """Make selecting rows from a node table fail loudly; the calls it was asked for."""
    calls: list = []

    def refuse(*a, **k):
        calls.append(a)
        raise AssertionError("rows selected from a node table although the capture recorded them")

    monkeypatch.setattr(symbol_rows, "kept_positions", refuse)
    return calls


def test_every_table_has_its_symbol_rows(sample_capture):
    path = sample_capture(*ALL_BUGS)
    with open_capture(str(path)) as cap:
        tables = 0
        for r in cap.ranks:
            for gid in cap.graphs(r):
                if cap.graph_record(r, gid, logformat.NODES) is None:
                    continue
                tables += 1
                rec = cap.graph_record(r, gid, logformat.SYMBOL_ROWS)
                assert rec is not None and rec.meta.get("rule") == symbol_rows.RULE, (r, gid)
                full = cap.node_rows(r, gid)
                kept = cap.node_rows(r, gid, logformat.SYMBOL_ROWS)
                # every subgraph's head, and no more rows than the table has
                assert [h for h, _ in kept] == [h for h, _ in full]
                assert all(len(k) <= len(f) for (_, k), (_, f) in zip(kept, full))
        assert tables > 0


def test_recorded_rows_report_what_whole_tables_report(sample_capture, monkeypatch):
    """The capture with every bug planted (stale symbols in nested subgraphs, ranks that differ):
    the report from the recorded rows, with selection from tables refused, equals the report
    made by selecting from the tables, values of the stale uses included; and so with -j 2."""
    path = sample_capture(*ALL_BUGS)
    with monkeypatch.context() as m:
        m.setattr(ss, "_recorded_rows", lambda ctx, rank, gid: None)
        reference = _report(path)
    calls = _no_table_selection(monkeypatch)
    assert _report(path) == reference
    assert _report(path, jobs=2) == reference
    assert calls == []
    stale = [f for f in reference["findings"] if f["kind"] == ss.KIND]
    assert stale and all(f["evidence"].get("value") for f in stale if f["evidence"].get("in_placeholder") is not None)


@pytest.mark.parametrize("edit", ["rule", "payload"])
def test_a_record_this_reader_cannot_take_is_left_for_the_table(sample_capture, tmp_path, monkeypatch, edit):
    """A record of other selection rules (a later capture's), or whose payload does not read back
    (md5), is not taken: the rows are selected from the table, and the stale findings are the
    same."""
    src = sample_capture(*ALL_BUGS)
    path = tmp_path / "cap"
    shutil.copytree(src, path)
    log = next(path.glob("*rank_0_gti.log"))
    data = log.read_bytes()
    tag = b'"name":"gti_symbol_rows","encoding":"json"'
    assert tag in data
    if edit == "rule":
        data = data.replace(b'"rule":1,', b'"rule":9,')
    else:
        # the first record's first trimmed row: a name changed, its md5 no longer the envelope's
        at = data.find(b'{"name":"', data.find(tag))
        data = data[: at + 9] + b"Z" + data[at + 10 :]
    log.write_bytes(data)
    stale = lambda rep: [f for f in rep["findings"] if f["kind"] == ss.KIND]  # noqa: E731
    expected = stale(_report(src))
    # every graph walked from its rows (a graph whose `gti_symbol_scopes` shows no stale symbol is
    # not: test_symbol_scopes.py)
    monkeypatch.setattr(ss, "SCOPES", False)
    selected: list = []
    real = symbol_rows.kept_positions
    monkeypatch.setattr(symbol_rows, "kept_positions", lambda *a: selected.append(a) or real(*a))
    assert stale(_report(path)) == expected
    assert selected  # rank 0's tables, selected by the reader
