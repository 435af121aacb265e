"""`graphtrain-inspect ls`: ranks, passes in order with node counts and deltas, sizes, capture errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.inspector.cli.ls import listing
from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.capture_utils import ROOT as REPO_ROOT
from tests.small_captures import CaptureWriter

ROOT = str(REPO_ROOT)


def cli(*args):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "graphtrain_inspect.inspector.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def g1():
    return make_fx(lambda x: (x * 2).relu().sum())(torch.randn(4))


def g2():
    return make_fx(lambda x: (x * 2).sum())(torch.randn(4))


def write(tmp_path, *, differ: bool = False, kill_rank1: bool = False):
    w = CaptureWriter(tmp_path, world_size=2)
    for r in (0, 1):
        rw = w.rank(r)
        rw.apply("drop_relu", g1(), g2())
        rw.apply("split", g2(), {"fw": g1(), "bw": g2()} if not (differ and r == 1) else {"fw": g2(), "bw": g2()})
        rw.apply("broken", g2(), None, exception=RuntimeError("this pass always fails"))
        if r == 0:
            rw.error("blob (after)", "cannot pickle a lambda")
        if kill_rank1 and r == 1:
            rw._write(logformat.PASS_START, {"seq": 9, "name": "killed_here", "before": None}, {"seq": 9})
            continue
        rw.end()
    return w.finish()


def test_listing_data(tmp_path):
    cap = open_capture(write(tmp_path))
    data = listing(cap)
    r0 = data["ranks"][0]
    assert [p["name"] for p in r0["passes"]] == ["drop_relu", "split", "broken"]
    drop = r0["passes"][0]
    assert drop["before"]["nodes"] == 5 and drop["after"]["out"]["nodes"] == 4 and drop["after"]["out"]["delta"] == -1
    assert set(r0["passes"][1]["after"]) == {"fw", "bw"}
    assert r0["passes"][2]["status"] == "raised" and "this pass always fails" in r0["passes"][2]["exception"]
    assert r0["capture_errors"][0]["message"] == "cannot pickle a lambda"
    assert r0["complete"] is True


def test_ls_command(tmp_path):
    d = write(tmp_path / "a")
    r = cli("ls", d, "--color", "never")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "rank 0:" in out and "same passes and graphs as rank 0" in out  # rank 1 folded
    assert "#0 drop_relu" in out and "5 -> 4" in out and "-1" in out
    assert "raised RuntimeError: this pass always fails" in out
    assert "capture error" in out and "cannot pickle a lambda" in out
    r = cli("ls", d, "--all", "--color", "never")
    assert r.stdout.count("#0 drop_relu") == 2
    r = cli("ls", d, "--json")
    doc = json.loads(r.stdout)
    assert [x["rank"] for x in doc["ranks"]] == [0, 1]


def test_ls_killed_rank(tmp_path):
    d = write(tmp_path, differ=True, kill_rank1=True)
    r = cli("ls", d, "--color", "never")
    assert r.returncode == 0
    assert "started, never finished" in r.stdout and "no end record" in r.stdout
    assert "same passes and graphs" not in r.stdout  # rank 1 produced other graphs
    # diff of the pass it died in says so, not "no pass" with the pass in the list beside it
    r = cli("diff", d, "--pass", "killed_here", "--rank", "1")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "graphtrain-inspect diff: pass #9 killed_here started on rank 1 and never finished (the rank stopped "
        "inside it): no graph after it to diff"
    ]


def test_ls_names_the_ranks_that_recorded_nothing(tmp_path, capsys):
    """Under --coor rank 1 loads rank 0's graph and writes no log: ls says so."""
    from graphtrain_inspect.inspector.cli.main import main

    w = CaptureWriter(tmp_path / "cap", world_size=2)
    r0 = w.rank(0)
    r0.apply("drop_relu", g1(), g2())
    r0.end()
    w.finish()
    assert main(["ls", str(tmp_path / "cap")]) == 0
    assert "rank 1: recorded nothing (no log; ran no captured pass)" in capsys.readouterr().out.splitlines()
    assert main(["ls", str(tmp_path / "cap"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["absent_ranks"] == [1]
