"""Shard bounds baked into a graph compiled on one rank: errors, also at chunk 0; read from the
graph: quiet."""

from __future__ import annotations

import json

import pytest

from tests.capture_utils import capture, run_cli, torchrun

pytestmark = pytest.mark.slow

PASSES = "tests.programs.precompile_load_passes"


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    """One run: pipeline #0 bakes rank 0's vocabulary range, #1 reads the coordinate as an input."""
    out = tmp_path_factory.mktemp("vocab") / "cap"
    cap = capture(
        out,
        torchrun(2, "tests.programs.vocab_parallel", "--both"),
        "--pass",
        f"{PASSES}:COMPILE_TIME",
        "--pass",
        f"{PASSES}:LOAD_TIME",
    )
    assert cap.returncode == 0, cap.stderr[-3000:]
    return out


def test_baked_vocabulary_range_is_an_error_and_the_fixed_graph_is_quiet(vocab):
    res = run_cli("check", str(vocab), "--json", "--severity", "info")
    found = json.loads(res.stdout)["findings"]
    assert {(f["kind"], f["severity"], f["pipeline"]) for f in found} == {("rank-baked-constant", "error", "#0")}
    assert sorted(f["evidence"]["tensor"] for f in found) == ["ids_1", "target_1"]
    for f in found:
        ev = f["evidence"]
        assert ev["bounds"] == [0, 16] and ev["dim_size"] == 32 and ev["equals"] == "coordinate[tp]"
        assert "coordinate[tp] = 0, shard size 16" in f["message"]
    text = run_cli("check", str(vocab)).stdout
    assert "[0, 16) = compiling rank 0's coordinate[tp]; dim size 32 in 2 chunks; at lt, ge, sub" in text
