"""A rank literal planted only in the backward (an autograd.Function's backward under torch.compile,
2 gloo ranks): after the partitioner, the literals of one op and value are split over the forward
and backward graphs; each is blamed in the graph it lives in, an error there, none "gone after" the
partitioner (tests/programs/backward_literal_compile.py)."""

from __future__ import annotations

import json

import pytest

from tests.capture_utils import run_cli, torchrun


@pytest.mark.slow
def test_backward_only_literal_is_an_error_in_the_backward_graph(tmp_path):
    out = tmp_path / "cap"
    r = run_cli(
        "capture", "--out", str(out), "--", *torchrun(2, "tests.programs.backward_literal_compile"), timeout=600
    )
    assert r.returncode == 0, r.stderr[-4000:]
    # each rank compiled for itself: info there; the grading below is that of a shared graph
    assert run_cli("check", str(out)).returncode == 0
    r = run_cli("check", str(out), "--json", "--shared-graph")
    assert r.returncode == 1, r.stderr
    fs = [f for f in json.loads(r.stdout)["findings"] if f["kind"] == "rank-baked-constant" and f["layer"] == "graph"]
    assert not [f["message"] for f in fs if "gone after" in f["message"] or f["severity"] != "error"]
    bwd = [f for f in fs if f["evidence"].get("lives_in") == "backward"]
    assert bwd and all("lives in the backward graph" in f["message"] for f in bwd)
    # graded in the graph it lives in: the backward's final graph is the one its chain ends in
    assert all(
        f["evidence"]["graph_now"] != f["graph"] and f["pass"] != "min_cut_rematerialization_partition" for f in bwd
    )
    lines = {f["source"]["line"] for f in bwd if f["source"]}
    src = open("tests/programs/backward_literal_compile.py").read().splitlines()
    assert any("* (dist.get_rank() + 1)" in src[n - 1] for n in lines)
