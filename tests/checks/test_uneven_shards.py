"""Uneven sharding traced per rank: right training is quiet, a bound of no chunk is an error."""

from __future__ import annotations

import json

import pytest

from tests.capture_utils import capture, run_cli, torchrun

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    """One run, three pipelines: #0 as traced, #1 each rank's chunk as a slice, #2 a wrong start."""
    out = tmp_path_factory.mktemp("uneven") / "cap"
    cap = capture(
        out,
        torchrun(2, "tests.programs.uneven_shards", "--variants"),
        "--pass",
        "tests.programs.uneven_shards_passes:PIPELINE",
    )
    assert cap.returncode == 0, cap.stderr[-3000:]
    return out


def _findings(out, *flags):
    res = run_cli("check", str(out), "--json", "--severity", "info", *flags)
    return json.loads(res.stdout)["findings"]


def test_right_uneven_shards_are_quiet_and_a_wrong_bound_names_its_chunk(variants):
    found = _findings(variants)
    loud = [f for f in found if f["severity"] != "info"]
    assert [(f["kind"], f["severity"], f["pipeline"]) for f in loud] == [("rank-baked-constant", "error", "#2")]
    (bug,) = loud
    assert "rank 1 slices [3, 6)" in bug["message"] and "its own chunk is [4, 7)" in bug["message"]
    assert bug["evidence"]["geometry"]["expected"] == {"0": [0, 4], "1": [4, 7]}
    # each rank's own chunk, as a split's index, a slice or a local size: info, said why
    own = [f for f in found if f["kind"] == "rank-baked-constant" and f["severity"] == "info"]
    assert {f["evidence"]["target"] for f in own} == {"operator.getitem", "aten.slice.Tensor", "aten.view.default"}
    assert all(f["evidence"]["geometry"]["own_chunk"] for f in own)
    # the slice a pass wrote in place of the split's chunk keeps the chunk's provenance: the trace
    (rewritten,) = [f for f in own if f["pipeline"] == "#1" and f["evidence"]["target"] == "aten.slice.Tensor"]
    assert rewritten["evidence"]["geometry"]["rewritten_by"] == "chunk_to_slice"
    assert all(f["introduced_by"] == "trace" for f in own)


def test_own_chunks_are_errors_where_the_graph_is_shared(variants):
    shared = [f for f in _findings(variants, "--shared-graph") if f["kind"] == "rank-baked-constant"]
    kept = [f for f in shared if "gone after" not in f["message"]]  # a chunk a later pass rewrote: info
    assert len(kept) == 6 and all(f["severity"] == "error" for f in kept)


def test_the_wrong_bound_reproduces_from_the_captured_pass(variants, tmp_path):
    import subprocess
    import sys

    found = json.loads(run_cli("check", str(variants), "--json").stdout)["findings"]
    n = next(i for i, f in enumerate(found, 1) if f["severity"] == "error")
    made = run_cli("repro", str(variants), "--finding", str(n), "-o", str(tmp_path / "r"))
    assert made.returncode == 0, made.stderr
    ran = subprocess.run(
        [sys.executable, str(tmp_path / "r" / "repro.py")], capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 1 and "rank 1: aten.slice.Tensor(view_3, 1, 3, 6)" in ran.stdout, ran.stdout
