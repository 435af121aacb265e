"""incomplete-capture: what a capture is missing, each problem a finding (true positives and a clean
capture with none). Hand-written captures in the real record format (inspector.testing)."""

from __future__ import annotations

import builtins
import json
import os

import orjson
import torch
import torch.fx

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.inspector.checks import check_report
from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.capture_utils import run_cli
from tests.small_captures import CaptureWriter

KIND = "incomplete-capture"


def graphs():
    return torch.fx.symbolic_trace(lambda x: torch.relu(x) + 1), torch.fx.symbolic_trace(lambda x: torch.relu(x) * 2)


def write(tmp_path, *, world=2, end=(0, 1), unfinished=(), blobs=None, status="finished"):
    """`world` ranks, each applying one pass; ranks not in `end` get no end record; ranks in
    `unfinished` start a second pass `stuck` and never finish it; `blobs` {rank: {gid: ref}}
    is put into the pass record of that rank."""
    g0, g1 = graphs()
    w = CaptureWriter(tmp_path, world_size=world)
    for r in range(world):
        rw = w.rank(r)
        seq = rw.apply("double", g0, g1)
        if r in unfinished:
            rw._write(
                logformat.PASS_START,
                {"seq": seq + 1, "name": "stuck", "before": rw.graph(g1), "time": 0.0},
                {"seq": seq + 1},
            )
        if blobs and r in blobs:
            before, after = rw.graph(g0), rw.graph(g1)
            refs = {gid: blobs[r](gid) for gid in (before, after)}
            rw._write(
                logformat.PASS,
                {
                    "seq": seq + 2,
                    "name": "with_blobs",
                    "before": before,
                    "after": {"out": after},
                    "status": "ok",
                    "blobs": refs,
                },
                {"seq": seq + 2, "status": "ok"},
            )
        if r in end:
            rw.end()
    w.finish(status=status)
    return tmp_path


def incomplete(path) -> list:
    cap = open_capture(str(path))
    return [f for f in check_report(cap).findings if f.kind == KIND]


def problems(fs) -> set:
    return {(f.evidence["problem"], tuple(f.ranks), f.severity) for f in fs}


def test_complete_capture_has_no_finding(tmp_path):
    assert incomplete(write(tmp_path)) == []


def test_missing_rank_and_empty_log(tmp_path):
    d = write(tmp_path, world=3, end=(0, 1, 2))
    (d / logformat.log_file_name(1)).unlink()
    (d / logformat.log_file_name(2)).write_bytes(b"")
    fs = incomplete(d)
    # an empty log is reported, and is no rank
    assert problems(fs) == {("missing-rank", (1,), "warning"), ("empty-log", (2,), "warning")}
    msg = {f.ranks[0]: f.message for f in fs}
    assert f"{logformat.log_file_name(1)} is missing" in msg[1] and "empty log: not counted as rank 2" in msg[2]
    assert open_capture(str(d)).ranks == [0]


def test_a_rank_that_never_wrote_is_not_missing(tmp_path):
    """Compile on one rank: the other ranks run no captured pass, write no log, and the manifest
    does not list them. That is not a missing rank (the world size is not evidence)."""
    d = write(tmp_path, world=2)
    (d / logformat.log_file_name(1)).unlink()
    m = orjson.loads((d / logformat.MANIFEST_NAME).read_bytes())
    del m["ranks"]["1"]
    (d / logformat.MANIFEST_NAME).write_bytes(orjson.dumps(m))
    assert incomplete(d) == []


def test_killed_rank_inside_a_pass(tmp_path):
    d = write(tmp_path, end=(0,), unfinished=(1,), status="failed")
    m = orjson.loads((d / logformat.MANIFEST_NAME).read_bytes())
    m.update(exit_code=1)
    (d / logformat.MANIFEST_NAME).write_bytes(orjson.dumps(m))
    fs = incomplete(d)
    assert problems(fs) == {("no-end-record", (1,), "warning"), ("pass-unfinished", (1,), "warning")}
    stuck = next(f for f in fs if f.evidence["problem"] == "pass-unfinished")
    assert stuck.introduced_by == "stuck" and stuck.introduced_seq == 1 and "exited with 1" in stuck.message


def test_truncated_log_is_damaged_and_has_no_end(tmp_path):
    d = write(tmp_path)
    p = d / logformat.log_file_name(1)
    p.write_bytes(p.read_bytes()[:-30])  # the end record cut mid-payload
    fs = incomplete(d)
    assert problems(fs) == {("no-end-record", (1,), "warning"), ("damaged", (1,), "warning")}
    dmg = next(f for f in fs if f.evidence["problem"] == "damaged")
    assert logformat.log_file_name(1) in dmg.evidence["first"] and "truncated" in dmg.evidence["first"]


def test_still_running_is_info(tmp_path):
    d = write(tmp_path, end=(0,), status="running")
    assert problems(incomplete(d)) == {("no-end-record", (1,), "info")}


def test_stopped_capture_from_the_status_file(tmp_path):
    d = write(tmp_path, end=(0,))
    (d / logformat.STATUS_DIR).mkdir()
    status = {
        "rank": 1,
        "pid": 4242,
        "state": "stopped",
        "reason": "OSError: [Errno 28] No space left on device",
        "records": 9,
    }
    (d / logformat.STATUS_DIR / logformat.status_file_name(1, 4242)).write_bytes(logformat.encode_status(status))
    fs = incomplete(d)
    assert problems(fs) == {("stopped", (1,), "warning")}
    assert "No space left on device" in fs[0].message


def test_missing_blob_and_references_outside_the_capture(tmp_path, monkeypatch):
    present = "c" * 64
    refs = {
        0: lambda gid: {"sha256": present, "path": logformat.blob_relpath(present), "bytes": 3},
        1: lambda gid: {"sha256": "a" * 64, "path": next(outside), "bytes": 3},
    }
    outside = iter(["../../etc/passwd", "/etc/passwd"])
    d = write(tmp_path, blobs=refs)
    (d / logformat.BLOB_DIR).mkdir()
    (d / logformat.blob_relpath(present)).write_bytes(b"abc")
    opened: list[str] = []
    real_open, real_os_open, real_lstat, real_stat = builtins.open, os.open, os.lstat, os.stat
    for mod, name, real in (
        (builtins, "open", real_open),
        (os, "open", real_os_open),
        (os, "lstat", real_lstat),
        (os, "stat", real_stat),
    ):
        monkeypatch.setattr(mod, name, lambda p, *a, _real=real, **k: (opened.append(str(p)), _real(p, *a, **k))[1])
    fs = incomplete(d)
    monkeypatch.undo()
    assert problems(fs) == {("bad-blob-reference", (1,), "warning")}
    assert "../../etc/passwd" in fs[0].message and "refused" in fs[0].message
    assert any("'/etc/passwd'" in x for x in fs[0].evidence["references"]) and len(fs[0].evidence["references"]) == 2
    assert not any("passwd" in p for p in opened), [p for p in opened if "passwd" in p]
    (d / logformat.blob_relpath(present)).unlink()
    assert problems(incomplete(d)) == {("bad-blob-reference", (1,), "warning"), ("missing-blob", (0,), "warning")}


def test_no_manifest_is_info(tmp_path):
    d = write(tmp_path)
    (d / logformat.MANIFEST_NAME).unlink()
    assert problems(incomplete(d)) == {("no-manifest", (), "info")}


def test_check_command_table_and_exit_status(tmp_path):
    d = write(tmp_path, end=(0,), unfinished=(1,))
    r = run_cli("check", str(d), "--color", "never")
    assert r.returncode == 0, r.stderr  # warnings only: the training has no bug
    assert "incomplete-capture  (2 warnings)" in r.stdout
    assert "in the capture itself (not in a graph)" in r.stdout and "introduced by stuck" in r.stdout
    r = run_cli("check", str(d), "--json", "--check", KIND)
    doc = json.loads(r.stdout)
    assert {f["evidence"]["problem"] for f in doc["findings"]} == {"no-end-record", "pass-unfinished"}
    assert doc["summary"]["checks"][-1] == KIND


def test_a_stray_log_keeps_the_real_ranks_findings(sample_capture, tmp_path):
    """A copy of rank 1's log saved as rank 5's and an empty rank 7 log. Compared as ranks, the
    copy would turn both rank-baked ERRORs into WARNINGs ("equals no rank-derived value") and
    check would exit 0. Both logs are left out and reported; the findings and the exit code
    are those of the real capture."""
    import json
    import shutil

    from tests.capture_utils import run_cli

    real = sample_capture("rank-baked")
    d = tmp_path / "stray"
    shutil.copytree(real, d, ignore=shutil.ignore_patterns("*.gpkl"))
    shutil.copy(d / logformat.log_file_name(1), d / logformat.log_file_name(5))
    (d / logformat.log_file_name(7)).write_bytes(b"")

    def findings(path):
        r = run_cli("check", str(path), "--json", "--shared-graph")  # the rank literals as errors
        return (
            r.returncode,
            [f for f in json.loads(r.stdout)["findings"] if f["kind"] != KIND],
            {f["evidence"]["problem"]: f for f in json.loads(r.stdout)["findings"] if f["kind"] == KIND},
            r.stderr,
        )

    rc0, want, _, _ = findings(real)
    rc, got, capture_problems, err = findings(d)
    assert rc0 == rc == 1
    assert [(f["kind"], f["severity"], f["ranks"], f["node"]) for f in got] == [
        (f["kind"], f["severity"], f["ranks"], f["node"]) for f in want
    ]
    assert any(f["severity"] == "error" and f["kind"] == "rank-baked-constant" for f in got)
    assert capture_problems["stray-log"]["ranks"] == [5] and "rank 1's" in capture_problems["stray-log"]["message"]
    assert capture_problems["empty-log"]["ranks"] == [7]
    assert "missing-rank" not in capture_problems
    lines = err.strip().splitlines()
    assert any(logformat.log_file_name(5) in l and "rank 1's" in l for l in lines), err
    assert any(logformat.log_file_name(7) in l and "empty log" in l for l in lines), err
    assert not any("record of rank 1 in the log of rank 5" in l for l in lines), err
    r = run_cli("ls", str(d), "--json")
    assert sorted(rk["rank"] for rk in json.loads(r.stdout)["ranks"]) == [0, 1]


def test_linked_blobs_are_reported(sample_capture, tmp_path):
    """docs/log-format.md: a linked blobs/ directory and linked blob files are reported by check."""
    import json
    import shutil

    from tests.capture_utils import run_cli

    real = sample_capture("rank-baked")
    d = tmp_path / "files"
    shutil.copytree(real, d)
    blob = sorted((d / logformat.BLOB_DIR).iterdir())[0]
    outside = tmp_path / blob.name
    shutil.move(blob, outside)
    blob.symlink_to(outside)
    r = run_cli("check", str(d), "--json")
    f = [
        f for f in json.loads(r.stdout)["findings"] if f["kind"] == KIND and f["evidence"]["problem"] == "linked-blobs"
    ]
    assert f and f[0]["evidence"]["blobs"] == [f"{logformat.BLOB_DIR}/{blob.name}"], r.stdout[-2000:]
    d2 = tmp_path / "dir"
    shutil.copytree(real, d2)
    shutil.move(d2 / logformat.BLOB_DIR, tmp_path / "blobs-elsewhere")
    (d2 / logformat.BLOB_DIR).symlink_to(tmp_path / "blobs-elsewhere")
    r = run_cli("check", str(d2), "--json")
    f = [
        f for f in json.loads(r.stdout)["findings"] if f["kind"] == KIND and f["evidence"]["problem"] == "linked-blobs"
    ]
    assert len(f) == 1 and "is a link" in f[0]["message"] and f[0]["ranks"] == [], r.stdout[-2000:]
