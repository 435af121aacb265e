"""A graph trainer's own pass lists are recorded without `--pass` (capture/framework_passes.py):
torchtitan graph_trainer's `apply_graph_passes` applying a pipeline the user registered with
`register_pass_pipeline` (tests/programs/graph_trainer_own_pipeline.py, 2 gloo ranks)."""

from __future__ import annotations

import json

import pytest

from tests.capture_utils import run_cli, torchrun


@pytest.mark.slow
def test_own_registered_pipeline_is_recorded_and_blamed(tmp_path):
    out = tmp_path / "cap"
    r = run_cli("capture", "--out", str(out), "--", *torchrun(2, "tests.programs.graph_trainer_own_pipeline"))
    assert r.returncode == 0, r.stderr[-4000:]
    ls = json.loads(run_cli("ls", str(out), "--json").stdout)
    # on both ranks, though no --pass names it
    assert [[(p["name"], p["source"]) for p in rank["passes"]] for rank in ls["ranks"]] == [
        [("scale_by_rank", "named")]
    ] * 2
    r = run_cli("check", str(out), "--json")
    doc = json.loads(r.stdout)
    found = [(f["kind"], f["severity"], f["introduced_by"]) for f in doc["findings"]]
    assert r.returncode == 1 and found == [("rank-baked-constant", "error", "scale_by_rank")], found
