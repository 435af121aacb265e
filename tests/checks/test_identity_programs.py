"""Real torchrun programs whose pipelines must be paired by identity (tests/programs/precompile_load.py,
2 gloo ranks): compile on one rank followed by a load-time pass on every rank, and a per-layer
compile whose two layers trace identical graphs."""

from __future__ import annotations

import json

import pytest

from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.capture_utils import run_cli, torchrun

PASSES = [
    "--pass",
    "tests.programs.precompile_load_passes:COMPILE_TIME",
    "--pass",
    "tests.programs.precompile_load_passes:LOAD_TIME",
    "--pass",
    "tests.programs.precompile_load_passes:PER_LAYER",
]


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    caps = {}
    for name, extra in (
        ("precompile", ["--plant"]),
        ("precompile-clean", []),
        ("per-layer", ["--per-layer", "--plant"]),
    ):
        out = tmp_path_factory.mktemp("identity") / name
        r = run_cli("capture", "--out", str(out), *PASSES, "--", *torchrun(2, "tests.programs.precompile_load", *extra))
        assert r.returncode == 0, r.stderr[-4000:]
        caps[name] = out
    return caps


def _check(path):
    r = run_cli("check", str(path), "--json")
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)


@pytest.mark.slow
def test_precompile_with_load_time_passes_finds_the_baked_slice_only(programs):
    rc, doc = _check(programs["precompile"])
    found = [(f["kind"], f["severity"], f["node"]) for f in doc["findings"] if f["severity"] != "info"]
    assert rc == 1 and found == [("rank-baked-constant", "error", "slice_1")], doc["findings"]
    assert "rank 0's chunk" in doc["findings"][0]["message"]
    assert any("rank(s) [0] compiled, rank(s) [0, 1] ran the loaded graph" in n for n in doc["summary"]["notes"])
    with open_capture(str(programs["precompile"])) as cap:
        # every rank loaded the broadcast graph (GraphPickler.loads seen by the capture)
        assert [(pl.key, [p.name for p in pl.passes]) for pl in cap.pipelines(0)] == [
            ("#0", ["remove_detach", "fold_views", "remove_dead_code"]),
            ("#L0", ["hoist_device"]),
        ]
        assert [(pl.key, pl.origin) for pl in cap.pipelines(1)] == [("#L0", "loaded")]


@pytest.mark.slow
def test_precompile_clean_twin_is_quiet(programs):
    rc, doc = _check(programs["precompile-clean"])
    assert rc == 0 and [f for f in doc["findings"] if f["severity"] != "info"] == []


@pytest.mark.slow
def test_per_layer_finding_is_in_the_second_layers_pipeline(programs):
    rc, doc = _check(programs["per-layer"])
    stale = [f for f in doc["findings"] if f["kind"] == "stale-unbacked-symbol"]
    assert rc == 1 and stale and {f["pipeline"] for f in stale} == {"#1"}, stale
    with open_capture(str(programs["per-layer"])) as cap:
        pls = cap.pipelines(0)
        # two layers, one traced graph id, two pipelines
        assert len(pls) == 2 and pls[0].traced == pls[1].traced
