"""A joint pass that schedules nodes by a per-rank estimate is one finding blamed on the pass; the
same pass ordering by the graph alone is quiet. And ranks on a pipeline-parallel mesh are compared
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
def stages(tmp_path_factory):
    out = tmp_path_factory.mktemp("stages") / "cap"
    cap = capture(
        out, torchrun(4, "tests.programs.pipeline_stages"), "--pass", "tests.programs.pipeline_stages_passes:PIPELINE"
    )
    assert cap.returncode == 0, cap.stderr[-3000:]
    return out


def test_a_rank_dependent_reordering_is_one_finding_blamed_on_the_pass(reordered):
    for flags, severity in (([], "info"), (["--shared-graph"], "error")):
        doc = json.loads(run_cli("check", str(reordered), "--json", *flags).stdout)
        assert [(f["kind"], f["severity"], f["introduced_by"]) for f in doc["findings"]] == [
            ("rank-divergent-graph", severity, "reorder_by_local_estimate")
        ]
        assert doc["summary"]["findings"] == 1
    table = run_cli("check", str(reordered), "--shared-graph", "--all", "--color", "never").stdout
    assert table.rstrip().splitlines()[-1].startswith("1 finding: 1 error, 0 warnings")


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
