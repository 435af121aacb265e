"""A joint pass that schedules nodes by a per-rank estimate issues the same all_reduces in another
order on rank 1: collectives pair by order, so the ranks sum different gradients. That is one
collective-mismatch error blamed on the pass (its structural divergence a consequence); the same
pass ordering by the graph alone is quiet. And ranks on a pipeline-parallel mesh are compared
within their stage by `ls`, as `check` compares them."""

from __future__ import annotations

import json

import pytest

from tests.capture_utils import capture, run_cli, torchrun

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def reordered(tmp_path_factory):
    out = tmp_path_factory.mktemp("reorder") / "cap"
    cap = capture(
        out, torchrun(2, "tests.programs.rank_reorder"), "--pass", "tests.programs.rank_reorder_passes:PIPELINE"
    )
    assert cap.returncode == 0, cap.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def reordered_clean(tmp_path_factory):
    out = tmp_path_factory.mktemp("reorder-clean") / "cap"
    cap = capture(
        out,
        torchrun(2, "tests.programs.rank_reorder"),
        "--pass",
        "tests.programs.rank_reorder_passes:PIPELINE",
        env={"GTI_REORDER_CLEAN": "1"},
    )
    assert cap.returncode == 0, cap.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def stages(tmp_path_factory):
    out = tmp_path_factory.mktemp("stages") / "cap"
    cap = capture(
        out, torchrun(4, "tests.programs.pipeline_stages"), "--pass", "tests.programs.pipeline_stages_passes:PIPELINE"
    )
    assert cap.returncode == 0, cap.stderr[-3000:]
    return out


def test_a_rank_dependent_reordering_of_the_collectives_is_one_error_blamed_on_the_pass(reordered, reordered_clean):
    for flags in ([], ["--shared-graph"]):
        doc = json.loads(run_cli("check", str(reordered), "--json", *flags).stdout)
        assert [(f["kind"], f["severity"], f["introduced_by"]) for f in doc["findings"]] == [
            ("collective-mismatch", "error", "reorder_by_local_estimate")
        ]
        [f] = doc["findings"]
        assert [(c["kind"], c["severity"], c["introduced_by"]) for c in f["consequences"]] == [
            ("rank-divergent-graph", "info", "reorder_by_local_estimate")
        ]
        assert doc["summary"]["findings"] == 1
    # rank 1 issues the grad of w1 (rank 0's 1st all_reduce) 3rd and that of w3 (rank 0's 3rd) 1st
    assert f["node"] == "all_reduce_default_2" and f["ranks"] == [0, 1]
    assert f["message"].startswith(
        "rank 1 issues the all_reduce of mm_default_3 (all_reduce_default_2, at rank_reorder_passes.py:45; "
        "rank 1: mm_default_4) 1st, rank 0 issues it 3rd (and 1 more moved): collectives pair by order, so each "
        "rank would reduce another rank's different tensor"
    )
    [part] = f["evidence"]["parts"]["1"]
    assert part["how"] == "order"
    assert [(m["rank_position"], m["reference_position"]) for m in part["moves"]] == [(1, 3), (3, 1)]
    # each rank's collectives with what they send, the other rank's named as the reference names them
    assert (
        f["evidence"]["collectives"]["1"][0]
        == "all_reduce (group world) -> [8, 8] of mm_default_4 (r0: mm_default_3) [forward]"
    )
    table = run_cli("check", str(reordered), "--all", "--color", "never").stdout
    assert table.rstrip().splitlines()[-1].startswith("1 finding: 1 error, 0 warnings")
    # the same pass ordering by the graph alone: nothing, not even info
    for flags in ([], ["--shared-graph"]):
        assert json.loads(run_cli("check", str(reordered_clean), "--json", *flags).stdout)["findings"] == []


def test_ls_compares_ranks_within_their_pipeline_stage(stages):
    res = run_cli("ls", str(stages), "--color", "never")
    assert res.returncode == 0, res.stderr
    assert "graphs: by pipeline stage: pp 0: ranks 0-1 agree at every stage; pp 1: ranks 2-3 agree at every stage" in (
        res.stdout
    )
    doc = json.loads(run_cli("ls", str(stages), "--json").stdout)
    assert [(g["ranks"], g["stage"]) for g in doc["rank_classes"]["groups"]] == [
        ([0, 1], {"pp": 0}),
        ([2, 3], {"pp": 1}),
    ]
    # check compares the same groups: each stage's ranks agree, nothing is reported across stages
    assert json.loads(run_cli("check", str(stages), "--json").stdout)["findings"] == []
