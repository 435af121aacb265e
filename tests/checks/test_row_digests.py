"""Row digests of large node tables (capture/row_digests.py, inspector/read/row_digests.py): the
capture writes them after the table; a rank diff compares rows by them and reads only the rows
that differ; the reports are the ones made by reading the tables whole."""

from __future__ import annotations

import shutil

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from graphtrain_inspect.capture import logformat, row_digests, session
from graphtrain_inspect.capture.logformat import split_records
from graphtrain_inspect.inspector.checks import check_report
from graphtrain_inspect.inspector.checks import row_rank_diff as rrd
from graphtrain_inspect.inspector.read import row_digests as read_digests
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.samples.bugs import ALL as ALL_BUGS
from tests.capture_utils import drop_relu, records


def _capture(directory, monkeypatch, least: str) -> None:
    monkeypatch.setenv(row_digests.ENV_ROWS, least)
    session.start(str(directory))
    try:

        def f(x):
            return (torch.relu(x) * x.shape[0] + 1,)

        gm = make_fx(f, tracing_mode="symbolic")(torch.randn(4))
        from graphtrain_inspect.capture import record_pass

        record_pass("drop_relu")(drop_relu)(gm, [])
    finally:
        session.stop()


def test_the_capture_writes_digests_after_tables_of_enough_rows(tmp_path, monkeypatch):
    every, none = tmp_path / "every", tmp_path / "none"
    _capture(every, monkeypatch, "0")
    _capture(none, monkeypatch, str(row_digests.MIN_ROWS))
    kinds = [k for k, _, _ in records(every / logformat.log_file_name(0))]
    at = [i for i, k in enumerate(kinds) if k == logformat.NODES]
    assert at and all(kinds[i + 1] == logformat.ROW_DIGESTS for i in at)
    assert logformat.ROW_DIGESTS not in [k for k, _, _ in records(none / logformat.log_file_name(0))]
    with open_capture(str(every)) as cap:
        for gid in cap.graphs(0):
            d = cap.row_digests(0, gid)
            assert d is not None
            subs = cap.node_rows(0, gid)
            assert d.heads == [h for h, _ in subs] and d.counts == [len(x) for _, x in subs]
            assert [[d.row(k, i) for i in range(len(x))] for k, (_, x) in enumerate(subs)] == [x for _, x in subs]
            assert d.differing(d) == []


def _with_digests(src, dst, mutate=None) -> int:
    """A copy of capture `src` at `dst` whose logs have a `gti_row_digests` record after every
    node table, as a capture writes it with GTI_CAPTURE_DIGEST_ROWS=0: the bundled-size sample's
    tables are below the default size; `mutate` edits each payload before it is written. The
    number of records added."""
    shutil.copytree(src, dst)
    added = 0
    for log in dst.glob("*_gti.log"):
        out = []
        for _, line, payload_lines in split_records(log.read_bytes()):
            out.append(b"\n".join([line, *payload_lines]) + b"\n")
            env = logformat.parse_envelope_line(line)
            if logformat.record_kind(env) != logformat.NODES:
                continue
            gid = env["artifact"]["gid"]
            lines = [p[1:] for p in payload_lines]
            subs = logformat.node_table_rows(lines)
            digests = row_digests.row_digests_payload(gid, lines, subs, least=0)
            assert digests is not None
            if mutate is not None:
                mutate(digests)
            meta = {"gid": gid, "hash": row_digests.HASH}
            out.append(logformat.encode_record(logformat.ROW_DIGESTS, digests, rank=env["rank"], meta=meta))
            added += 1
        log.write_bytes(b"".join(out))
    return added


def _report(path, jobs: int = 1) -> dict:
    with open_capture(str(path)) as cap:
        return check_report(cap, jobs=jobs).to_json()


def test_reports_read_by_digests_are_the_reports_read_from_tables(sample_capture, tmp_path, monkeypatch):
    """The capture with every bug planted (ranks that differ in literals, devices, process
    groups): with digests, the positional rank diffs and the tables read by them (and so with -j
    2) report what the capture without them reports."""
    src = sample_capture(*ALL_BUGS)
    path = tmp_path / "digests"
    assert _with_digests(src, path) > 0
    reference = _report(src)
    used: list[bool] = []
    real = rrd._pairs_from_digests

    def counted(*a):
        got = real(*a)
        used.append(isinstance(got, list))
        return got

    decoded: list[int] = []  # the tables decoded from the digest pool (their subgraphs' digests)
    real_sub = read_digests.RowDigests.sub_digests

    def sub_digests(self, sub):
        decoded.append(sub)
        return real_sub(self, sub)

    monkeypatch.setattr(rrd, "_pairs_from_digests", counted)
    monkeypatch.setattr(read_digests.RowDigests, "sub_digests", sub_digests)
    assert _report(path) == reference
    assert any(used) and decoded
    assert _report(path, jobs=2) == reference
    with monkeypatch.context() as m:
        m.setattr(read_digests, "ENABLED", False)
        assert _report(path) == reference


def test_rows_found_and_checked_in_the_stored_payload(tmp_path, monkeypatch):
    """Tokens are found in the rows that hold them (as in the rows' lines), and a row whose
    stored bytes are not what its digest says is not read (None), the others still are."""
    from graphtrain_inspect.capture.symbol_rows import rows_with

    path = tmp_path / "cap"
    _capture(path, monkeypatch, "0")
    with open_capture(str(path)) as cap:
        gid = next(g for g in cap.graphs(0) if cap.row_digests(0, gid=g) is not None)
        d = cap.row_digests(0, gid)
        subs = cap.node_rows(0, gid)
        for tok in ([b'"placeholder"'], [b'"call_function"', b"aten.mul"], [b"no such token"]):
            want = {(k, i) for k, (_, x) in enumerate(subs) for i in rows_with(x, tok)}
            assert d.rows_with(tok) == want
        lines = subs[0][1]
        victim = len(lines) // 2
        start = cap.graph_record(0, gid, logformat.NODES).payload_start
    log = path / logformat.log_file_name(0)
    data = log.read_bytes()
    at = data.index(b"\t" + lines[victim] + b"\n", start)
    i = at + 1 + lines[victim].index(b'"op"') + 2  # a byte inside the row, same length after
    log.write_bytes(data[:i] + (b"P" if data[i : i + 1] != b"P" else b"Q") + data[i + 1 :])
    with open_capture(str(path)) as cap:
        d = cap.row_digests(0, gid)
        assert d is not None
        assert d.row(0, victim) is None
        assert d.row(0, victim - 1) == lines[victim - 1]
        # the table, read whole, is not made of rows that fail their digests: the payload's md5
        # fails, and the damage is a reading problem naming the log, as without digests
        assert not [e for e in cap.all_errors() if e.path == str(log)]
        cap.node_table(0, gid)
        assert [e for e in cap.all_errors() if e.path == str(log)]


def _shift_a_length(p):
    p["lines"][3] += 1
    p["lines"][4] -= 1


@pytest.mark.parametrize(
    "mutate",
    [
        lambda p: p.update(hash="sha1-8"),
        lambda p: p.update(digests=p["digests"][:-2]),
        lambda p: p.update(digests="zz" + p["digests"][2:]),
        lambda p: p.update(lines=p["lines"][:-1]),
        lambda p: p.update(lines=[-1, *p["lines"][1:]]),
        lambda p: p.update(rows=["1"]),
        lambda p: p.update(gid="g0000000000000000"),
        _shift_a_length,
    ],
    ids=["hash", "short", "not-hex", "lines", "negative", "rows", "gid", "shifted"],
)
def test_a_record_that_does_not_fit_changes_no_report(sample_capture, tmp_path, mutate):
    """A digests record of another hash, form or table (damage, another writer) is not laid over
    the table, or its rows fail their digests as they are read: the report is the one the
    capture gives without digests."""
    src = sample_capture(*ALL_BUGS)
    path = tmp_path / "digests"
    _with_digests(src, path, mutate)
    assert _report(path) == _report(src)


@pytest.mark.parametrize(
    "name", ["h200x2-rank-baked", "h200x4-fsdp2-compile-rank-literal", "h200x2-rank-recompile-divergent"]
)
def test_gpu_captures_read_by_digests_report_the_same(bundled_capture, tmp_path, monkeypatch, name):
    """Captures recorded on GPUs, whose rows name each rank's own device (`cuda:N`: rows a rank
    diff reads whatever their digests say): with digests after every table, rank diffs made from
    them, rows with an own device found in the stored payloads, the same report."""
    src = bundled_capture(name)
    path = tmp_path / name
    assert _with_digests(src, path) > 0
    reference = _report(src)
    found: list[int] = []
    real = read_digests.RowDigests.rows_with

    def rows_with(self, tokens):
        got = real(self, tokens)
        found.append(len(got))
        return got

    monkeypatch.setattr(read_digests.RowDigests, "rows_with", rows_with)
    assert _report(path) == reference
    assert sum(found) > 0
