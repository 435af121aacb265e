"""`graphtrain-inspect replay`: re-running captured passes on their captured input graphs.

Real captures: the sample training on 2 CPU ranks with every planted bug (shared with the other
modules through conftest's session fixture), and a small torch.compile run for Inductor's own
passes (started in the background while the sample is captured). Replays of the sample run in
this process through the library (one torch import); the command itself runs as a subprocess
where its exit status and output are what is tested.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from graphtrain_inspect.capture.shared import logformat
from tests.capture_utils import ROOT, Plant, child_env, rewrite_log, run_cli, start_capture

ALL_BUGS = ("device-literal", "rank-baked", "rank-divergent", "stale-symbol")
SETUP = "tests.programs.replay_sample:bugs_from_argv"
FIXED_DEVICES = "tests.programs.replay_sample:place_devices_fixed"
SAMPLE_PASSES = [
    "remove_dead_code",
    "bucket_all_gathers",
    "tag_activation_checkpointing",
    "chunk_expert_tokens",
    "concretize_symbolic_shapes",
    "resolve_coordinates",
    "place_devices",
]


@pytest.fixture(scope="module", autouse=True)
def _sample_switches_restored():
    """Replays here run --setup in this process, which sets the sample's bug switches (process
    state): leave them as they were for the modules that run after this one."""
    from graphtrain_inspect.samples import bugs

    saved = bugs.active()
    yield
    bugs.reset()
    bugs.enable(saved)


@pytest.fixture(scope="module")
def captures(sample_capture, tmp_path_factory):
    """(sample capture dir, compile capture dir): the compile capture runs while the sample is captured."""
    out = tmp_path_factory.mktemp("replay") / "compile"
    proc = start_capture(
        out,
        [sys.executable, "-m", "tests.programs.replay_compile"],
        env={"TORCHINDUCTOR_COMPILE_THREADS": "1"},  # no worker pool: less to start on 2 cores
        stderr=subprocess.STDOUT,
    )
    try:
        sample = sample_capture(*ALL_BUGS)
    finally:
        log, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, f"compile capture failed:\n{log[-4000:]}"
    return Path(sample), out


@pytest.fixture(scope="module")
def sample_dir(captures) -> Path:
    return captures[0]


@pytest.fixture(scope="module")
def compile_dir(captures) -> Path:
    return captures[1]


def replay(*args: str, stdin: str | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    if stdin is None:
        return run_cli("replay", *args, "--color", "never", timeout=timeout)
    return subprocess.run(
        [sys.executable, "-m", "graphtrain_inspect.inspector.cli", "replay", *args, "--color", "never"],
        cwd=ROOT,
        env=child_env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# ---------------------------------------------------------------------------------------------
# The sample training: every pass, both ranks


def test_every_sample_pass_reproduces_on_both_ranks(sample_dir):
    from graphtrain_inspect.inspector.read.capture_index import open_capture
    from graphtrain_inspect.inspector.replay.plan import select
    from graphtrain_inspect.inspector.replay.replayer import Replayer

    cap = open_capture(str(sample_dir))
    results = {}
    for rank in (0, 1):
        names = [p.name for p in cap.passes(rank)]
        assert names == SAMPLE_PASSES
        for name in names:
            t = select(cap, name, rank, None)
            out = Replayer(cap, t, setup=[SETUP]).run()
            assert out.reproduced, f"rank {rank} {name}: {out.reason}\n{out.exc_text or ''}"
            assert out.world.env["RANK"] == str(rank) and out.world.env["LOCAL_RANK"] == str(rank)
            assert out.world.process_group.startswith(f"fake backend, rank {rank} of 2")
            results[(rank, name)] = out.view
    # Passes whose behaviour depends on the rank gave each rank its own captured result:
    # tag_activation_checkpointing reads dist.get_rank() (rank-divergent), place_devices reads
    # LOCAL_RANK (device-literal).
    ac0, ac1 = results[(0, "tag_activation_checkpointing")], results[(1, "tag_activation_checkpointing")]
    assert ac0.tables.node_count != ac1.tables.node_count
    devs = {r: {l["device"] for l in results[(r, "place_devices")].devices["literals"]} for r in (0, 1)}
    assert "cpu:0" in devs[0] and "cpu:1" in devs[1] and "cpu:1" not in devs[0]


def test_without_the_training_state_the_replay_differs_and_says_why(sample_dir):
    """The bug switches are argv state, not environment: without --setup the pass sees defaults,
    and the verdict (with the diff) says the result differs."""
    from graphtrain_inspect.inspector.read.capture_index import open_capture
    from graphtrain_inspect.inspector.replay.plan import select
    from graphtrain_inspect.inspector.replay.replayer import Replayer
    from graphtrain_inspect.samples import bugs

    bugs.reset()  # earlier replays in this process set them (process state outlives a replay)
    cap = open_capture(str(sample_dir))
    out = Replayer(cap, select(cap, "place_devices", 1, None)).run()
    assert not out.reproduced
    assert out.diff.counts["changed"] > 0
    assert all(w == "kwargs.device" for ch in out.diff.changes() for w, _, _ in ch.args)


def test_batch_rank_dependent_pass_reproduces(sample_dir):
    r = replay(
        str(sample_dir), "--pass", "tag_activation_checkpointing", "--rank", "1", "--batch", "--setup", SETUP, "--json"
    )
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "reproduced" and doc["rank"] == 1 and doc["peers"] == {"0": "reproduced"}
    assert doc["environment"]["RANK"] == "1" and doc["environment"]["WORLD_SIZE"] == "2"
    # the rank-divergent finding is still there, introduced by this pass, on the replayed ranks
    kept = [
        f
        for f in doc["checks"]["kept"]
        if f["kind"] == "rank-divergent-graph" and f["introduced_by"] == "tag_activation_checkpointing"
    ]
    assert kept and not doc["checks"]["new"] and not doc["checks"]["gone"]
    assert doc["checks"]["replaced_ranks"] == [0, 1]


def test_fn_with_a_fixed_pass_shows_the_finding_gone(sample_dir):
    r = replay(
        str(sample_dir), "--pass", "place_devices", "--rank", "1", "--batch", "--setup", SETUP, "--fn", FIXED_DEVICES
    )
    assert r.returncode == 1, r.stdout + r.stderr  # the fix changes the graph: it differs from the capture
    out = r.stdout
    assert "DIFFERS" in out and "kwargs.device: device('cpu:1') -> device('cpu')" in out
    gone = [l for l in out.splitlines() if l.strip().startswith("gone") and "device-baked" in l]
    assert gone, out
    assert not [l for l in out.splitlines() if l.strip().startswith("new ")], out
    assert "tests.programs.replay_sample:place_devices_fixed" in out


def test_repl(sample_dir):
    script = "\n".join(
        [
            "print('NAMES', sorted(k for k in ('before', 'after', 'result', 'pass_fn', 'rerun', 'diff', "
            "'check', 'show') if k in globals()))",
            "print('NODES', len(before.graph.nodes), len(after.graph.nodes), len(result.graph.nodes))",
            "d = diff(after, result, text=False)",
            "print('EMPTY', d.empty)",
            f"r2 = rerun('{FIXED_DEVICES}')",
            "print('RERUN', result is r2, diff(after, result, text=False).counts['changed'])",
            "show(result)",
            "",
        ]
    )
    r = replay(
        str(sample_dir), "--pass", "place_devices", "--rank", "0", "--setup", SETUP, "--peers", "none", stdin=script
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "rerun(fn=None)" in out and "check(gm)" in out  # the banner
    assert "NAMES ['after', 'before', 'check', 'diff', 'pass_fn', 'rerun', 'result', 'show']" in out
    n = [l for l in out.splitlines() if "NODES" in l][0].split()[-3:]
    assert n[1] == n[2]
    assert "EMPTY True" in out
    assert "RERUN True 7" in out
    assert "def forward(self" in out


# ---------------------------------------------------------------------------------------------
# Inductor's own passes from a torch.compile run


def test_inductor_pass_reproduces(compile_dir):
    r = replay(str(compile_dir), "--pass", "remove_noop_ops", "--batch", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "reproduced"
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    cap = open_capture(str(compile_dir))
    p = cap.pass_by_seq(0, doc["seq"])
    assert p.source == "inductor" and p.qualname == "torch._inductor.fx_passes.post_grad:remove_noop_ops"
    assert p.nodes["before"] > p.nodes["after"]["out"]  # it did remove nodes, and so did the replay
    assert doc["nodes"] == p.nodes["after"]["out"]


def test_every_inductor_pass_replays_or_says_why(compile_dir):
    from graphtrain_inspect.inspector.read.capture_index import open_capture
    from graphtrain_inspect.inspector.replay.plan import select
    from graphtrain_inspect.inspector.replay.replayer import CannotReplay, Replayer

    cap = open_capture(str(compile_dir))
    passes = cap.passes(0)
    assert len(passes) > 10 and {"remove_noop_ops", "remove_assert_ops", "pass_pattern_0", "stable_sort"} <= {
        p.name for p in passes
    }
    for p in passes:
        try:
            out = Replayer(cap, select(cap, f"#{p.seq}", 0, None)).run()
        except CannotReplay as e:
            pytest.fail(f"#{p.seq} {p.name} ({p.subsystem}, {p.qualname}) cannot be replayed: {e}")
        assert out.reproduced, f"#{p.seq} {p.name}: {out.reason}"


def test_passes_that_cannot_be_replayed_say_why():
    from graphtrain_inspect.inspector.read.capture_records import PassRecord
    from graphtrain_inspect.inspector.replay.replayer import CannotReplay, resolve_pass

    part = PassRecord(
        rank=0,
        seq=7,
        name="min_cut_rematerialization_partition",
        before="g1",
        after={"fw": "g2", "bw": "g3"},
        source="partitioner",
        qualname="torch._functorch.partitioners:min_cut_rematerialization_partition",
    )
    with pytest.raises(CannotReplay, match="partitioner.*does not record"):
        resolve_pass(part, None, None)
    closure = PassRecord(
        rank=0,
        seq=3,
        name="some_pass",
        before="g1",
        after={"out": "g2"},
        source="inductor",
        subsystem="post_grad_passes",
        qualname="torch._inductor.fx_passes.post_grad:post_grad_passes.<locals>.<lambda>",
    )
    import torch.fx

    with pytest.raises(CannotReplay, match="closure"):
        resolve_pass(closure, None, torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph()))
    nameless = PassRecord(rank=0, seq=1, name="bucket", before="g1", after={"out": "g2"}, source="api", qualname=None)
    with pytest.raises(CannotReplay, match="--fn"):
        resolve_pass(nameless, None, None)


# ---------------------------------------------------------------------------------------------
# Trust: nothing in a refused capture runs


def _copy_with_planted_blob(
    sample_dir: Path, dest: Path, *, rewrite_sha: bool, manifest: dict | None = None
) -> tuple[Path, Path]:
    """A copy of the capture where the blob of place_devices' input on rank 0 creates a marker
    file when unpickled. rewrite_sha: the log is made to name the planted blob (a consistent
    capture from someone else); otherwise the blob file is swapped under the recorded sha256."""
    shutil.copytree(sample_dir, dest)
    marker = dest.parent / (dest.name + "-pwned")
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    cap = open_capture(str(dest))
    p = cap.find_passes("place_devices", 0)[0]
    ref = p.blobs[p.before]
    cap.close()
    evil = pickle.dumps(Plant(str(marker)))
    if rewrite_sha:
        sha = hashlib.sha256(evil).hexdigest()
        (dest / logformat.blob_relpath(sha)).write_bytes(evil)
        for log in dest.glob("*_gti.log"):
            rewrite_log(
                log,
                {
                    ref["sha256"].encode(): sha.encode(),
                    f'"bytes":{ref["bytes"]}'.encode(): f'"bytes":{len(evil)}'.encode(),
                },
            )
    else:
        (dest / ref["path"]).write_bytes(evil)
    if manifest:
        m = json.loads((dest / "manifest.json").read_text())
        m.update(manifest)
        (dest / "manifest.json").write_text(json.dumps(m))
    return dest, marker


def test_tampered_blob_is_refused_and_nothing_runs(sample_dir, tmp_path):
    d, marker = _copy_with_planted_blob(sample_dir, tmp_path / "tampered", rewrite_sha=False)
    # the signature lists every blob with its hash; with --trust the log's sha256 still tells
    for extra, why in (([], ".gpkl was changed"), (["--trust"], "does not match the sha256")):
        r = replay(str(d), "--pass", "place_devices", "--rank", "0", "--batch", *extra)
        assert r.returncode == 2, r.stdout + r.stderr
        err = r.stderr.strip().splitlines()
        assert len(err) == 1 and "refused" in err[0] and why in err[0], r.stderr
        assert not marker.exists()


def test_capture_of_another_user_is_refused_without_trust(sample_dir, tmp_path):
    d, marker = _copy_with_planted_blob(
        sample_dir,
        tmp_path / "foreign",
        rewrite_sha=True,
        manifest={"user": "mallory", "host": "elsewhere", "uid": 4242},
    )
    r = replay(str(d), "--pass", "place_devices", "--rank", "0", "--batch")
    assert r.returncode == 2
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "captured by mallory@elsewhere" in err[0] and "--trust" in err[0], r.stderr
    assert not marker.exists()
    # The planted blob is live: vouching for the capture loads it, and it runs (the control).
    r = replay(str(d), "--pass", "place_devices", "--rank", "0", "--batch", "--trust", "--no-check")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert marker.exists()


def test_capture_without_manifest_is_refused(sample_dir, tmp_path):
    d = tmp_path / "nomanifest"
    shutil.copytree(sample_dir, d, ignore=shutil.ignore_patterns("*.gpkl"))
    (d / "manifest.json").unlink()
    r = replay(str(d), "--pass", "place_devices", "--batch")
    assert r.returncode == 2 and "manifest.json was removed" in r.stderr and "Traceback" not in r.stderr
    assert "no readable manifest" in r.stderr


def test_tampered_capture_with_its_log_rewritten_runs_nothing_without_trust(sample_dir, tmp_path):
    """The attack the signature is for: the blob replaced by a pickle that runs code, its sha256 written
    into the log's blob record with the project's own log-format module, the manifest left saying
    it is yours. Only the signature, made with a key the attacker does not have, tells."""
    d, marker = _copy_with_planted_blob(sample_dir, tmp_path / "tampered", rewrite_sha=True)
    for extra in ([], ["--no-check"], ["--peers", "none"]):
        r = replay(str(d), "--pass", "place_devices", "--rank", "0", "--batch", *extra)
        assert r.returncode == 2, r.stdout + r.stderr
        err = r.stderr.strip().splitlines()
        assert len(err) == 1 and "changed since it was signed" in err[0] and "_gti.log was changed" in err[0], r.stderr
        assert "--trust" in err[0] and "graphtrain-inspect trust" in err[0] and "captured by" in err[0]
        assert not marker.exists()
    # the same capture signed by someone else's key: still refused
    from graphtrain_inspect.capture.shared import signing

    other = tmp_path / "other-config"
    r = run_cli("trust", str(d), env={"XDG_CONFIG_HOME": str(other)})
    assert r.returncode == 0, r.stderr
    assert (other / "graphtrain-inspect" / signing.KEY_NAME).stat().st_mode & 0o777 == 0o600
    r = replay(str(d), "--pass", "place_devices", "--rank", "0", "--batch", "--no-check")
    assert r.returncode == 2 and "signed by another key" in r.stderr and not marker.exists(), r.stderr
    # a forged signature file (its digests made to match, no key to make the HMAC): refused
    sig = json.loads((d / logformat.SIGNATURE_NAME).read_text())
    sig["key_id"] = signing.key_id(signing.load_key())
    (d / logformat.SIGNATURE_NAME).write_text(json.dumps(sig))
    r = replay(str(d), "--pass", "place_devices", "--rank", "0", "--batch", "--no-check")
    assert r.returncode == 2 and "was changed after it was signed" in r.stderr and not marker.exists(), r.stderr
    # unsigned
    (d / logformat.SIGNATURE_NAME).unlink()
    r = replay(str(d), "--pass", "place_devices", "--rank", "0", "--batch", "--no-check")
    assert r.returncode == 2 and "it is unsigned" in r.stderr and not marker.exists(), r.stderr
    # the control: once the user vouches (`trust DIR`), the planted blob is loaded, and runs
    r = run_cli("trust", str(d))
    assert r.returncode == 0 and "signed with your key" in r.stderr, r.stderr
    r = replay(str(d), "--pass", "place_devices", "--rank", "0", "--batch", "--no-check")
    assert r.returncode == 2 and "Traceback" not in r.stderr and marker.exists(), r.stderr


def test_own_capture_and_its_copy_load_without_trust(sample_dir, tmp_path):
    """A capture this user made is signed at its end; a copy (cp, tar: the files' owner and times
    change) still verifies; a log added later does not."""
    d = tmp_path / "copy"
    shutil.copytree(sample_dir, d, ignore=shutil.ignore_patterns("*.gpkl"))
    from graphtrain_inspect.capture.shared import signing

    assert signing.verify(str(sample_dir)).ok and signing.verify(str(d)).ok
    shutil.copy(d / logformat.log_file_name(1), d / logformat.log_file_name(5))
    v = signing.verify(str(d))
    assert not v.ok and v.problem == "changed" and f"{logformat.log_file_name(5)} was added" in v.why


# ---------------------------------------------------------------------------------------------
# Bad input: one line, exit 2


def test_bad_input_is_one_line(sample_dir, tmp_path):
    cases = [
        ([str(tmp_path / "nope"), "--pass", "x", "--batch"], "no such file"),
        ([str(sample_dir), "--pass", "no_such_pass", "--batch"], "no pass 'no_such_pass' on rank 0"),
        ([str(sample_dir), "--pass", "place_devices", "--rank", "7", "--batch"], "no rank 7"),
        ([str(sample_dir), "--pass", "place_devices", "--occurrence", "3", "--batch"], "--occurrence must be 0..0"),
        (
            [str(sample_dir), "--pass", "place_devices", "--fn", "no_such_module:f", "--batch", "--no-check"],
            "cannot import no_such_module",
        ),
        ([str(sample_dir), "--pass", "place_devices", "--json"], "--json needs --batch"),
    ]
    for args, msg in cases:
        r = replay(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        err = r.stderr.strip().splitlines()
        assert len(err) == 1 and msg in err[0] and "Traceback" not in r.stderr, (args, r.stderr)


def test_capture_without_blobs_says_so(tmp_path):
    """A capture made with --no-blobs (here: written by the test writer, which stores none)."""
    import torch

    from tests.small_captures import CaptureWriter

    gm = torch.fx.symbolic_trace(torch.nn.Linear(2, 2))
    w = CaptureWriter(tmp_path / "c", world_size=1)
    rw = w.rank(0)
    rw.apply("noop", gm, gm)
    rw.end()
    w.finish()
    r = replay(str(tmp_path / "c"), "--pass", "noop", "--batch", "--trust")
    assert r.returncode == 2 and "no blob of the before graph" in r.stderr and "--no-blobs" in r.stderr


def test_incompatible_torch_version_is_named(sample_dir, tmp_path):
    """A blob that needs something this torch lacks (as a blob from another torch version would)
    fails with one line naming both versions."""
    d = tmp_path / "oldtorch"
    shutil.copytree(sample_dir, d)
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    cap = open_capture(str(d))
    p = cap.find_passes("place_devices", 0)[0]
    ref = p.blobs[p.before]
    here = cap.header(0)["torch_version"]
    cap.close()
    data = b"ctorch._inductor.gone_in_this_version\nThing\n."  # pickle protocol 0: a class from another torch
    sha = hashlib.sha256(data).hexdigest()
    (d / logformat.blob_relpath(sha)).write_bytes(data)
    for log in d.glob("*_gti.log"):
        rewrite_log(log, {ref["sha256"].encode(): sha.encode(), here.encode(): b"2.11.0+cu130"})
    r = replay(str(d), "--pass", "place_devices", "--rank", "0", "--batch", "--no-check", "--trust")
    assert r.returncode == 2
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "captured with torch 2.11.0+cu130, loading with torch 2.13" in err[0], r.stderr
    assert "torch._inductor.gone_in_this_version" in err[0]


def test_command_imports_torch_only_when_it_runs():
    code = (
        "import sys, graphtrain_inspect.inspector.cli.main, graphtrain_inspect.inspector.cli.replay, "
        "graphtrain_inspect.inspector.replay.plan, graphtrain_inspect.inspector.replay.view; print('torch' in "
        "sys.modules)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=60
    )
    assert r.stdout.strip() == "False", r.stdout + r.stderr
