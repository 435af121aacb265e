"""Faults during a captured run, each on a real 2-rank torchrun (gloo, CPU): a rank killed with
SIGKILL inside a pass, a log that hits the file-size limit (as on a full disk), a log deleted
and a capture directory removed under the running training. The training is never affected;
what was captured before the fault stays readable; the summary and the manifest say what happened.

(A pass that raises: tests/capture/test_capture.py::test_named_functions_and_failing_pass. Ctrl-C:
test_capture.py::test_ctrl_c_reaches_the_command_and_logs_stay_readable.)
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import orjson
import pytest

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.logscan import LogFile
from tests.capture_utils import ROOT, capture, run_cli, start_capture, torchrun

PROGRAM = "tests.programs.fault_step"


def _steps(stdout: str, rank: int) -> list[str]:
    # the ranks share the pipe: a line of one may start right after the other's text
    return [v for r, _, v in re.findall(r"rank (\d+) step (\d+) value (\d+)", stdout) if int(r) == rank]


def _expected(steps: int) -> list[str]:
    return [f"{2 * s + 1:g}" for s in range(steps)]


def _manifest(out) -> dict:
    return orjson.loads((out / logformat.MANIFEST_NAME).read_bytes())


def test_sigkill_of_one_rank_inside_a_pass(tmp_path):
    """Rank 1 is killed with SIGKILL while inside a recorded pass; torchrun then stops rank 0.
    Both logs are readable to the kill, the unfinished pass is listed as such, and the manifest
    names the ranks without an end record and how the command ended."""
    out = tmp_path / "cap"
    hold = tmp_path / "hold"
    launcher = start_capture(out, torchrun(2, PROGRAM, "--steps", "3", "--hold", str(hold)), "--no-inductor")
    deadline = time.time() + 120
    while not all((tmp_path / f"hold.{r}").exists() for r in (0, 1)):
        assert launcher.poll() is None and time.time() < deadline, launcher.communicate()[1][-3000:]
        time.sleep(0.1)
    os.kill(int((tmp_path / "hold.1").read_text()), signal.SIGKILL)
    stdout, err = launcher.communicate(timeout=120)
    assert launcher.returncode == 1, err[-3000:]  # torchrun's status for a failed worker
    assert _steps(stdout, 0) == _steps(stdout, 1) == _expected(3)

    m = _manifest(out)
    assert (m["status"], m["exit_code"], m["signal"]) == ("failed", 1, None)
    assert m["incomplete_ranks"] == [0, 1] and m["stopped_ranks"] == {} and m["still_running"] == {}
    for r in ("0", "1"):
        entry = m["ranks"][r]
        assert entry["end_record"] is False and entry["complete"] is False and entry["damaged_lines"] == 0
        (proc,) = entry["processes"]
        assert proc["state"] == "writing" and proc["alive"] is False  # died without ending
    # how each rank ended, as torchrun reaped it (capture.child_exits): rank 1 killed, rank 0 stopped by torchrun
    assert m["ranks"]["1"]["exit"] == {"exit_code": -9, "signal": "SIGKILL"}, m["ranks"]["1"]
    assert m["ranks"]["0"]["exit"] is not None and m["ranks"]["0"]["exit"]["exit_code"] != 0, m["ranks"]["0"]
    assert "rank 1: killed by SIGKILL after 3 passes (no end record)" in m["problems"], m["problems"]
    assert "rank 1: 3 passes" in err and "killed by SIGKILL after 3 passes (no end record)" in err, err

    cap = open_capture(str(out))
    assert cap.all_errors() == []  # nothing damaged: every record before the kill is whole
    for r in (0, 1):
        passes = cap.passes(r)
        assert [(p.name, p.status) for p in passes] == [
            ("step_0", "ok"),
            ("step_1", "ok"),
            ("step_2", "ok"),
            ("hold", "incomplete"),
        ]
        assert all(cap.node_table(r, p.after["out"]).node_count > 10 for p in passes[:3])
        assert cap.end(r) is None
    r = run_cli("check", str(out), "--json")
    # the training failed (rank 1 killed): an error, first; what is incomplete is a warning
    assert r.returncode == 1, r.stderr
    findings = json.loads(r.stdout)["findings"]
    first = findings[0]
    assert (first["kind"], first["severity"], first["ranks"]) == ("training-failed", "error", [1]), first
    assert first["message"].startswith("rank 1 died (SIGKILL); as a consequence rank 0 was torn down (SIG"), first
    found = {(f["ranks"][0], f["evidence"]["problem"]) for f in findings if f["kind"] == "incomplete-capture"}
    assert found == {(0, "no-end-record"), (1, "no-end-record"), (0, "pass-unfinished"), (1, "pass-unfinished")}
    r = run_cli("ls", str(out), "--color", "never")
    assert r.returncode == 0 and "started, never finished" in r.stdout and "Traceback" not in r.stderr
    assert "rank 1 killed by SIGKILL after 3 passes" in r.stdout, r.stdout


def test_write_failures_stop_the_capture_not_the_training(tmp_path):
    """Rank 1's files may not grow past 30 kB (RLIMIT_FSIZE: its log write fails as on a full
    disk); rank 0 deletes its own log at step 3. Training runs to the end with the same values;
    each capture stops at its fault and says why, in the summary and the manifest; rank 1's log
    ends at a whole record (the half-written one is cut off)."""
    out = tmp_path / "cap"
    steps = 10
    program = torchrun(
        2, PROGRAM, "--steps", str(steps), "--fsize-rank", "1", "--fsize", "30000", "--delete-log-at", "3"
    )
    r = capture(out, program, "--no-inductor")
    assert r.returncode == 0, r.stderr[-3000:]
    assert _steps(r.stdout, 0) == _steps(r.stdout, 1) == _expected(steps)
    assert "rank 1 stopped capturing" in r.stderr and "bytes of rank 1's log; training goes on" in r.stderr
    assert "rank 0 stopped capturing" in r.stderr and "the log was deleted while the capture was running" in r.stderr
    efbig = "file size limit reached (EFBIG: File too large) at "
    assert f"capture stopped: {efbig}" in r.stderr and "bytes of rank 1's log" in r.stderr
    assert "Traceback" not in r.stderr

    m = _manifest(out)
    assert m["status"] == "finished" and m["incomplete_ranks"] == [0, 1]
    assert m["stopped_ranks"]["1"].startswith(efbig) and m["stopped_ranks"]["1"].endswith(" bytes of rank 1's log")
    assert "deleted" in m["stopped_ranks"]["0"] and m["ranks"]["0"]["log_present"] is False

    log1 = out / logformat.log_file_name(1)
    assert 0 < log1.stat().st_size <= 30000
    lf = LogFile(str(log1))
    assert lf.errors == [] and lf.verify() == 0  # whole records only
    cap = open_capture(str(out))
    assert cap.stopped(1) == m["stopped_ranks"]["1"] and "deleted" in cap.stopped(0)
    passes = cap.passes(1)
    assert 1 <= len(passes) < steps and [p.name for p in passes] == [f"step_{i}" for i in range(len(passes))]
    # the pass whose record hit the limit shows as started, not finished
    assert all(p.status == "ok" for p in passes[:-1]) and passes[-1].status in ("ok", "incomplete")
    r = run_cli("check", str(out), "--json")
    assert r.returncode == 0, r.stderr
    found = {
        (f["ranks"][0], f["evidence"]["problem"])
        for f in json.loads(r.stdout)["findings"]
        if f["kind"] == "incomplete-capture"
    }
    assert {(0, "missing-rank"), (0, "stopped"), (1, "stopped")} <= found, found
    r = run_cli("ls", str(out), "--color", "never")
    assert r.returncode == 0 and f"capture stopped writing: {efbig}" in r.stdout


@pytest.mark.skipif(os.getuid() != 0, reason="a /dev/full device node in the capture needs root (mknod)")
def test_disk_full_is_named_in_summary_manifest_and_ls(tmp_path):
    """Rank 1's log is a /dev/full device node: every write fails with a real ENOSPC from the
    kernel (a link to /dev/full is not followed). Training runs to the end; the summary, the
    manifest (which ends `finished`, not `running`) and `ls` say the disk was full, where, and
    for which rank, not that the process was killed."""
    out = tmp_path / "cap"
    r = run_cli(
        "capture",
        "--out",
        str(out),
        "--no-inductor",
        "--",
        *torchrun(2, PROGRAM, "--steps", "3", "--full-log-rank", "1"),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert _steps(r.stdout, 0) == _steps(r.stdout, 1) == _expected(3)
    full = "disk full (ENOSPC: No space left on device) at 0 bytes of rank 1's log"
    assert f"capture stopped: {full}" in r.stderr, r.stderr[-3000:]
    assert "killed or crashed" not in r.stderr and "no graph pass fired" not in r.stderr
    m = _manifest(out)
    assert m["status"] == "finished" and m["stopped_ranks"] == {"1": full}, m
    assert f"rank 1: {full}" in m["problems"] and m["ranks"]["0"]["complete"] is True
    r = run_cli("ls", str(out), "--color", "never")
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert f"capture stopped writing: {full}" in r.stdout, r.stdout
    assert f"at the capture's end: rank 1: {full}" in r.stdout, r.stdout


def test_final_manifest_is_written_where_no_new_file_can_be(tmp_path):
    """The last manifest goes over the first one's own bytes (reserved at the start) when no new
    file can be made, as on a full disk: it never stays `running`."""
    from graphtrain_inspect.capture.manifest import MANIFEST_RESERVE, write_manifest

    out = tmp_path / "cap"
    out.mkdir()
    first = {"status": "running", "ranks": {}, "env": {"A": "b"}}
    write_manifest(str(out), first, first=True)
    assert (out / logformat.MANIFEST_NAME).stat().st_size == MANIFEST_RESERVE
    (out / (logformat.MANIFEST_NAME + ".tmp")).mkdir()  # the new file cannot be made
    write_manifest(str(out), {**first, "status": "finished", "exit_code": 0})
    m = _manifest(out)
    assert m["status"] == "finished" and m["exit_code"] == 0 and m["env"] == {"A": "b"}
    # too large for the reserved bytes: written without its per-rank detail and environment
    big = {"status": "failed", "exit_code": 3, "env": {"A": "b"}, "ranks": {str(i): "x" * 100 for i in range(1000)}}
    write_manifest(str(out), big)
    m = _manifest(out)
    assert (m["status"], m["exit_code"]) == ("failed", 3) and "ranks" not in m and "env" not in m
    assert (out / logformat.MANIFEST_NAME).stat().st_size == MANIFEST_RESERVE


def test_capture_directory_removed_during_the_run(tmp_path):
    out = tmp_path / "cap"
    r = run_cli(
        "capture",
        "--out",
        str(out),
        "--no-inductor",
        "--",
        *torchrun(2, PROGRAM, "--steps", "4", "--remove-dir-at", "1"),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert _steps(r.stdout, 0) == _steps(r.stdout, 1) == _expected(4)
    assert not out.exists()  # nothing recreated it
    assert f"the capture directory {out} was removed while the command ran" in r.stderr
    assert "rank 1 stopped capturing" in r.stderr and "Traceback" not in r.stderr


def test_no_room_for_the_manifest_runs_nothing(tmp_path):
    """A disk that cannot take even the manifest: one line, exit 2, the command not run (the
    launcher's own files may not grow past 200 bytes here: RLIMIT_FSIZE, as a full disk would)."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    out = tmp_path / "cap"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "graphtrain_inspect.inspector.cli",
            "capture",
            "--out",
            str(out),
            "--",
            sys.executable,
            "-c",
            f"open({str(tmp_path / 'ran')!r}, 'w')",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=limit,
        timeout=60,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "cannot write" in r.stderr and "nothing was run" in r.stderr, r.stderr
    assert not (tmp_path / "ran").exists() and not (out / "manifest.json.tmp").exists()


def test_summary_says_how_a_rank_ended():
    """The words the summary, the manifest's `problems` and `ls` use for a rank without its end
    record: its parent's record of how it ended first, then a full disk, then the old guess."""
    from graphtrain_inspect.capture.summary import RankSummary

    s = RankSummary(rank=1, log="x", passes=12)
    assert s.ending() == "incomplete: no end record (the process was killed or crashed)"
    assert s.ending(disk_full=True) == "incomplete: nothing more could be written (the capture's filesystem is full)"
    s.processes = [{"pid": 7, "state": "writing", "exit_code": -9, "signal": "SIGKILL", "alive": False}]
    assert s.ending(disk_full=True) == "incomplete: killed by SIGKILL after 12 passes (no end record)"
    assert s.manifest_entry()["exit"] == {"exit_code": -9, "signal": "SIGKILL"}
    s.processes = [{"pid": 7, "state": "writing", "exit_code": 3, "signal": None, "alive": False}]
    assert s.ending() == "incomplete: exited with code 3 after 12 passes, without an end record"
    s.stopped = "disk full (ENOSPC: No space left on device) at 10 bytes of rank 1's log"
    assert s.ending() == "incomplete: the capture stopped writing (training went on)"
