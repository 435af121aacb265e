"""Jobs of several nodes on one machine, and `capture --ranks`: two torchrun "nodes" (2 ranks each,
c10d rendezvous over loopback, gloo) under `capture` with one shared --out and with a folder each,
an srun-style launch (tests/programs/two_nodes.py: one capture per task), and a 4-rank job of which
`--ranks 1,3` record. Every multi-node reading must give the findings of one world (the planted
`rank + 3` literal on ranks 0-3) and nothing from absence."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from graphtrain_inspect.capture import nodes
from graphtrain_inspect.capture.shared import logformat, node_ranks
from tests.capture_utils import capture, child_env, loss_lines, run_cli, run_plain, start_capture, torchrun

PROGRAM = "tests.programs.node_world"
WAIT_S = 240  # each launch; a hang fails the test instead of holding CI


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun_node(k: int, port: int) -> list[str]:
    return [
        sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(k),
        "--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "-m", PROGRAM,
    ]  # fmt: skip


def _two_torchrun_nodes(outs: list) -> list[tuple[int, str]]:
    """(exit status, stderr) of each node's capture, both started at once."""
    port = _port()
    procs = [start_capture(out, _torchrun_node(k, port), "--no-inductor") for k, out in enumerate(outs)]
    ended = []
    try:
        for p in procs:
            _, err = p.communicate(timeout=WAIT_S)
            ended.append((p.returncode, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return ended


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    out = tmp_path_factory.mktemp("shared") / "cap"
    return out, _two_torchrun_nodes([out, out])


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    base = tmp_path_factory.mktemp("local")
    return base, _two_torchrun_nodes([base / "n0", base / "n1"])


@pytest.fixture(scope="module")
def srun_style(tmp_path_factory):
    """Every task under its own capture, all four into one folder (a folder per node is what the
    torchrun test reads; two_nodes.py --per-node does it here too)."""
    base = tmp_path_factory.mktemp("srun")
    cmd = [sys.executable, "-m", "tests.programs.two_nodes", str(base), "--port", str(_port())]
    r = subprocess.run(
        [*cmd, "--timeout", str(WAIT_S), "--", sys.executable, "-m", PROGRAM],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=WAIT_S + 30,
    )
    return base, r


def _check(*dirs) -> dict:
    r = run_cli("check", *map(str, dirs), "--json", "--severity", "info")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _findings(doc: dict) -> list[tuple]:
    return [(f["kind"], f["severity"], f["ranks"], f["message"]) for f in doc["findings"]]


# the finding of a single-node run of the program: its planted literal, on every rank
ONE_WORLD = [
    (
        "rank-baked-constant",
        "info",
        [0, 1, 2, 3],
        "operator.mul args[1] differs across ranks (rank 0: 3, rank 1: 4, rank 2: 5, rank 3: 6) and equals rank + 3; "
        "right for a graph each rank traces for itself; wrong if one rank's graph is loaded by the others (check "
        "--shared-graph)",
    )
]


def _no_absence(doc: dict) -> None:
    notes = " ".join(doc["summary"]["notes"])
    assert "left no log" not in notes and "not in these folders" not in notes and "not recorded" not in notes
    assert doc["summary"]["ranks"] == [0, 1, 2, 3] and doc["summary"]["read_errors"] == []


@pytest.mark.slow
def test_two_torchrun_nodes_share_one_out(shared):
    out, procs = shared
    assert [code for code, _ in procs] == [0, 0], [err[-2000:] for _, err in procs]
    assert sorted(os.listdir(out / node_ranks.NODES_DIR)) == ["node0", "node1"]
    assert {n for n in os.listdir(out) if n.endswith(logformat.LOG_SUFFIX)} == {
        logformat.log_file_name(r) for r in range(4)
    }
    doc = _check(out)
    assert _findings(doc) == ONE_WORLD
    _no_absence(doc)
    ls = run_cli("ls", str(out))
    assert "node 0 (" in ls.stdout and "node 1 (" in ls.stdout, ls.stdout
    # a capture of another job, or of no job, into the same folder: refused, nothing run
    other = capture(out, _torchrun_node(1, 1), "--no-inductor", timeout=60)
    assert other.returncode == 2 and "holds a capture of another job" in other.stderr, other.stderr
    alone = capture(out, [sys.executable, "-c", "pass"], timeout=60)
    assert alone.returncode == 2 and "not an empty directory" in alone.stderr, alone.stderr
    assert sorted(os.listdir(out / node_ranks.NODES_DIR)) == ["node0", "node1"]


@pytest.mark.slow
def test_two_torchrun_nodes_each_their_own_out(local, shared):
    base, procs = local
    assert [code for code, _ in procs] == [0, 0], [err[-2000:] for _, err in procs]
    # as one world: the folders named, or the folder holding them
    for doc in (_check(base / "n0", base / "n1"), _check(base)):
        assert _findings(doc) == ONE_WORLD
        _no_absence(doc)
    # one node's folder alone: the other node's ranks are elsewhere, not ranks that ran no pass
    alone = _check(base / "n0")
    hosted = alone["summary"]["ranks"]
    assert len(hosted) == 2 and alone["summary"]["error"] == alone["summary"]["warning"] == 0
    notes = alone["summary"]["notes"]
    assert any("not in these folders" in n for n in notes) and not any("left no log" in n for n in notes), notes
    # folders of two runs are not one world
    mixed = run_cli("check", str(base / "n0"), str(shared[0]))
    assert mixed.returncode != 0 and "another job" in mixed.stderr and len(mixed.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_srun_style_launch_one_capture_per_task(srun_style):
    base, r = srun_style
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(loss_lines(r.stdout)) == 4
    # a part per task
    assert sorted(os.listdir(base / node_ranks.NODES_DIR)) == [
        f"node{t // 2}.task{t}" for t in range(4)
    ]  # a part per task
    doc = _check(base)
    assert _findings(doc) == ONE_WORLD
    _no_absence(doc)
    ls = run_cli("ls", str(base))
    assert "node 0 (" in ls.stdout and "ranks 0-1" in ls.stdout and "ranks 2-3" in ls.stdout, ls.stdout


@pytest.mark.slow
def test_ranks_records_only_those_and_leaves_training_as_it_was(tmp_path):
    plain = run_plain(torchrun(4, PROGRAM), timeout=WAIT_S)
    out = tmp_path / "cap"
    cap = capture(out, torchrun(4, PROGRAM), "--no-inductor", "--ranks", "1,3", timeout=WAIT_S)
    assert cap.returncode == 0, cap.stderr[-3000:]
    assert len(loss_lines(plain.stdout)) == 4 and loss_lines(cap.stdout) == loss_lines(plain.stdout)
    assert {n for n in os.listdir(out) if n.endswith(logformat.LOG_SUFFIX)} == {
        logformat.log_file_name(1),
        logformat.log_file_name(3),
    }
    written = [n for _, _, files in os.walk(out) for n in files]
    assert not [n for n in written if n.startswith(("rank_0", "rank_2"))], written  # no file of the others
    assert "rank 0,2: not recorded (--ranks 1,3)" in cap.stderr
    doc = _check(out)
    notes = doc["summary"]["notes"]
    assert "checked ranks 1,3 of world size 4" in notes and "rank 0,2: not recorded (capture --ranks 1,3)" in notes
    assert doc["summary"]["error"] == doc["summary"]["warning"] == 0


# -- without a run ------------------------------------------------------------------------------


def test_node_of_reads_torchrun_and_slurm():
    n = nodes.node_of(
        ["torchrun", "--nnodes=2", "--node_rank", "1", "--rdzv-endpoint", "h:29400", "--rdzv-id", "j7", "t.py"], {}
    )
    assert (n.job, n.node_rank, n.nnodes, n.part) == ("torchrun rendezvous h:29400 id j7", 1, 2, "node1")
    assert nodes.node_of([sys.executable, "-m", "torch.distributed.run", "--standalone", "t.py"], {}).job is None
    s = nodes.node_of(["python", "t.py"], {"SLURM_JOB_ID": "9", "SLURM_NODEID": "3", "SLURM_PROCID": "12"})
    assert (s.job, s.node_rank, s.part) == ("slurm job 9 step -", 3, "node3.task12")
    # the script's own options are not torchrun's
    t = nodes.node_of(["torchrun", "--nproc-per-node", "2", "t.py", "--node-rank", "5"], {})
    assert t.job is None


def test_ranks_choice_is_made_by_each_worker_alike():
    assert node_ranks.rank_spec_problem("0-7,512") is None and node_ranks.rank_spec_problem("auto") is None
    assert "empty range" in (node_ranks.rank_spec_problem("3-1") or "")
    assert node_ranks.chosen_ranks("0-7,512", 16, 8) == list(range(8))
    auto = node_ranks.chosen_ranks("auto", 32, 8)
    assert 0 in auto and 31 in auto and len(auto) < 32
    env = {nodes.ENV_RANKS: "1,3", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4"}
    assert [nodes.records_here({**env, "RANK": str(r)}) for r in range(4)] == [False, True, False, True]
    assert nodes.records_here({nodes.ENV_RANKS: "1"})  # torchrun's agent (no RANK) records its ranks' ends


@pytest.mark.parametrize("hosted", [None, [0], [0, 1]])
def test_compile_on_one_rank_is_not_inferred_from_a_missing_node(tmp_path, hosted):
    """Rank 1 of 2 has no log. Without node records (older captures) or when its node says it
    started it, it ran no pass: compile on one rank, rank 0's literal an error. When no node read
    says it hosted rank 1, nothing is known of it: no inference, no finding, and it is named."""
    from graphtrain_inspect.inspector.checks import check_report
    from graphtrain_inspect.inspector.read.capture_index import open_capture
    from tests.checks.test_rank_baked_constant import coor_graph
    from tests.small_captures import CaptureWriter, mesh_rank_table

    w = CaptureWriter(tmp_path, world_size=2)
    rw = w.rank(0, rank_table=mesh_rank_table(0, (2,), ("tp",)))
    rw.apply("trace_joint", coor_graph(None), coor_graph(0))
    rw.end()
    w.finish()
    if hosted is not None:
        part = tmp_path / node_ranks.NODES_DIR / "node0"
        part.mkdir(parents=True)
        record = {"node": {"job": "torchrun rendezvous h:1 id j", "node_rank": 0, "nnodes": 2, "part": "node0"}}
        (part / logformat.MANIFEST_NAME).write_text(json.dumps(record))
        for r in hosted:
            doc = {"rank": r, "node_rank": 0, "local_world_size": 1, "world_size": 2}
            (part / f"{node_ranks.RANK_FILE_PREFIX}{r}.json").write_text(json.dumps(doc))
    report = check_report(open_capture(str(tmp_path)))
    inferred = any("compile on one rank" in n for n in report.notes)
    if hosted == [0]:
        assert not inferred and [f.kind for f in report.findings] == []
        assert "rank 1: on node 1, not in these folders (its node's capture was not given)" in report.notes
    else:
        assert inferred and [(f.kind, f.severity) for f in report.findings] == [("rank-baked-constant", "error")]
        assert any("left no log (never ran a captured pass)" in n for n in report.notes)
