"""Every log tlparse reads, read here: tlparse's own test corpus (tests/data/tlparse_inputs/, the
logs of pytorch/tlparse's tests/inputs/ that `tlparse --strict` accepts), CRLF copies, blank
payload lines, a last record without its newline, and a CRLF copy of one of our captures."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.inspector.checks import run_checks
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.logscan import LogFile
from graphtrain_inspect.inspector.read.progressive import ChunkedLogFile
from tests.capture_utils import tlparse_exe

DATA = Path(__file__).resolve().parents[1] / "data" / "tlparse_inputs"
ARCHIVE = DATA / "strict_accepted.tar.xz"


def _names() -> list[str]:
    with tarfile.open(ARCHIVE) as tf:
        return sorted(m.name for m in tf.getmembers() if m.isfile())


NAMES = _names()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tlparse_inputs")
    with tarfile.open(ARCHIVE) as tf:
        tf.extractall(root, filter="data")
    return root


def _strict(path: Path, out: Path) -> int:
    return subprocess.run(
        [tlparse_exe(), str(path), "-o", str(out), "--strict", "--no-browser"], capture_output=True
    ).returncode


def test_the_corpus_is_what_tlparse_accepts(corpus, tmp_path):
    """25 logs (every non-empty log of tlparse's tests/inputs/ that --strict accepts; see the
    README): among them a CRLF log, last records without a newline, seven ranks' logs."""
    assert len(NAMES) == 25
    for i, name in enumerate(NAMES):
        assert _strict(corpus / name, tmp_path / str(i)) == 0, name
    data = {n: (corpus / n).read_bytes() for n in NAMES}
    assert any(b"\r\n" in d for d in data.values())
    assert sum(not d.endswith(b"\n") for d in data.values()) >= 3


def _read_all(cap) -> tuple[int, int]:
    """(records with a payload, graphs) of a capture, every payload and graph decoded."""
    payloads = graphs = 0
    for rank in cap.ranks:
        log = cap.log_file(rank)
        for rec in log.records:
            if rec.has_payload:
                payloads += 1
                assert log.payload(rec) is not None, (rank, rec.kind, log.line_of(rec.offset))
        for gid in cap.graphs(rank):
            graphs += 1
            assert cap.graph_code(rank, gid) is not None, (rank, gid)
            assert cap.node_count(rank, gid) is not None, (rank, gid)
    return payloads, graphs


@pytest.mark.parametrize("name", NAMES)
def test_every_strict_log_reads_clean(corpus, name):
    with open_capture(str(corpus / name)) as cap:
        assert [str(e) for e in cap.all_errors()] == []
        payloads, graphs = _read_all(cap)
        assert [str(e) for e in cap.all_errors()] == []
        # every graph record of the log became a graph
        records = [r for r in cap.log_file(cap.ranks[0]).records]
        kinds = {
            "dynamo_output_graph",
            "aot_joint_graph",
            "aot_forward_graph",
            "aot_backward_graph",
            "aot_inference_graph",
        }
        assert graphs >= len({r.env["has_payload"] for r in records if r.kind in kinds and r.has_payload})
        assert payloads > 0
        # correct graphs: nothing to report (a single rank's log is not a compile-on-one-rank
        # capture, so its own-device literals are not a shared graph's). torch.compile's own events
        # are real (tlparse's tests break backends on purpose): tests/read/test_compile_events.py
        compile_kinds = ("compile-failure", "graph-break", "recompile", "rank-divergent-compile")
        assert [
            (f.kind, f.severity, f.message)
            for f in run_checks(cap)
            if f.severity != "info" and f.kind not in compile_kinds
        ] == []


def test_progressive_scan_agrees_in_small_steps(corpus, tmp_path):
    """The TUI's chunked scan, in steps that cut CRLF line ends and empty lines anywhere, finds the
    records the one-pass scan finds."""
    crlf = corpus / "multi_rank_logs" / "dedicated_log_torch_trace_rank_1.log"
    blank = tmp_path / "blank.log"
    blank.write_bytes(_with_blank_lines((corpus / "comp_metrics.log").read_bytes()))
    for path in (crlf, blank, corpus / "chromium_events.log"):
        whole = LogFile(str(path))
        part = ChunkedLogFile(str(path))
        steps = 0
        while not part.done:
            part.scan_more(4093 if path == crlf else 97)
            steps += 1
        assert steps > 10
        assert [(r.offset, r.payload_start, r.end, r.kind) for r in part.records] == [
            (r.offset, r.payload_start, r.end, r.kind) for r in whole.records
        ]
        assert part.verify() == whole.verify() == 0
        assert part.errors == whole.errors == []


def _with_blank_lines(data: bytes) -> bytes:
    """A log with empty lines where tlparse skips them: inside payloads (LF and CRLF), between
    records, at the start and the end."""
    out = data.replace(b"\n\t", b"\n\n\t", 3).replace(b"\n\t", b"\n\r\n\t", 7).replace(b"\nV", b"\n\nV", 5)
    return b"\n" + out + b"\n\n"


def test_blank_payload_lines_read_as_tlparse_reads_them(corpus, tmp_path):
    log = tmp_path / "blank.log"
    log.write_bytes(_with_blank_lines((corpus / "comp_metrics.log").read_bytes()))
    assert _strict(log, tmp_path / "tl") == 0
    with open_capture(str(log)) as a, open_capture(str(corpus / "comp_metrics.log")) as b:
        assert _read_all(a) == _read_all(b)
        assert a.all_errors() == []


def test_a_last_record_cut_short_is_still_truncated(corpus, tmp_path):
    """Without its final newline a whole record reads; cut inside its payload it does not."""
    data = (corpus / "simple.log").read_bytes()
    assert not data.endswith(b"\n")
    cut = tmp_path / "cut.log"
    cut.write_bytes(data[:-3])
    with open_capture(str(cut)) as cap:
        errs = [str(e) for e in cap.all_errors()]
    assert len(errs) == 1 and "last record (chromium_event) is truncated" in errs[0]


def test_split_records_reads_crlf_and_blank_lines(corpus):
    data = (corpus / "comp_metrics.log").read_bytes()
    plain = list(logformat.split_records(data))
    crlf = list(logformat.split_records(_with_blank_lines(data).replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")))
    assert [(env, lines) for _, env, lines in crlf] == [(env, lines) for _, env, lines in plain]


def _crlf_copy(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst)
    for log in dst.glob("*.log"):
        log.write_bytes(log.read_bytes().replace(b"\n", b"\r\n"))


def _check_json(path: Path) -> dict:
    r = subprocess.run(
        [sys.executable, "-m", "graphtrain_inspect.inspector.cli", "check", str(path), "--json"],
        capture_output=True,
        text=True,
    )
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def test_a_crlf_copy_of_a_capture_gives_the_same_findings(tmp_path):
    from graphtrain_inspect.inspector.read import bundled

    src = bundled.path_of("h200x2-coor-rank-baked")
    _crlf_copy(src, tmp_path / "crlf")
    a, b = _check_json(src), _check_json(tmp_path / "crlf")
    assert a["findings"] == b["findings"] and any(f["severity"] == "error" for f in a["findings"])
    assert b["summary"]["read_errors"] == []
    assert _strict(next((tmp_path / "crlf").glob("*rank_0*.log")), tmp_path / "tl") == 0


def test_payload_bytes_is_payload_texts_text(corpus, tmp_path):
    """`payload_bytes` (the stored bytes with their tabs deleted, where the md5 agrees) is the
    text `payload_text` reads, on every record of tlparse's logs, tabs and blank lines included."""
    blank = tmp_path / "blank.log"
    blank.write_bytes(_with_blank_lines((corpus / "comp_metrics.log").read_bytes()))
    texts = 0
    for path in [*sorted(corpus.glob("*.log")), blank]:
        log = LogFile(str(path))
        for rec in log.records:
            got = log.payload_text(rec)
            assert log.payload_bytes(rec) == (got[0] if got is not None else None), (path.name, rec.kind)
            texts += got is not None
    assert texts > 100


def _records(log) -> list[tuple]:
    return [(r.index, r.kind, r.offset, r.payload_start, r.end, r.env) for r in log.records]


def test_skimmed_envelopes_read_as_decoded_ones(corpus, tmp_path, monkeypatch):
    """Records of torch's kinds that no reader reads (`logformat.SKIMMED_KINDS`) are scanned by
    their first key and decoded when read: every log of tlparse's corpus (LF, CRLF, blank lines;
    the one-pass and the chunked scan) gives the records, envelopes and errors that decoding
    every envelope at the scan gives."""
    blank = tmp_path / "blank.log"
    blank.write_bytes(_with_blank_lines((corpus / "cache_hit_miss.log").read_bytes()))
    paths = [*sorted(corpus.rglob("*.log")), *sorted(corpus.glob("*.txt")), blank]
    skimmed = 0
    for path in paths:
        got = LogFile(str(path))
        part = ChunkedLogFile(str(path))
        while not part.done:
            part.scan_more(4093)
        skimmed += sum(type(r._env) is bytes for r in got.records)
        with monkeypatch.context() as m:
            m.setattr(logformat, "SKIMMED_KINDS", frozenset())
            want = LogFile(str(path))
        assert _records(got) == _records(part) == _records(want), path.name
        assert got.errors == part.errors == want.errors
    assert skimmed > 1000


def test_a_damaged_skimmed_line_is_told_where_its_form_is_wrong(corpus, tmp_path):
    """A skimmed line is checked for its form at the scan (its first key, its closing brace): one
    cut short is an error naming the file and line, as before; one whose middle is damaged keeps
    its kind and place and reads as an empty envelope (nothing here reads its fields)."""
    data = (corpus / "cache_hit_miss.log").read_bytes()
    lines = data.split(b"\n")
    at = [i for i, ln in enumerate(lines) if b'] {"describe_tensor": {' in ln]
    assert len(at) >= 2
    cut, hurt = at[0], at[1]
    lines[cut] = lines[cut][:-5]
    lines[hurt] = lines[hurt].replace(b'"id": ', b'"id" ', 1)
    path = tmp_path / "damaged.log"
    path.write_bytes(b"\n".join(lines))
    log = LogFile(str(path))
    errs = [str(e) for e in log.errors]
    assert len(errs) == 1 and errs[0].startswith(f"{path}:{cut + 1}: envelope is not valid JSON"), errs
    rec = next(r for r in log.records if log.line_of(r.offset) == hurt + 1)
    assert rec.kind == "describe_tensor" and rec.env == {}


def _scanned(path: Path, fast: bool) -> tuple[list, list]:
    from graphtrain_inspect.inspector.read import logscan

    saved = logscan.FAST_SKIMMED_LINES
    logscan.FAST_SKIMMED_LINES = fast
    try:
        log = LogFile(str(path))
    finally:
        logscan.FAST_SKIMMED_LINES = saved
    records = [(r.index, r.kind, r.offset, r.payload_start, r.end, r.env, r.has_payload) for r in log.records]
    return records, [str(e) for e in log.errors]


def _skimmed_edges(data: bytes) -> bytes:
    """Skimmed records where the short way must not be taken: followed by a payload line, by an
    empty line (LF and CRLF), by a line that is no record, ending the file without a newline, with
    a CRLF end, and one that is not whole JSON."""
    lines = [ln for ln in data.split(b"\n") if b'] {"describe_tensor"' in ln][:6]
    assert len(lines) == 6, "the log has describe_tensor records"
    a, b, c, d, e, f = lines
    return (
        data
        + a
        + b"\n\tstray payload line\n"
        + b
        + b"\n\n"
        + c
        + b"\n\r\n"
        + d
        + b"\nnot a record\n"
        + e
        + b"\r\n"
        + f[:-1]
        + b"\n"
        + f
    )


def test_skimmed_records_read_the_short_way_are_the_records_of_the_general_way(corpus, compile_events_trace, tmp_path):
    """`LogFile._scan` takes a skimmed record followed by a line that starts a record the short
    way (FAST_SKIMMED_LINES): the same records, envelopes and reading problems as the general way,
    on tlparse's corpus, torch's log of a program with breaks and recompiles, CRLF copies and the
    lines around a skimmed record where the short way must step aside."""
    from graphtrain_inspect.inspector.read import logscan

    torch_logs = sorted(Path(compile_events_trace).glob("*.log"))
    assert torch_logs
    edges = tmp_path / "edges.log"
    edges.write_bytes(_skimmed_edges(torch_logs[0].read_bytes()))
    crlf = tmp_path / "crlf.log"
    crlf.write_bytes(torch_logs[0].read_bytes().replace(b"\n", b"\r\n"))
    paths = [corpus / n for n in NAMES] + torch_logs + [edges, crlf]
    taken = 0
    real = logscan.kind_problem
    calls = [0]

    def counted(*a):
        calls[0] += 1
        return real(*a)

    logscan.kind_problem = counted
    try:
        for path in paths:
            general = _scanned(path, fast=False)
            calls[0] = 0
            short = _scanned(path, fast=True)
            taken += len(short[0]) - calls[0]  # records the short way made, past kind_problem
            assert short == general, path
    finally:
        logscan.kind_problem = real
    assert _scanned(edges, fast=True)[1], "the edges hold reading problems"
    assert taken > 100, taken
