"""Reading captures: lazy index, bad input gives one clear line, import hygiene of inspector/."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.inspector.errors import CaptureUnreadable
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.logscan import LogFile
from tests.capture_utils import ROOT as REPO_ROOT

ROOT = str(REPO_ROOT)


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "graphtrain_inspect.inspector.cli", *args],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=120,
    )


def write_log(path, records: list[bytes]):
    with open(path, "wb") as f:
        for r in records:
            f.write(r)


def rec(kind, payload, rank=0, meta=None):
    return logformat.encode_record(kind, payload, rank=rank, meta=meta)


def header(rank=0, world=2):
    return rec(
        logformat.HEADER,
        {"format": "graphtrain-inspect", "format_version": 1, "rank": rank, "local_rank": rank, "world_size": world},
        rank,
    )


def graph_records(
    rank,
    code="class G(torch.nn.Module):\n"
    "    def forward(self, x):\n"
    "        add = torch.ops.aten.add.Tensor(x, 1)\n"
    "        return (add,)\n",
):
    gid = logformat.graph_id(code)
    return gid, [rec(logformat.GRAPH_CODE, code, rank, {"gid": gid, "nodes": 3})]


def pass_record(rank, seq, name, before, after):
    return rec(
        logformat.PASS,
        {
            "seq": seq,
            "name": name,
            "before": before,
            "after": {"out": after},
            "pipeline": 0,
            "traced": seq == 0,
            "status": "ok",
        },
        rank,
        {"seq": seq, "status": "ok"},
    )


def small_capture(tmp_path, ranks=(0, 1), manifest=True):
    code_b = (
        "class G(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        add = torch.ops.aten.add.Tensor(x, 1)\n"
        "        return (add,)\n"
    )
    code_a = (
        "class G(torch.nn.Module):\n    def forward(self, x):\n        mul = torch.ops.aten.mul.Tensor(x, 2)\n   "
        "     add = torch.ops.aten.add.Tensor(mul, 1)\n        return (add,)\n"
    )
    for r in ranks:
        gb, rb = graph_records(r, code_b)
        ga, ra = graph_records(r, code_a)
        write_log(
            tmp_path / logformat.log_file_name(r),
            [header(r), *rb, *ra, pass_record(r, 0, "double", gb, ga), rec(logformat.END, {"passes": 1}, r)],
        )
    if manifest:
        (tmp_path / "manifest.json").write_bytes(
            orjson.dumps(
                {
                    "format": "graphtrain-inspect",
                    "format_version": 1,
                    "status": "finished",
                    "ranks": {str(r): {"log": logformat.log_file_name(r)} for r in ranks},
                }
            )
        )
    return tmp_path


def test_lazy_index_reads_no_graph_payload(tmp_path, monkeypatch):
    small_capture(tmp_path)
    decoded = []
    orig = logformat.decode_payload

    def spy(lines, env, **kw):
        decoded.append(logformat.record_kind(env))
        return orig(lines, env, **kw)

    monkeypatch.setattr(logformat, "decode_payload", spy)
    cap = open_capture(str(tmp_path))
    assert cap.ranks == [0, 1]
    assert logformat.GRAPH_CODE not in decoded  # opening decodes headers only
    ps = cap.passes(0)
    assert [p.name for p in ps] == ["double"]
    assert logformat.GRAPH_CODE not in decoded
    t = cap.node_table(0, ps[0].after["out"])  # parsed from the code on demand
    assert [r["target"] for r in t.root.nodes] == ["x", "aten.mul.Tensor", "aten.add.Tensor", "output"]
    assert t.source == "text"


def test_index_record_offsets(tmp_path):
    small_capture(tmp_path)
    log = LogFile(str(tmp_path / logformat.log_file_name(0)))
    assert [r.kind for r in log.records] == [
        logformat.HEADER,
        logformat.GRAPH_CODE,
        logformat.GRAPH_CODE,
        logformat.PASS,
        logformat.END,
    ]
    data = open(log.path, "rb").read()
    for r in log.records:
        assert data[r.offset : r.offset + 1] == b"V"
        assert r.end == len(data) or data[r.end : r.end + 1] == b"V"
    assert log.line_of(log.records[1].offset) == 3
    assert not log.errors


def _one_line(text: str) -> list[str]:
    lines = [l for l in text.splitlines() if l.strip()]
    assert "Traceback" not in text
    return lines


def test_truncated_last_record(tmp_path):
    small_capture(tmp_path)
    p = tmp_path / logformat.log_file_name(1)
    data = p.read_bytes()
    p.write_bytes(data[:-25])  # the end record cut mid-payload
    cap = open_capture(str(tmp_path))
    errs = [str(e) for e in cap.all_errors()]
    assert any("truncated" in e and logformat.log_file_name(1) in e and ":" in e for e in errs)
    assert [p.name for p in cap.passes(1)] == ["double"]  # everything before it stays usable
    r = cli("ls", str(tmp_path), "--color", "never")
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert "truncated" in r.stdout


def test_garbage_line_and_bad_md5(tmp_path):
    small_capture(tmp_path)
    p = tmp_path / logformat.log_file_name(0)
    lines = p.read_bytes().split(b"\n")
    lines.insert(2, b"this is not a record")
    # damage the payload of the pass record (its md5 no longer matches)
    for i, l in enumerate(lines):
        if b'"gti_pass"' in l:
            lines[i + 1] = lines[i + 1].replace(b"double", b"triple")
    p.write_bytes(b"\n".join(lines))
    cap = open_capture(str(tmp_path))
    assert cap.passes(0) == []  # the damaged pass record is dropped ...
    errs = [str(e) for e in cap.all_errors()]
    assert any(e.startswith(str(p) + ":3: not a structured-log line") for e in errs), errs
    assert any("md5" in e and str(p) in e for e in errs)
    assert [x.name for x in cap.passes(1)] == ["double"]  # ... the other rank is fine


def test_unknown_kind_and_missing_rank(tmp_path):
    small_capture(tmp_path)
    p = tmp_path / logformat.log_file_name(0)
    bad = logformat.encode_record(logformat.HEADER, {}, rank=0).replace(b'"gti_header"', b'"gti_future"')
    no_rank = logformat.encode_record(logformat.ERROR, {"where": "x"}, rank=0).replace(b',"rank":0', b"")
    p.write_bytes(p.read_bytes() + bad + no_rank)
    cap = open_capture(str(tmp_path))
    errs = [str(e) for e in cap.all_errors()]
    assert any("unknown record kind 'gti_future'" in e for e in errs)
    assert any("without a rank" in e for e in errs)


def test_missing_rank_log(tmp_path):
    small_capture(tmp_path)
    m = orjson.loads((tmp_path / "manifest.json").read_bytes())
    m["ranks"]["2"] = {"log": logformat.log_file_name(2)}
    (tmp_path / "manifest.json").write_bytes(orjson.dumps(m))
    cap = open_capture(str(tmp_path))
    assert any("rank 2: log missing" in str(e) for e in cap.errors)


def test_not_a_capture_and_empty_file(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(CaptureUnreadable, match="not a capture"):
        open_capture(str(tmp_path))
    r = cli("check", str(tmp_path))
    assert r.returncode == 2 and len(_one_line(r.stderr)) == 1 and "not a capture" in r.stderr
    empty = tmp_path / logformat.log_file_name(0)
    empty.write_bytes(b"")
    r = cli("ls", str(empty))
    assert r.returncode == 2 and "empty file" in r.stderr and "Traceback" not in r.stderr
    r = cli("diff", str(tmp_path / "nope"), "--pass", "x")
    assert r.returncode == 2 and "no such file" in r.stderr


def test_newer_format_version_is_read_with_a_note(tmp_path):
    small_capture(tmp_path)
    m = orjson.loads((tmp_path / "manifest.json").read_bytes())
    m["format_version"] = logformat.FORMAT_VERSION + 1
    (tmp_path / "manifest.json").write_bytes(orjson.dumps(m))
    cap = open_capture(str(tmp_path))
    assert any("newer" in str(e) for e in cap.errors)
    assert cap.passes(0)


def test_check_and_ls_run_without_torch(tmp_path):
    """The commands themselves (not only their modules) never import torch."""
    small_capture(tmp_path)
    code = (
        "import sys\n"
        "from inspector import cli\n"
        f"rc = cli.main(['check', {str(tmp_path)!r}, '--json'])\n"
        f"cli.main(['ls', {str(tmp_path)!r}])\n"
        f"cli.main(['diff', {str(tmp_path)!r}, '--pass', 'double'])\n"
        "print('HEAVY', sorted(k for k in ('textual', 'rich', 'torch') if k in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stdout


# ---------------------------------------------------------------------------------------------
# More bad input (the damage property test is tests/read/test_reader_fuzz.py)


def test_unknown_encoding_and_record_without_payload(tmp_path):
    small_capture(tmp_path)
    p = tmp_path / logformat.log_file_name(0)
    b64 = rec(logformat.ERROR, {"where": "x"}).replace(b'"encoding":"json"', b'"encoding":"base64"')
    bare = rec(logformat.ERROR, {"where": "y"}).split(b"\n")[0] + b"\n"  # envelope line only
    p.write_bytes(p.read_bytes() + b64 + bare)
    cap = open_capture(str(tmp_path))
    errs = [str(e) for e in cap.all_errors()]
    assert any("gti_error record with encoding 'base64', expected 'json'" in e for e in errs), errs
    assert cap.capture_errors(0) == []
    errs = [str(e) for e in cap.all_errors()]
    assert any("gti_error: the record has no payload lines" in e for e in errs), errs
    assert [x.name for x in cap.passes(0)] == ["double"]


def test_damage_after_a_whole_record_does_not_cost_it(tmp_path):
    """A deleted envelope line leaves its payload under the record before; garbage lines starting
    with a tab look like payload: the record before is read without them, and they are named."""
    small_capture(tmp_path)
    p = tmp_path / logformat.log_file_name(0)
    lines = p.read_bytes().split(b"\n")
    i = next(k for k, l in enumerate(lines) if b'"gti_end"' in l)
    del lines[i]  # the end record's envelope: its payload now follows the pass record
    p.write_bytes(b"\n".join(lines))
    cap = open_capture(str(tmp_path))
    assert [x.name for x in cap.passes(0)] == ["double"]
    errs = [str(e) for e in cap.all_errors()]
    assert any(f"{p}:{i + 1}: 1 payload line(s) after the gti_pass record" in e for e in errs), errs


def test_enormous_line_is_one_short_error(tmp_path):
    small_capture(tmp_path)
    p = tmp_path / logformat.log_file_name(0)
    data = p.read_bytes()
    cut = data.rfind(b"\n", 0, data.index(b'"gti_pass"')) + 1
    p.write_bytes(data[:cut] + b"x" * (8 << 20) + b"\n" + data[cut:])
    r = cli("ls", str(tmp_path), "--color", "never")
    assert r.returncode == 0 and "Traceback" not in r.stderr
    err = [l for l in (r.stdout + r.stderr).splitlines() if "a line of 8.0 MB, longer than the 1 MB" in l]
    assert len(err) == 1 and len(err[0]) < 300 and f"{p}:" in err[0], r.stdout + r.stderr
    assert "double" in r.stdout
    # the TUI's reader, indexing in steps, says the same and reads the rest alike
    from graphtrain_inspect.inspector.read.progressive import ProgressiveLoader

    loader = ProgressiveLoader(str(tmp_path))
    while not loader.done:
        loader.step(1 << 20)
    snap = loader.snapshot()
    assert [x.name for x in snap.passes(0)] == ["double"]
    assert [str(e) for e in snap.all_errors()] == [str(e) for e in open_capture(str(tmp_path)).all_errors()]
    loader.close()


def test_torch_trace_directory_of_a_single_process(tmp_path):
    """TORCH_TRACE of a run without torchrun names its log dedicated_log_torch_trace_<random>.log
    (no rank): the directory is read as torch's logs, not refused as 'not a capture'."""
    import hashlib

    code = (
        "class GraphModule(torch.nn.Module):\n"
        '    def forward(self, L_x_: "f32[4][1]cpu"):\n'
        '        add: "f32[4][1]cpu" = L_x_ + 1\n'
        "        return (add,)\n"
    )
    lines = code.split("\n")
    env = {
        "dynamo_output_graph": {"sizes": {}},
        "frame_id": 0,
        "frame_compile_id": 0,
        "attempt": 0,
        "has_payload": hashlib.md5("\n".join(lines).encode()).hexdigest(),
    }
    rec_bytes = (
        b"V1121 23:14:17.147000 25246 torch/_dynamo/output_graph.py:1] "
        + orjson.dumps(env)
        + b"\n"
        + b"\n".join(b"\t" + l.encode() for l in lines)
        + b"\n"
    )
    (tmp_path / "dedicated_log_torch_trace_39agu0ny.log").write_bytes(rec_bytes)
    cap = open_capture(str(tmp_path))
    assert cap.kind == "torch_trace" and cap.ranks == [0] and not cap.all_errors()
    assert [p.name for p in cap.passes(0)] == ["dynamo"]
    r = cli("ls", str(tmp_path), "--color", "never")
    assert r.returncode == 0 and "dynamo" in r.stdout
    # a record without payload, then the payload lines of a record whose envelope line was lost:
    # they are not read as its payload (found by benchmarks/fuzz_reader.py)
    bare = (
        b'V1121 23:14:17.290000 25246 torch/_subclasses/meta_utils.py:2271] {"describe_source": {"describer_id": '
        b'0, "id": 13}}\n'
    )
    (tmp_path / "dedicated_log_torch_trace_39agu0ny.log").write_bytes(
        bare + b'\t{\n\t"name": "stray"\n\t}\n' + rec_bytes
    )
    cap = open_capture(str(tmp_path))
    log = cap.log_file(0)
    assert log.payload(log.records[0]) is None
    assert [str(e) for e in cap.all_errors()] == [
        f"{log.path}:2: payload line(s) after the describe_source record at line 1, which has none (a "
        "damaged or missing envelope line); ignored"
    ]
    assert [p.name for p in cap.passes(0)] == ["dynamo"]


def test_node_table_rows_layout_round_trip():
    """Format 2 node tables: one row per payload line, decoded whole or row by row alike; a
    one-line (format 1) table or a damaged layout is not split (readers then decode it whole)."""
    import orjson

    from graphtrain_inspect.capture.shared import logformat

    tables = {
        "graphs": [
            {
                "path": "",
                "parent_node": None,
                "nodes": [{"name": "x", "op": "placeholder", "s": "a\nb,"}, {"name": "y", "op": "output", "k": {1: 2}}],
            },
            {"path": "true_graph_0", "parent_node": "true_graph_0", "nodes": []},
        ]
    }
    payload = logformat.node_table_payload("g0", logformat.encode_node_table(tables))
    whole = orjson.loads(payload)
    assert whole["gid"] == "g0" and whole["graphs"][0]["nodes"][0]["s"] == "a\nb,"
    rec = logformat.encode_record(logformat.NODES, payload, rank=0)
    lines = [line[1:] for line in rec.split(b"\n")[1:-1]]
    assert logformat.decode_payload(lines, logformat.parse_envelope_line(rec.split(b"\n")[0])) == whole
    rows = logformat.node_table_rows(lines)
    assert [[logformat.decode_row(r) for r in sub] for _, sub in rows] == [g["nodes"] for g in whole["graphs"]]
    assert [orjson.loads(h[: -len(b',"nodes":[')] + b"}")["path"] for h, _ in rows] == ["", "true_graph_0"]
    assert logformat.node_table_rows([orjson.dumps(whole)]) is None  # format 1
    assert logformat.node_table_rows(lines[:-1]) is None  # cut off


def test_index_jumps_by_payload_bytes_and_falls_back_on_damage(tmp_path, monkeypatch):
    """Format 2 records name their payload's length: the index lands on the next envelope without
    looking at payload lines, and finds the same records as a line-by-line scan; where the bytes
    at the landing disagree (a line added inside a payload) it scans as for format 1."""
    from graphtrain_inspect.capture.shared import logformat
    from graphtrain_inspect.inspector.read.logscan import LogFile

    recs = [
        logformat.encode_record(
            logformat.GRAPH_CODE, "\n".join(f"line {i} of graph {k}" for i in range(50)), rank=0, meta={"gid": f"g{k}"}
        )
        for k in range(4)
    ]
    good = tmp_path / "good.log"
    good.write_bytes(b"".join(recs))

    def index(path):
        log = LogFile(str(path))
        return [(r.kind, r.offset, r.payload_start, r.end) for r in log.records], [str(e) for e in log.errors]

    jumped = index(good)
    landings: list[int] = []
    real = LogFile._payload_end
    monkeypatch.setattr(LogFile, "_payload_end", lambda self, env, nl: landings.append(nl) or real(self, env, nl))
    assert index(good) == jumped and len(landings) == 4
    monkeypatch.setattr(LogFile, "_payload_end", lambda self, env, nl: None)  # the line-by-line scan
    assert index(good) == jumped and len(jumped[0]) == 4 and not jumped[1]
    monkeypatch.setattr(LogFile, "_payload_end", real)
    # a payload line added in the second record: its length no longer matches
    damaged = tmp_path / "damaged.log"
    second = recs[1].replace(b"\tline 3 of graph 1\n", b"\tline 3 of graph 1\n\textra\n")
    damaged.write_bytes(recs[0] + second + recs[2] + recs[3])
    log = LogFile(str(damaged))
    assert [r.env["artifact"]["gid"] for r in log.records] == ["g0", "g1", "g2", "g3"]
    assert log.payload(log.records[1]) is None and log.payload(log.records[2]).startswith("line 0 of graph 2")


def test_node_row_and_nearest_source_are_the_tables_without_decoding_it(sample_capture):
    """`node_row` (a finding's source line: one node of a graph not decoded yet) gives what the
    whole table gives, read from the one row line of that name, and `nearest_source` (the
    nearest node with a stack, for a node without one) what the table's rows give, from the row
    lines the search reaches alone; the table stays undecoded."""
    from graphtrain_inspect.inspector.read.source_lines import nearest_source

    path = str(sample_capture("rank-baked"))
    rows_way, table_way = open_capture(path), open_capture(path)
    checked = found = 0
    gids = list(rows_way.graphs(0))[:3]
    for gid in gids:
        tables = table_way.node_table(0, gid)
        for sub in tables.graphs[:4]:
            for at in range(0, len(sub.nodes), max(1, len(sub.nodes) // 50)):
                row = sub.nodes[at]
                assert rows_way.node_row(0, gid, sub.path, row["name"]) == (True, row)
                for reach in (1, 5):
                    want = nearest_source(sub.nodes, row["name"], reach)
                    assert rows_way.nearest_source(0, gid, sub.path, row["name"], reach) == (True, want)
                    found += want is not None
                checked += 1
    assert checked > 50 and found > 50
    assert len(rows_way._tables) == 0  # no table decoded whole
    for gid in gids:  # what the lines cannot say: the whole table says it
        assert rows_way.nearest_source(0, gid, "", "no_such_node", 5) == (False, None)
        assert rows_way.node_row(0, gid, "", "no_such_node") == (True, None)
        assert rows_way.node_row(0, gid, "no/such/subgraph", "x") == (False, None)
    first = table_way.node_table(0, gids[0]).graphs[0]
    assert rows_way.nearest_source(0, gids[0], first.path, first.nodes[0]["name"], 5) == (False, None)  # decoded now


def _with_payload_line(tmp_path, size: int):
    """A small capture whose rank 0 log has a tab-led line of `size` bytes before its pass record
    (a payload line, to the scan: part of the record before it). Returns (log, line offset)."""
    small_capture(tmp_path)
    p = tmp_path / logformat.log_file_name(0)
    data = p.read_bytes()
    cut = data.rfind(b"\n", 0, data.index(b'"gti_pass"')) + 1
    p.write_bytes(data[:cut] + b"\t" + b"x" * (size - 1) + b"\n" + data[cut:])
    return p, cut


@pytest.mark.parametrize("reader", ["index", "progressive"])
def test_payload_line_over_the_limit_is_skipped_and_named(tmp_path, monkeypatch, reader):
    """A payload line longer than logformat.PAYLOAD_LINE_LIMIT (made small here) is a reading
    problem naming the file, byte offset and size; the record before it and every other record
    read as without it (bounded memory: `python -m benchmarks long-lines` measures the real limit)."""
    clean = tmp_path / "clean"
    clean.mkdir()
    small_capture(clean)
    (tmp_path / "cap").mkdir()
    p, at = _with_payload_line(tmp_path / "cap", 3 << 20)
    monkeypatch.setattr(logformat, "PAYLOAD_LINE_LIMIT", 1 << 20)
    if reader == "index":
        cap = open_capture(str(tmp_path / "cap"))
    else:
        from graphtrain_inspect.inspector.read.progressive import ProgressiveLoader

        loader = ProgressiveLoader(str(tmp_path / "cap"))
        while not loader.done:
            loader.step(256 << 10)
        cap = loader.snapshot()
    errs = [str(e) for e in cap.all_errors()]
    assert len(errs) == 1, errs
    assert errs[0].startswith(f"{p}:") and f"a payload line of 3.0 MB at byte offset {at}" in errs[0], errs
    assert "longer than the 1 MB a payload line may have" in errs[0]
    base = open_capture(str(clean))
    for r in (0, 1):
        assert [x.name for x in cap.passes(r)] == [x.name for x in base.passes(r)]
        log, blog = cap.log_file(r), base.log_file(r)
        assert [x.kind for x in log.records] == [x.kind for x in blog.records]
        assert [log.payload(x) for x in log.records] == [blog.payload(x) for x in blog.records]


def test_payload_line_under_the_limit_is_read(tmp_path):
    """The control: the same line under the limit is read as the payload line it looks like (the
    record before it then fails its md5: damaged, as any stray payload line makes it)."""
    p, _ = _with_payload_line(tmp_path, 1 << 20)
    errs = [str(e) for e in open_capture(str(tmp_path)).all_errors()]
    assert not any("a payload line of" in e for e in errs), errs
