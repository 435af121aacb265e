"""The capture command on real runs: 2-rank torchrun (gloo), torch.compile, failing passes."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

from graphtrain_inspect.capture.shared import logformat
from tests.capture_utils import (
    ROOT,
    capture,
    loss_lines,
    payloads,
    records,
    run_cli,
    run_plain,
    tlparse_exe,
    torchrun,
)

PASSES = "tests.programs.joint_passes"


@pytest.fixture(scope="module")
def joint(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cap")
    out = tmp / "joint"
    cap = capture(
        out, torchrun(2, "tests.programs.joint_step", "--losses", str(tmp / "captured")), "--pass", f"{PASSES}:PIPELINE"
    )
    assert cap.returncode == 0, cap.stderr[-3000:]
    plain = run_plain(torchrun(2, "tests.programs.joint_step", "--losses", str(tmp / "plain")))
    assert plain.returncode == 0, plain.stderr[-3000:]
    losses = {k: [(tmp / f"{k}.rank{r}").read_text() for r in (0, 1)] for k in ("captured", "plain")}
    return out, cap, losses


def log_of(out, rank):
    return out / logformat.log_file_name(rank)


def test_every_pass_on_every_rank(joint):
    out, cap, _ = joint
    for rank in (0, 1):
        passes = payloads(log_of(out, rank), logformat.PASS)
        assert [p["name"] for p in passes] == ["remove_dead_code", "scale_by_rank"]
        assert [p["traced"] for p in passes] == [True, False]
        assert all(p["status"] == "ok" and p["rank"] == rank and p["world_size"] == 2 for p in passes)
        assert passes[0]["qualname"] == f"{PASSES}:remove_dead_code"
        assert passes[1]["before"] == passes[0]["after"]["out"]
        assert payloads(log_of(out, rank), logformat.END), "clean exit writes an end record"
    assert "rank 0: 2 passes" in cap.stderr and "rank 1: 2 passes" in cap.stderr


def test_training_is_bitwise_unchanged(joint):
    _, _, losses = joint
    assert losses["captured"] == losses["plain"]
    assert [len(loss_lines(t)) for t in losses["captured"]] == [3, 3]


def test_nested_subgraph_tables_and_symbol_map(joint):
    out, _, _ = joint
    log = log_of(out, 0)
    traced = payloads(log, logformat.PASS)[0]["before"]
    nodes = next(p for p in payloads(log, logformat.NODES) if p["gid"] == traced)
    paths = {g["path"] for g in nodes["graphs"]}
    assert {"", "true_graph_0", "false_graph_0"} <= paths
    sub = next(g for g in nodes["graphs"] if g["path"] == "true_graph_0")
    assert sub["parent_node"] == "true_graph_0"
    root = next(g for g in nodes["graphs"] if g["path"] == "")
    binder = next(r for r in root["nodes"] if r.get("unbacked_bindings"))
    (u,) = binder["unbacked_bindings"]
    assert u.startswith("u") and binder["target"] == "aten._local_scalar_dense.default"
    lifted = [r for r in sub["nodes"] if r["op"] == "placeholder" and u in r.get("syms", ())]
    assert lifted, "the unbacked symbol is lifted into the cond branch as a placeholder"

    syms = next(p for p in payloads(log, logformat.SYMBOLS) if p["gid"] == traced)
    entry = syms["symbols"][u]
    assert entry["unbacked"] and entry["known"]
    assert entry["bound_by"] == [{"graph": "", "node": binder["name"]}]
    assert any(w["graph"] == "true_graph_0" for w in entry["inputs"])
    assert entry["range"][0] == "0"


def test_device_and_rank_tables(joint):
    out, _, _ = joint
    for rank in (0, 1):
        log = log_of(out, rank)
        devices = payloads(log, logformat.DEVICES)[0]
        assert devices["own_device"] == "cpu" and devices["local_rank"] == rank
        assert any(v["kind"] == "input" for v in devices["values"])
        (table,) = payloads(log, logformat.RANKS)
        assert table["backend"] == "gloo" and table["rank"] == rank
        assert {"ranks": [0, 1], "desc": "default_pg"} in table["groups"].values()


def test_rank_literal_lands_in_the_node_table(joint):
    out, _, _ = joint
    for rank in (0, 1):
        log = log_of(out, rank)
        after = payloads(log, logformat.PASS)[1]["after"]["out"]
        nodes = next(p for p in payloads(log, logformat.NODES) if p["gid"] == after)
        muls = [r["args"] for r in nodes["graphs"][0]["nodes"] if r["target"] == "aten.mul.Tensor"]
        assert [{"n": muls[-1][0]["n"]}, rank] == muls[-1]


def test_blobs_are_content_addressed(joint):
    """Each distinct graph has its blob, named by a gti_blob record (a forked child made it while
    the training went on) or by the pass record (made in the process), and the reader gives every
    pass the blobs of its graphs."""
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    out, _, _ = joint
    log = log_of(out, 1)
    named = {b["gid"]: b for b in payloads(log, logformat.BLOB)}
    assert named, "blobs made by forked children (POSIX)"
    named.update({g: b for p in payloads(log, logformat.PASS) for g, b in p["blobs"].items()})
    refs = {b["sha256"]: b for b in named.values()}
    assert len(refs) == 3  # traced, after dce (= before scale_by_rank), after scale_by_rank
    for b in refs.values():
        data = (out / b["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == b["sha256"] and len(data) == b["bytes"]
    assert not [f for f in (out / logformat.BLOB_DIR).iterdir() if not f.name.endswith(logformat.BLOB_SUFFIX)], (
        "no temporary file left"
    )
    for p in open_capture(str(out)).passes(1):
        assert {p.before, *p.after.values()} == set(p.blobs)
        assert all(p.blobs[g]["sha256"] == named[g]["sha256"] for g in p.blobs)


def test_tlparse_reads_every_log(joint, tmp_path):
    out, _, _ = joint
    tl = tlparse_exe()
    for rank in (0, 1):
        r = subprocess.run(
            [
                tl,
                str(log_of(out, rank)),
                "-o",
                str(tmp_path / f"r{rank}"),
                "--strict",
                "--strict-compile-id",
                "--no-browser",
            ],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr
        assert "Unknown fields" not in r.stdout + r.stderr
    r = subprocess.run(
        [tl, str(out), "--all-ranks-html", "-o", str(tmp_path / "all"), "--no-browser"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "all" / "rank_1" / "index.html").exists()


def test_named_functions_and_failing_pass(tmp_path):
    """A pass that raises reaches the training unchanged; an instrumentation error is recorded."""
    out = tmp_path / "cap"
    flags = ["--unpicklable-meta", "--fail-pass"]
    cap = run_cli(
        "capture",
        "--out",
        str(out),
        "--pass",
        f"{PASSES}:remove_dead_code",
        "--pass",
        f"{PASSES}:scale_by_rank",
        "--pass",
        f"{PASSES}:tag_with_callback",
        "--pass",
        f"{PASSES}:always_fails",
        "--",
        sys.executable,
        "-m",
        "tests.programs.joint_step",
        *flags,
    )
    assert cap.returncode == 0, cap.stderr[-3000:]
    plain = run_plain([sys.executable, "-m", "tests.programs.joint_step", *flags])
    assert loss_lines(cap.stdout) == loss_lines(plain.stdout)
    assert "pass always_fails raised: this pass always fails" in cap.stdout
    log = log_of(out, 0)
    passes = payloads(log, logformat.PASS)
    assert [p["name"] for p in passes] == ["remove_dead_code", "scale_by_rank", "tag_with_callback", "always_fails"]
    failed = passes[-1]
    assert failed["status"] == "raised" and failed["after"] == {}
    assert failed["exception"]["type"] == "builtins.RuntimeError"
    assert "this pass always fails" in failed["exception"]["message"]
    errors = payloads(log, logformat.ERROR)
    assert [(e["where"], e["pass"]) for e in errors] == [("blob (out)", "tag_with_callback")]
    assert passes[2]["after"]["out"]
    # the child that pickles the graph reports its failure after the pass's record, or before
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    assert passes[2]["capture_errors"] + sum(1 for e in errors if e.get("late")) == 1
    assert open_capture(str(out)).passes(0)[2].capture_errors == 1
    assert "1 capture errors, 1 passes raised" in cap.stderr


def test_inductor_passes_by_name(tmp_path):
    out = tmp_path / "cap"
    cap = run_cli("capture", "--out", str(out), "--", sys.executable, "-m", "tests.programs.compile_step")
    assert cap.returncode == 0, cap.stderr[-3000:]
    plain = run_plain([sys.executable, "-m", "tests.programs.compile_step"])
    assert loss_lines(cap.stdout) == loss_lines(plain.stdout)
    recs = records(log_of(out, 0))
    passes = [p for k, _, p in recs if k == logformat.PASS]
    names = {p["name"] for p in passes}
    assert {"remove_noop_ops", "stable_sort", "min_cut_rematerialization_partition"} <= names
    assert {p["subsystem"] for p in passes if p["source"] == "inductor"} >= {"post_grad_passes", "joint_graph_passes"}
    part = next(p for p in passes if p["source"] == "partitioner")
    assert set(part["after"]) == {"fw", "bw"}
    assert all(p["compile_id"] == "0/0" for p in passes)
    assert all(env.get("frame_id") == 0 for k, env, _ in recs if k == logformat.PASS)


def test_no_inductor_and_exit_code(tmp_path):
    out = tmp_path / "cap"
    cap = run_cli("capture", "--out", str(out), "--no-inductor", "--", sys.executable, "-c", "import sys; sys.exit(3)")
    assert cap.returncode == 3
    assert "no graph pass fired" in cap.stderr and "--no-inductor" in cap.stderr
    import orjson

    manifest = orjson.loads((out / logformat.MANIFEST_NAME).read_bytes())
    assert manifest["exit_code"] == 3 and manifest["status"] == "failed"
    assert manifest["options"]["inductor"] is False


def test_refuses_a_non_empty_out_dir(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    cap = run_cli("capture", "--out", str(tmp_path), "--", sys.executable, "-c", "open('ran', 'w')")
    assert cap.returncode == 2
    assert cap.stderr.count("\n") == 1 and "not an empty directory" in cap.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_two_captures_at_once_on_one_out(tmp_path):
    """Both started together on one --out: one runs, the other is refused at once with one line and
    writes nothing into the directory the first claimed."""
    out = tmp_path / "cap"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "graphtrain_inspect.inspector.cli",
                "capture",
                "--out",
                str(out),
                "--no-inductor",
                "--",
                sys.executable,
                "-c",
                f"import time; open({str(tmp_path / f'ran{i}')!r}, 'w'); time.sleep(2)",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    codes = sorted(c for c, _ in results)
    assert codes == [0, 2], results
    refused = next(err for c, err in results if c == 2)
    assert refused.count("\n") == 1 and (
        "claimed by another capture" in refused or "not an empty directory" in refused
    ), refused
    ran = [i for i in range(2) if (tmp_path / f"ran{i}").exists()]
    assert len(ran) == 1
    import orjson

    manifest = orjson.loads((out / logformat.MANIFEST_NAME).read_bytes())
    assert f"ran{ran[0]}" in manifest["command_line"] and manifest["status"] == "finished"


def test_claim_is_exclusive(tmp_path):
    from graphtrain_inspect.capture.out_claim import ClaimRefused, claim

    out = str(tmp_path / "x")
    assert claim(out) is True
    with pytest.raises(ClaimRefused, match="not an empty directory"):
        claim(out)
    (tmp_path / "empty").mkdir()
    assert claim(str(tmp_path / "empty")) is False  # an empty directory the user made: claimed, not made
    os.unlink(tmp_path / "empty" / logformat.CLAIM_NAME)
    # the gap a check-then-create leaves: another capture claimed it between our check and our claim
    (tmp_path / "empty" / logformat.CLAIM_NAME).write_text("1")
    with pytest.raises(ClaimRefused):
        claim(str(tmp_path / "empty"))


@pytest.mark.parametrize("made", [False, True])
def test_a_command_that_cannot_start_leaves_out_reusable(tmp_path, made):
    """Nothing ran, so nothing is left: the same --out works for the fixed command, and
    the hints talk about no module."""
    out = tmp_path / "cap"
    if made:
        out.mkdir()
    not_exec = tmp_path / "train.sh"
    not_exec.write_text("echo hi\n")
    no_format = tmp_path / "noformat"
    no_format.write_bytes(b"\x7fELF garbage")
    no_format.chmod(0o755)
    for cmd in (["no-such-command-gti"], [str(tmp_path / "nope.py")], [str(not_exec)], [str(no_format)]):
        r = run_cli("capture", "--out", str(out), "--pass", "mymod:myfn", "--", *cmd)
        assert r.returncode == 2, (cmd, r.stderr)
        assert r.stderr.count("\n") == 1 and "cannot run" in r.stderr and "nothing was run" in r.stderr, r.stderr
        assert "never imported" not in r.stderr and "mymod" not in r.stderr
        assert sorted(out.iterdir()) == [] if made else not out.exists(), list(out.iterdir())
    r = run_cli("capture", "--out", str(out), "--no-inductor", "--", sys.executable, "-c", "pass")
    assert r.returncode == 0, r.stderr


def test_bad_pass_target_is_one_line(tmp_path):
    cap = run_cli("capture", "--out", str(tmp_path / "x"), "--pass", "not a target", "--", sys.executable, "-c", "pass")
    assert cap.returncode == 2 and cap.stderr.count("\n") == 1 and "MODULE:FUNCTION" in cap.stderr


def test_ctrl_c_reaches_the_command_and_logs_stay_readable(tmp_path):
    """SIGINT to the launcher (not from a terminal) is passed on; the capture says it was interrupted."""
    import os
    import signal
    import time

    import orjson

    out = tmp_path / "cap"
    ready = tmp_path / "ready"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "graphtrain_inspect.inspector.cli",
            "capture",
            "--out",
            str(out),
            "--no-inductor",
            "--",
            *torchrun(2, "tests.programs.sleeper", str(ready)),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while not all((tmp_path / f"ready.{r}").exists() for r in (0, 1)):
        assert launcher.poll() is None and time.time() < deadline, launcher.stderr.read()[-3000:]
        time.sleep(0.2)
    workers = [int((tmp_path / f"ready.{r}").read_text()) for r in (0, 1)]
    launcher.send_signal(signal.SIGINT)
    _, err = launcher.communicate(timeout=90)
    assert launcher.returncode != 0
    manifest = orjson.loads((out / logformat.MANIFEST_NAME).read_bytes())
    assert manifest["status"] == "interrupted" and manifest["signal"] == "SIGINT"
    for pid in workers:  # torchrun took its workers down
        assert not _alive(pid)
    for rank in (0, 1):
        passes = payloads(log_of(out, rank), logformat.PASS)
        assert [p["name"] for p in passes] == ["warmup"]
    assert "command exited with" in err


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False
