"""torch's DTensor tensor parallelism on a (dp=2, tp=2) mesh + torch.compile, 4 gloo ranks
(tests/programs/dtensor_tp_compile.py). Each rank's graph names its own tp group ('3' on ranks
0-1, '4' on ranks 2-3), listed by the 2-D mesh and by its tp sub-mesh: correct code, so `check`
gives no error or warning, the same on two captures, and ranks of one tp role (0 and 2) have no
difference. A planted tp coordinate literal is still found, with each rank's own value."""

from __future__ import annotations

import json

import pytest

from tests.capture_utils import every_finding, run_cli, torchrun

PROGRAM = "tests.programs.dtensor_tp_compile"


@pytest.fixture(scope="module")
def tp_captures(tmp_path_factory):
    caps = {}
    for name, extra in (("clean", []), ("clean-again", []), ("planted", ["--plant-tp-literal"])):
        out = tmp_path_factory.mktemp("tp") / name
        r = run_cli("capture", "--out", str(out), "--", *torchrun(4, PROGRAM, "--steps", "1", *extra), timeout=900)
        assert r.returncode == 0, r.stderr[-4000:]
        caps[name] = out
    return caps


def _check(path, *opts) -> tuple[int, dict, str]:
    r = run_cli("check", str(path), "--json", *opts)
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    doc["findings"] = every_finding(doc)  # a literal's backward copy and kernel lines are its consequences
    return r.returncode, doc, run_cli("check", str(path), *opts).stdout


@pytest.mark.slow
def test_clean_tp_run_has_no_finding_run_after_run(tp_captures):
    outputs = []
    for name in ("clean", "clean-again"):
        rc, doc, table = _check(tp_captures[name])
        assert (
            rc == 0
            and [(f["kind"], f["severity"], f["message"]) for f in doc["findings"] if f["severity"] != "info"] == []
        )
        assert doc["summary"]["ranks"] == [0, 1, 2, 3]
        outputs.append(table.replace(str(tp_captures[name]), "CAP"))
    assert outputs[0] == outputs[1]
    # the all_reduce of the row-wise layer uses group '3' on rank 0 and '4' on rank 2: same role
    d = run_cli("diff", str(tp_captures["clean"]), "--pass", "trace", "--ranks", "0,2", "--json")
    assert d.returncode == 0, d.stderr
    diffs = json.loads(d.stdout)["diffs"]
    assert len(diffs) >= 4 and any(x["a_gid"] != x["b_gid"] for x in diffs)  # the graphs differ, their roles do not
    assert [x["counts"] for x in diffs] == [{"added": 0, "removed": 0, "changed": 0}] * len(diffs)


@pytest.mark.slow
def test_planted_tp_literal_is_found_with_each_ranks_own_value(tp_captures):
    # the tp coordinate read as an int by model code: right in each rank's own trace (info), an
    # error in a graph loaded by every rank
    rc, doc, _ = _check(tp_captures["planted"])
    assert rc == 0 and not [f for f in doc["findings"] if f["severity"] != "info"]
    assert any(f["evidence"].get("severity_if_shared") == "error" for f in doc["findings"])
    rc, doc, table = _check(tp_captures["planted"], "--shared-graph")
    graph = [f for f in doc["findings"] if f["severity"] != "info" and f["layer"] == "graph"]
    assert rc == 1 and graph and {(f["kind"], f["severity"]) for f in graph} == {("rank-baked-constant", "error")}
    f = next(f for f in graph if f["evidence"]["values"] == {"0": 1, "1": 2, "2": 1, "3": 2})
    assert "coordinate[tp]" in [m["vector"] for m in f["evidence"]["matches"]]
    assert f["source"]["file"].endswith("tests/programs/dtensor_tp_compile.py") and "self.plant" in f["source"]["code"]
    # no finding about the tp group itself (its name differs across ranks, its role does not)
    assert not any("all_reduce" in str(f["evidence"].get("target")) for f in graph)
