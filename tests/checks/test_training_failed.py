"""training-failed: a training that failed is still a capture, and its failure is the first thing
`check` and `ls` say. Hand-written captures in the real record format for each way a rank ends
(an exception, a signal, an exit code, torchrun's teardown of the others, a lost peer, a run that
wrote nothing), and tests/programs/train_failure.py captured for real: an exception before the
first captured pass, an IndexError in a captured graph's forward, Inductor's bounds check in a
compiled kernel, and the same program succeeding (no finding)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import orjson
import pytest
import torch
import torch.fx

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.inspector.checks import check_report
from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.capture_utils import capture, run_cli, torchrun
from tests.read.output_code_logs import wrapper
from tests.small_captures import CaptureWriter

KIND = "training-failed"
PROGRAM = "tests.programs.train_failure"


def _graphs():
    return torch.fx.symbolic_trace(lambda x: torch.relu(x) + 1), torch.fx.symbolic_trace(lambda x: torch.relu(x) * 2)


def _failure(typ="builtins.ValueError", message="no shard file", frames=None, t=100.0):
    frames = frames or [{"file": "/home/u/train.py", "line": 12, "function": "main", "code": "raise ValueError(x)"}]
    return {"type": typ, "message": message, "traceback": "Traceback ...", "frames": frames, "pid": 1, "time": t}


def _write(tmp_path, *, raised=None, exits=None, status="failed", exit_code=1, ends=(0, 1), extra=None):
    """Two ranks applying one pass; `raised` {rank: gti_failure payload}; `exits` {rank:
    (exit_code, signal)} as the launcher writes them into the manifest; `extra(rank, writer)`
    writes more records."""
    g0, g1 = _graphs()
    w = CaptureWriter(tmp_path, world_size=2)
    for r in (0, 1):
        rw = w.rank(r)
        rw.apply("double", g0, g1)
        if extra:
            extra(r, rw)
        if raised and r in raised:
            rw._write(logformat.FAILURE, raised[r], {"type": raised[r]["type"]})
        if r in ends:
            rw.end()
    w.finish(status=status)
    m = orjson.loads((tmp_path / logformat.MANIFEST_NAME).read_bytes())
    m["exit_code"] = exit_code
    for r, (code, sig) in (exits or {}).items():
        m["ranks"][str(r)]["exit"] = {"exit_code": code, "signal": sig}
    (tmp_path / logformat.MANIFEST_NAME).write_bytes(orjson.dumps(m))
    return tmp_path


def _found(path):
    return [f for f in check_report(open_capture(str(path))).findings if f.kind == KIND]


def test_an_exception_is_the_first_finding_and_the_torn_down_rank_a_consequence(tmp_path):
    d = _write(tmp_path, raised={1: _failure()}, exits={1: (1, None), 0: (-15, "SIGTERM")}, ends=(1,))
    findings = check_report(open_capture(str(d))).findings
    first = findings[0]
    assert (first.kind, first.severity, first.ranks) == (KIND, "error", [1])
    assert first.message == "rank 1 raised ValueError: no shard file; as a consequence rank 0 was torn down (SIGTERM)"
    assert first.evidence["exception"] == {"type": "builtins.ValueError", "message": "no shard file"}
    assert first.evidence["consequences"] == {"0": "was torn down (SIGTERM)"}
    assert first.source == {"file": "/home/u/train.py", "line": 12, "code": "raise ValueError(x)", "fn": "main"}
    assert [f.kind for f in findings[1:]] and KIND not in [f.kind for f in findings[1:]]


def test_the_same_exception_on_every_rank_is_one_finding(tmp_path):
    d = _write(tmp_path, raised={0: _failure(), 1: _failure(t=101.0)}, exits={0: (1, None), 1: (1, None)})
    (f,) = _found(d)
    assert f.ranks == [0, 1] and f.message.startswith("ranks 0, 1 raised ValueError: no shard file")


def test_a_rank_killed_or_exiting_without_an_exception(tmp_path):
    d = _write(tmp_path / "kill", exits={1: (-9, "SIGKILL"), 0: (-15, "SIGTERM")}, ends=())
    (f,) = _found(d)
    assert f.ranks == [1] and f.message == "rank 1 died (SIGKILL); as a consequence rank 0 was torn down (SIGTERM)"
    d = _write(tmp_path / "code", exits={0: (3, None), 1: (0, None)}, exit_code=3, ends=(1,))
    (f,) = _found(d)
    assert f.ranks == [0] and f.message == "rank 0 exited with code 3 (no Python exception recorded)"


def test_the_rank_process_s_own_exception_over_a_helper_s(tmp_path):
    helper = {**_failure("builtins.BrokenPipeError", "[Errno 32] Broken pipe", t=99.0), "pid": 7}

    def two(r, rw):  # the helper's record comes first in the log
        if r == 1:
            rw._write(logformat.FAILURE, helper, {"type": helper["type"]})

    d = _write(tmp_path, raised={1: _failure()}, exits={1: (1, None)}, extra=two)
    m = orjson.loads((d / logformat.MANIFEST_NAME).read_bytes())
    m["ranks"]["1"]["processes"] = [{"pid": 1, "exit_code": 1, "signal": None}, {"pid": 7, "exit_code": None}]
    (d / logformat.MANIFEST_NAME).write_bytes(orjson.dumps(m))
    (f,) = _found(d)
    assert f.message == "rank 1 raised ValueError: no shard file"


def test_a_lost_peer_after_the_failure_is_a_consequence(tmp_path):
    lost = _failure("builtins.RuntimeError", "[pair.cc:553] Connection closed by peer [127.0.0.1]:4242", t=101.0)
    d = _write(tmp_path, raised={1: _failure(t=100.0), 0: lost}, exits={0: (1, None), 1: (1, None)})
    (f,) = _found(d)
    assert f.ranks == [1] and f.evidence["consequences"] == {"0": "raised RuntimeError (Connection closed by peer)"}


def test_no_finding_for_a_finished_or_interrupted_run(tmp_path):
    assert _found(_write(tmp_path / "ok", status="finished", exit_code=0)) == []
    # a helper process with the rank's environment (a compile worker) raised; the training finished
    helper = {0: _failure("builtins.BrokenPipeError", "[Errno 32] Broken pipe")}
    assert _found(_write(tmp_path / "helper", raised=helper, status="finished", exit_code=0)) == []
    d = _write(tmp_path / "int", status="interrupted", exits={0: (-2, "SIGINT"), 1: (-2, "SIGINT")}, ends=())
    assert _found(d) == []


def test_a_frame_in_a_captured_graph_names_its_pass_and_node(tmp_path):
    frames = [
        {"file": "/home/u/train.py", "line": 30, "function": "main", "code": "loss = gm(x)"},
        {"file": "<eval_with_key>.1", "line": 6, "function": "forward", "code": "mul = relu * 2", "node": "mul"},
    ]
    frames[1]["pass_seq"] = 0
    d = _write(tmp_path, raised={1: _failure("builtins.IndexError", "index 8", frames)}, exits={1: (1, None)})
    (f,) = _found(d)
    assert (f.introduced_by, f.introduced_seq, f.node) == ("double", 0, "mul") and f.graph
    where = "in the forward of the graph pass double returned, FX node mul"
    assert f.message == f"rank 1 raised IndexError {where}: index 8"
    assert f.evidence["detail"] == "line 6 of the graph's forward: mul = relu * 2"


def test_a_frame_in_generated_code_names_the_line_kernel_and_nodes(tmp_path):
    code = wrapper()
    oid = "o" + hashlib.sha256(code.encode()).hexdigest()[:16]
    lineno = next(i for i, l in enumerate(code.splitlines(), 1) if l.strip().startswith("cpp_fused_add_mul_relu_0("))

    def codegen(r, rw):
        _, g1 = _graphs()
        gid = rw.graph(g1)
        rw._write(logformat.OUTPUT_CODE, code, {"oid": oid, "graph": gid})
        kernels = {"cpp_fused_add_mul_relu_0": ["relu", "mul"]}
        payload = {"oid": oid, "graph": gid, "compile_id": "0/0", "kernels": kernels, "bytes": len(code), "time": 0}
        rw._write(logformat.CODEGEN, payload, {"oid": oid, "graph": gid})

    frames = [{"file": "/tmp/torchinductor_u/ab/cab.py", "line": lineno, "function": "call", "code": "", "oid": oid}]
    fail = _failure("builtins.RuntimeError", "index out of bounds: 0 <= tmp7 < 4L", frames)
    d = _write(tmp_path, raised={0: fail}, exits={0: (1, None), 1: (-15, "SIGTERM")}, extra=codegen)
    (f,) = _found(d)
    assert f.layer == "codegen" and f.node == "mul" and f.evidence["where"]["kernel"] == "cpp_fused_add_mul_relu_0"
    assert f.evidence["code"] == "cpp_fused_add_mul_relu_0(arg0_1, arg1_1, buf0)" and f.evidence["line"] == lineno
    assert f"at line {lineno} of Inductor's generated code (compile 0/0), kernel cpp_fused_add_mul_relu_0" in f.message
    assert "(FX nodes mul, relu)" in f.message


def test_a_capture_whose_ranks_wrote_nothing_is_read_from_its_manifest(tmp_path):
    """The training failed before any rank wrote a record: `ls` and `check` answer (not "not a
    capture"); check says the run failed, exits 1; SARIF locates it at the manifest."""
    manifest = {
        "format": logformat.FORMAT_NAME,
        "format_version": logformat.FORMAT_VERSION,
        "command_line": "torchrun train.py",
        "status": "failed",
        "exit_code": 1,
        "signal": None,
        "ranks": {},
    }
    (tmp_path / logformat.MANIFEST_NAME).write_bytes(orjson.dumps(manifest))
    r = run_cli("check", str(tmp_path), "--json", "--sarif", str(tmp_path / "out.sarif"))
    assert r.returncode == 1, r.stderr
    (f,) = json.loads(r.stdout)["findings"]
    assert (f["kind"], f["severity"], f["evidence"]["problem"]) == (KIND, "error", "command-failed")
    assert f["message"] == "the command failed (exit 1) and no rank wrote a record: see its own output for why"
    (res,) = json.loads((tmp_path / "out.sarif").read_text())["runs"][0]["results"]
    assert res["ruleId"] == KIND and res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith(
        "manifest.json"
    )
    ls = run_cli("ls", str(tmp_path), "--color", "never")
    assert ls.returncode == 0, ls.stderr
    assert "training failed: the command failed (exit 1)" in ls.stdout and "no pass was captured" in ls.stdout


# -- real captures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """train_failure.py under capture: each way of failing, and the same program succeeding."""
    out = {}
    for name, flags in (("early", ["--raise-early", "1"]), ("fx", ["--fx-index", "1"]), ("ok", [])):
        path = tmp_path_factory.mktemp("failed") / name
        r = capture(path, torchrun(2, PROGRAM, *flags), "--no-inductor")
        assert r.returncode == (0 if name == "ok" else 1), r.stderr[-3000:]
        out[name] = (path, r)
    return out


def _check(path: Path) -> tuple[int, list[dict]]:
    r = run_cli("check", str(path), "--json")
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)["findings"]


@pytest.mark.slow
def test_raised_before_the_first_pass(runs):
    path, r = runs["early"]
    assert "the training raised ValueError: rank 1: no shard file for this rank" in r.stderr
    (fail,) = open_capture(str(path)).failures(1)
    assert fail["type"] == "builtins.ValueError" and fail["frames"][-1]["function"] == "main"
    rc, findings = _check(path)
    first = findings[0]
    assert rc == 1 and (first["kind"], first["ranks"]) == (KIND, [1]), findings
    assert first["message"].startswith("rank 1 raised ValueError: rank 1: no shard file for this rank (data/shard_1")
    assert first["source"]["file"].endswith("tests/programs/train_failure.py"), first
    assert "rank 0" in first["message"] and [f for f in findings if f["kind"] == KIND] == [first]
    ls = run_cli("ls", str(path), "--color", "never")
    assert "training failed: rank 1 raised ValueError" in ls.stdout and "no pass was captured" in ls.stdout, ls.stdout
    assert "[raised ValueError: rank 1: no shard file" in ls.stdout


@pytest.mark.slow
def test_raised_in_a_captured_graphs_forward(runs):
    rc, findings = _check(runs["fx"][0])
    first = findings[0]
    assert rc == 1 and (first["kind"], first["ranks"], first["node"]) == (KIND, [1], "select_int"), findings
    assert first["introduced_by"] == "take_last" and first["graph"], first
    assert first["message"].startswith(
        "rank 1 raised IndexError in the forward of the graph pass take_last returned, FX node select_int: "
        "select(): index 8 out of range"
    ), first
    assert first["evidence"]["where"]["file"].startswith("<eval_with_key>"), first
    assert "select_int = torch.ops.aten.select.int(" in first["evidence"]["detail"]
    assert [f for f in findings if f["kind"] == KIND] == [first]  # rank 0's lost peer is a consequence


@pytest.mark.slow
def test_the_same_program_succeeding_has_no_failure(runs):
    path, _ = runs["ok"]
    rc, findings = _check(path)
    assert rc == 0 and findings == [], findings
    assert "training failed" not in run_cli("ls", str(path)).stdout


@pytest.mark.slow
def test_raised_in_a_compiled_kernel(tmp_path):
    """Inductor's bounds check in the C++ kernel raises at run time on rank 1: the finding points at
    the wrapper's line that calls the kernel, names the kernel and its FX nodes."""
    r = capture(tmp_path / "cap", torchrun(2, PROGRAM, "--compiled-index", "1"))
    assert r.returncode == 1, r.stderr[-3000:]
    rc, findings = _check(tmp_path / "cap")
    first = findings[0]
    assert rc == 1 and (first["kind"], first["ranks"], first["layer"]) == (KIND, [1], "codegen"), findings
    where = first["evidence"]["where"]
    assert where["kernel"].startswith("cpp_fused_") and where["code"].startswith(where["kernel"] + "("), where
    assert "index" in where["nodes"] and first["graph"], where
    assert "index out of bounds" in first["message"] and f"kernel {where['kernel']} (FX nodes " in first["message"]
