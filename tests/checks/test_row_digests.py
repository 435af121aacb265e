"""Row digests of large node tables (capture/shared/row_digests.py, inspector/read/row_digests.py): the
capture writes them after the table; a rank diff compares rows by them and reads only the rows
that differ; the reports are the ones made by reading the tables whole."""

from __future__ import annotations

import contextlib
import io
import json
import shutil

import orjson
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from graphtrain_inspect.capture import session
from graphtrain_inspect.capture.shared import logformat, rank_tokens, row_digests
from graphtrain_inspect.capture.shared.logformat import split_records
from graphtrain_inspect.inspector.checks import check_report
from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.cli.main import main as cli_main
from graphtrain_inspect.inspector.diff import anchored as ard
from graphtrain_inspect.inspector.diff import graph_diff
from graphtrain_inspect.inspector.diff import row_rank_diff as rrd
from graphtrain_inspect.inspector.diff.graph_diff import diff_tables
from graphtrain_inspect.inspector.diff.rank_diffs import without
from graphtrain_inspect.inspector.diff.row_parts import Parts
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
            # each row's refs: the rows its arguments name, as the reader's alignment finds them
            tables = cap.node_table(0, gid)
            for k, g in enumerate(tables.graphs):
                p = Parts(g.nodes)
                n = len(g.nodes)
                assert [tuple(n if x < 0 else x for x in r) for r in d.sub_refs(k)] == [tuple(x) for x in p.ins]


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
            graphs = orjson.loads(b"\n".join(lines))["graphs"]
            rewrites = rank_tokens.recorded_rewrites(env["artifact"].get(rank_tokens.NORM))
            digests = row_digests.row_digests_payload(gid, lines, subs, least=0, graphs=graphs, rewrites=rewrites)
            assert digests is not None
            if mutate is not None:
                mutate(digests)
            meta = {"gid": gid, "hash": row_digests.HASH}
            out.append(logformat.encode_record(logformat.ROW_DIGESTS, digests, rank=env["rank"], meta=meta))
            added += 1
        log.write_bytes(b"".join(out))
    return added


# structural rank diffs from the decoded tables, not from anchors
NOT_ANCHORED = without("anchored")


def _report(path, jobs: int = 1, strategies=None, digests: bool = True) -> dict:
    with open_capture(str(path)) as cap:
        cap.reads_row_digests = digests
        return check_report(cap, jobs=jobs, strategies=strategies).to_json()


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
    # structural rank diffs: from the tables (see below)
    assert _report(path, strategies=NOT_ANCHORED) == reference
    assert any(used) and decoded
    assert _report(path, jobs=2, strategies=NOT_ANCHORED) == reference
    assert _report(path, strategies=NOT_ANCHORED, digests=False) == reference


def test_rows_found_and_checked_in_the_stored_payload(tmp_path, monkeypatch):
    """Tokens are found in the rows that hold them (as in the rows' lines), and a row whose
    stored bytes are not what its digest says is not read (None), the others still are."""
    from graphtrain_inspect.capture.shared.symbol_rows import rows_with

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


def test_collective_rows_read_by_digests_normalize_as_the_whole_table(sample_capture, tmp_path):
    """The sample with every bug planted (process groups in its collectives, ranks that differ):
    a graph's collective rows found from the start of its stored row lines are the decoded
    table's, in order, and the code normalized from them (what `diff --ranks` and the TUI's rank
    diff show) is the code normalized from the whole table; a row line whose target is not a
    string gives no answer (None), and the whole table is read."""
    from graphtrain_inspect.capture.shared.rank_tokens import is_collective_target
    from graphtrain_inspect.inspector.diff import graph_diff

    path = tmp_path / "digests"
    _with_digests(sample_capture(*ALL_BUGS), path)
    seen = 0
    with open_capture(str(path)) as cap:
        for rank in cap.ranks:
            for gid in cap.graphs(rank):
                if cap.row_digests(rank, gid) is None:
                    continue
                tables = cap.node_table(rank, gid)
                want = [r for _, r in tables.iter_nodes() if is_collective_target(r.get("target"))]
                assert graph_diff.collective_rows(cap, rank, gid) == want
                seen += bool(want)
                code = cap.graph_code(rank, gid)
                whole = graph_diff.normalize_code(
                    code, graph_diff.graph_normalizer(tables, graph_diff.rank_context(cap, rank, gid))
                )
                assert graph_diff.rank_text(cap, rank, gid) == whole
    assert seen >= 4  # graphs with collectives, on both ranks

    with open_capture(str(path)) as cap:
        gid = next(g for g in cap.graphs(0) if cap.row_digests(0, g) is not None)
        d = cap.row_digests(0, gid)
        assert d.rows_by_target(lambda t: True) == [(k, i) for k, n in enumerate(d.counts) for i in range(n)]
        line = d.row(0, d.counts[0] // 2)
        start = cap.graph_record(0, gid, logformat.NODES).payload_start
    # that row's target made a number in the stored log (same length): no answer from the lines
    log = path / logformat.log_file_name(0)
    data = log.read_bytes()
    at = data.index(b"\t" + line + b"\n", start) + 1 + line.index(b'"target":') + len(b'"target":')
    assert data[at : at + 1] == b'"'
    log.write_bytes(data[:at] + b"7" + data[at + 1 :])
    with open_capture(str(path)) as cap:
        d = cap.row_digests(0, gid)
        assert d is not None and d.rows_by_target(lambda t: True) is None


def test_rows_looked_up_by_name_in_the_stored_table_are_the_indexed_ones(sample_capture, tmp_path, monkeypatch):
    """A finding's row looked up by name (`node_row`, `nearest_source`) in a table with digests is
    found by searching its stored lines for the first lookups, then through the index of its
    lines: both give what the whole table gives, for every row and for names that are no row;
    a row whose bytes are not what its digest says is not taken from the search."""
    from graphtrain_inspect.inspector.read import capture_reader
    from graphtrain_inspect.inspector.read.source_lines import nearest_source

    path = tmp_path / "digests"
    assert _with_digests(sample_capture(*ALL_BUGS), path) > 0
    whole = open_capture(str(path))
    gids = [g for g in whole.graphs(1) if whole.row_digests(1, g) is not None][:3]
    assert gids
    searched: list[int] = []
    real = read_digests.RowDigests.named

    def named(self, sub, head):
        searched.append(sub)
        return real(self, sub, head)

    monkeypatch.setattr(read_digests.RowDigests, "named", named)
    for searches in (10**6, 0, 3):  # always searched, never, the first three of each table
        monkeypatch.setattr(capture_reader, "_SEARCHES", searches)
        rows_way = open_capture(str(path))
        searched.clear()
        for gid in gids:
            for sub in whole.node_table(1, gid).graphs[:3]:
                for at in range(0, len(sub.nodes), max(1, len(sub.nodes) // 40)):
                    row = sub.nodes[at]
                    assert rows_way.node_row(1, gid, sub.path, row["name"]) == (True, row)
                    want = nearest_source(sub.nodes, row["name"], 3)
                    assert rows_way.nearest_source(1, gid, sub.path, row["name"], 3) == (True, want)
        assert len(searched) == {10**6: len(searched), 0: 0, 3: 3 * len(gids)}[searches]
        assert searched if searches else not searched
        assert len(rows_way._tables) == 0  # no table decoded whole
        for gid in gids:  # what the lines cannot say: the whole table says it
            assert rows_way.node_row(1, gid, "", "no_such_node") == (True, None)
            assert rows_way.node_row(1, gid, "no/such/subgraph", "x") == (False, None)
    # a row's bytes changed in the log (its table's md5 fails too): not read by the search
    monkeypatch.setattr(capture_reader, "_SEARCHES", 10**6)
    gid = gids[0]
    row = whole.node_table(1, gid).graphs[0].nodes[5]
    start = whole.graph_record(1, gid, logformat.NODES).payload_start
    log = path / logformat.log_file_name(1)
    data = log.read_bytes()
    line = orjson.dumps(row)
    at = data.index(b"\t" + line[: line.index(b'"op"')], start) + line.index(b'"op"') + 3
    log.write_bytes(data[:at] + (b"P" if data[at : at + 1] != b"P" else b"Q") + data[at + 1 :])
    damaged = open_capture(str(path))
    d = damaged.row_digests(1, gid)
    assert d.named(0, line[: line.index(b'"op"')]) == [5] and d.row(0, 5) is None  # found, not read
    assert damaged.nearest_source(1, gid, "", row["name"], 3) == (False, None)  # the table says it
    got = damaged.node_row(1, gid, "", row["name"])
    monkeypatch.setattr(capture_reader, "_SEARCHES", 0)
    indexed = open_capture(str(path))
    assert indexed.nearest_source(1, gid, "", row["name"], 3) == (False, None)
    assert got == indexed.node_row(1, gid, "", row["name"])
    assert [e for e in damaged.all_errors() if e.path == str(log)]  # the damage is named


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
        lambda p: p.update(norm_digests="zz" + p["norm_digests"][2:]),
        lambda p: p.update(norm_digests=p["norm_digests"][:-2]),
        lambda p: p.update(norm_digests=[1, 2]),
    ],
    ids=[
        "hash",
        "short",
        "not-hex",
        "lines",
        "negative",
        "rows",
        "gid",
        "shifted",
        "norm-not-hex",
        "norm-short",
        "norm-list",
    ],
)
def test_a_record_that_does_not_fit_changes_no_report(sample_capture, tmp_path, mutate, monkeypatch):
    """A digests record of another hash, form or table (damage, another writer) is not laid over
    the table, or its rows fail their digests as they are read: the report is the one the
    capture gives without digests (structural rank diffs from the tables: the anchored ones pair
    rows otherwise, test_structural_rank_diffs_from_anchors)."""
    src = sample_capture(*ALL_BUGS)
    path = tmp_path / "digests"
    _with_digests(src, path, mutate)
    assert _report(path, strategies=NOT_ANCHORED) == _report(src, strategies=NOT_ANCHORED)


@pytest.mark.parametrize("normalized", [True, False], ids=["normalized", "own-device-rows"])
@pytest.mark.parametrize(
    "name", ["h200x2-rank-baked", "h200x4-fsdp2-compile-rank-literal", "h200x2-rank-recompile-divergent"]
)
def test_gpu_captures_read_by_digests_report_the_same(bundled_capture, tmp_path, monkeypatch, name, normalized):
    """Captures recorded on GPUs, whose rows name each rank's own device (`cuda:N`): with digests
    after every table, the same report. Compared by the rows' normalized digests (the own device
    rewritten, as the capture writes them where the table has its normalized hash), or, without
    them, by the digests and the rows with an own device, found in the stored payloads and read
    whatever their digests say."""
    src = bundled_capture(name)
    path = tmp_path / name
    normal: list[bool] = []  # whether each record has normalized digests (not where the capture's
    # tables have no normalized hash: this compile's tables)

    def mutate(p):
        normal.append("norm_digests" in p)
        if not normalized:
            p.pop("norm_digests", None)

    assert _with_digests(src, path, mutate) > 0
    reference = _report(src)
    found: list[int] = []
    real = read_digests.RowDigests.rows_with

    def rows_with(self, tokens):
        got = real(self, tokens)
        found.append(len(got))
        return got

    views: list[bool] = []
    real_view = read_digests.RowDigests.normalized

    def view(self, rewrites):
        got = real_view(self, rewrites)
        views.append(got is not None)
        return got

    monkeypatch.setattr(read_digests.RowDigests, "rows_with", rows_with)
    monkeypatch.setattr(read_digests.RowDigests, "normalized", view)
    assert _report(path) == reference
    if normalized and all(normal):
        assert views and all(views) and sum(found) == 0
    else:
        assert not any(views) and sum(found) > 0
    assert all(normal) or name == "h200x2-rank-recompile-divergent"


def _structural_pairs(cap, ctx):
    """(stage, rank 0's gid, rank 1's gid) of every stage whose tables differ in layout."""
    out = []
    for key in ctx.index.keys:
        across = ctx.index.across(key)
        if 0 in across and 1 in across:
            ga, gb = across[0].gid, across[1].gid
            da, db = cap.row_digests(0, ga), cap.row_digests(1, gb)
            if ga != gb and da is not None and db is not None and da.counts != db.counts:
                out.append((key, ga, gb))
    return out


def _count_anchored(monkeypatch, name: str = "_anchored_diff") -> list[bool]:
    """Whether each call of diff/anchored.py's `name` answered (not None), in order: by default
    whether each diff tried from row digests and refs was made."""
    made: list[bool] = []
    real = getattr(ard, name)

    def counted(*a):
        got = real(*a)
        made.append(got is not None)
        return got

    monkeypatch.setattr(ard, name, counted)
    return made


def test_structural_rank_diffs_from_anchors(sample_capture, tmp_path, monkeypatch):
    """Stages where a pass decided differently on rank 1 (the tables differ in layout): the diff
    made from digests and refs pairs the rows that are the same bytes on both ranks and aligns
    the rest; it says what the diff of the decoded tables says of the stage (structural or not,
    which subgraphs changed, the rows added and removed, the literal changes of the rows both
    pair alike), its counts add up, and the report is the same with -j 2."""
    src = sample_capture(*ALL_BUGS)
    path = tmp_path / "digests"
    _with_digests(src, path)
    with open_capture(str(path)) as cap:
        ctx = CheckContext(cap)
        pairs = _structural_pairs(cap, ctx)
        assert len(pairs) >= 3
        for _key, ga, gb in pairs:
            ca, cb = ctx._stage_ctx(0, ga), ctx._stage_ctx(1, gb)
            d = ard.anchored_rank_diff(cap, 0, ga, ca, 1, gb, cb)
            assert d is not None and d.unlisted_same
            ta, tb = ctx.tables(0, ga), ctx.tables(1, gb)
            ref = diff_tables(ta, tb, norm_a=ctx.normalizer(0, ga), norm_b=ctx.normalizer(1, gb)).only_changes()
            assert d.structural == ref.structural is True
            assert [(s.path, s.status) for s in d.subgraphs] == [(s.path, s.status) for s in ref.subgraphs]
            for g_a, g_b, sub in zip(ta.graphs, tb.graphs, d.subgraphs):
                c = sub.nodes
                added = sum(n.status == "added" for n in c)
                removed = sum(n.status == "removed" for n in c)
                assert len(g_a.nodes) - removed == len(g_b.nodes) - added  # every other row paired once
                names = [n.names for n in c]
                assert len(set(names)) == len(names)
            # the literal changes of rows paired with their own names on both sides
            lits = {(n.names, repr(n.args)) for n in d.changes() if n.args and not n.structural}
            ref_lits = {(n.names, repr(n.args)) for n in ref.changes() if n.args and not n.structural}
            assert ref_lits and {x for x in ref_lits if x[0][0] == x[0][1]} <= lits
    # where the gap rows pair by name, only the anchors next to them whose refs do not follow the
    # pairing are read: the very diff that reading every anchor next to the gap makes
    narrowed = _count_anchored(monkeypatch, "_named_gap_seeds")
    with open_capture(str(path)) as cap:
        stages = [key.pass_name for key, _, _ in _structural_pairs(cap, CheckContext(cap))]
    for stage in stages:
        got = _diff_json(str(path), "--pass", stage, "--ranks", "0,1")
        with monkeypatch.context() as m:
            m.setattr(ard, "_named_gap_seeds", lambda *a: None)
            assert _diff_json(str(path), "--pass", stage, "--ranks", "0,1") == got
    assert True in narrowed
    made = _count_anchored(monkeypatch)
    one = _report(path)
    assert made and all(made)
    assert _report(path, jobs=2) == one
    reference = _report(src)
    assert [(f["kind"], f["severity"], f["ranks"], f["introduced_by"], f["message"]) for f in one["findings"]] == [
        (f["kind"], f["severity"], f["ranks"], f["introduced_by"], f["message"]) for f in reference["findings"]
    ]


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p["refs"].__setitem__(0, [len(p["refs"]) + 5]),  # a row that is not in the subgraph
        lambda p: p["refs"].__setitem__(0, "x"),  # refs that are no list
        lambda p: p["refs"].pop(),  # a row short
        lambda p: [r.append(0) for r in p["refs"]],  # a ref more than each row has
    ],
)
def test_refs_that_do_not_fit_fall_back_to_the_tables(sample_capture, tmp_path, monkeypatch, damage):
    """Refs out of range, of another form, short, or not what the rows read say: the structural
    rank diffs are made from the decoded tables, and the report is theirs."""
    src = sample_capture(*ALL_BUGS)
    path = tmp_path / "damaged"
    _with_digests(src, path, damage)
    with open_capture(str(path)) as cap:
        ctx = CheckContext(cap)
        for _key, ga, gb in _structural_pairs(cap, ctx):
            assert ard.anchored_rank_diff(cap, 0, ga, ctx._stage_ctx(0, ga), 1, gb, ctx._stage_ctx(1, gb)) is None
    assert _report(path) == _report(path, strategies=NOT_ANCHORED)


def test_refs_are_decoded_when_a_diff_asks_for_them(sample_capture, tmp_path):
    """A record's refs stay undecoded until a diff asks for them (a positional rank diff never
    does); refs that do not parse (the md5 made to match) are then no refs, and the reading
    problem is named as when the record is read whole."""
    import hashlib

    from graphtrain_inspect.capture.shared.logformat import split_records

    path = tmp_path / "digests"
    _with_digests(sample_capture(*ALL_BUGS), path)
    with open_capture(str(path)) as cap:
        gid = next(g for g in cap.graphs(0) if cap.row_digests(0, g) is not None)
        d = cap.row_digests(0, gid)
        assert d._refs is not None and d._refs._text is not None  # not decoded yet
        whole = cap.log_file(0).payload(cap.graph_record(0, gid, logformat.ROW_DIGESTS))
        assert [r for k in range(len(d.counts)) for r in d.sub_refs(k)] == whole["refs"]
        assert d._refs._text is None
    log = path / logformat.log_file_name(0)
    out = []
    for _, line, payload in split_records(log.read_bytes()):
        if b'"gti_row_digests"' in line and gid.encode() in line:
            body = payload[0][1:].replace(b'"refs":[[', b'"refs":[[,', 1)
            env = logformat.parse_envelope_line(line)
            line = line.replace(env["has_payload"].encode(), hashlib.md5(body).hexdigest().encode())
            payload = [b"\t" + body]
        out.append(b"\n".join([line, *payload]) + b"\n")
    log.write_bytes(b"".join(out))
    with open_capture(str(path)) as cap:
        d = cap.row_digests(0, gid)
        assert d is not None and not [e for e in cap.all_errors() if e.path == str(log)]
        assert d.sub_refs(0) is None
        assert [e for e in cap.all_errors() if e.path == str(log) and "parse" in str(e)]


def _diff_json(*argv: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["diff", *argv, "--nodes", "--json"]) == 0
    return json.loads(out.getvalue())


def test_diff_reads_pass_diffs_and_rank_diffs_by_anchors(sample_capture, tmp_path, monkeypatch):
    """`diff --pass P --rank R` lists, from digests and refs, the changes the decoded tables list
    (every pass on both ranks of the sample with every bug); `diff --pass P --ranks 0,1` lists the
    rank diff `check` makes, and says so of the stage the capture's finding names."""
    src = sample_capture(*ALL_BUGS)
    path = tmp_path / "digests"
    _with_digests(src, path)
    made = _count_anchored(monkeypatch)
    narrowed = _count_anchored(monkeypatch, "_named_gap_seeds")  # gaps whose rows paired by name alone
    with open_capture(str(path)) as cap:
        names = sorted({p.name for r in cap.ranks for p in cap.passes(r) if p.before is not None})
    assert len(names) >= 5
    for rank in (0, 1):
        for name in names:
            got = _diff_json(str(path), "--pass", name, "--rank", str(rank))
            with monkeypatch.context() as m:
                m.setattr(graph_diff, "anchored_pass_diff", lambda *a: None)
                assert _diff_json(str(path), "--pass", name, "--rank", str(rank)) == got
            with monkeypatch.context() as m:  # every anchor next to a gap read, as for rank diffs
                m.setattr(ard, "_named_gap_seeds", lambda *a: None)
                assert _diff_json(str(path), "--pass", name, "--rank", str(rank)) == got
    assert made.count(True) >= len(names)  # some tables too unlike to pair by digests: decoded
    assert narrowed.count(True) >= len(names) and False in narrowed
    report = _report(path)
    finding = next(f for f in report["findings"] if f["kind"] == "rank-divergent-graph")
    got = _diff_json(str(path), "--pass", finding["evidence"]["stage"], "--ranks", "0,1")
    assert [d["counts"] for d in got["diffs"]] == [finding["evidence"]["counts"]["1"]]


@pytest.mark.parametrize("name", ["h200x2-rank-divergent", "h200x4-rank-divergent"])
def test_gpu_divergent_ranks_diffed_by_normalized_anchors(bundled_capture, tmp_path, monkeypatch, name):
    """Captures recorded on GPUs where a pass diverged on a rank (tables of other layouts, every
    row naming its rank's own device): with digests, refs and normalized digests after every
    table, every structural rank diff is made from anchors on the normalized digests, and the
    report is the document the capture gives without them (there the anchored diffs pair every
    row as the table diffs do)."""
    src = bundled_capture(name)
    path = tmp_path / name
    assert _with_digests(src, path) > 0
    reference = _report(src)
    made = _count_anchored(monkeypatch)
    got = _report(path)
    assert made and all(made)
    assert any(f["kind"] == "rank-divergent-graph" for f in got["findings"])
    assert got == reference
