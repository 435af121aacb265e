"""`compare BASE NEW`: two runs paired by identity, each pass's graphs said the same or changed
per pair of ranks, and the findings that are new, gone or graded; exit 1 only for a new error.

Real captures: the bundled GPU captures (the clean sample against itself, against its rank-baked
twin, against its 4-rank run), and small hand-built captures (tests/small_captures.py) of a pass
edited so that it changes one rank's graph only.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from graphtrain_inspect.inspector.checks.finding_changes import match_findings
from graphtrain_inspect.inspector.checks.findings import Finding
from graphtrain_inspect.inspector.read.stages import StageKey
from tests.capture_utils import run_cli


def compare(*args: str):
    r = run_cli("compare", *args, "--color", "never")
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    return r


# -- hand-built runs: a pass edited to change rank 1's graph alone -------------------------------------


def _graphs(rank: int, baked: bool):
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    def traced(x, w):
        y = torch.ops.aten.mm.default(x, w)
        z = torch.ops.aten.relu.default(y)
        d = torch.ops.aten.detach.default(z)  # noqa: F841 - dead code for the first pass
        return torch.ops.aten.sum.default(z)

    def no_dead(x, w):
        y = torch.ops.aten.mm.default(x, w)
        z = torch.ops.aten.relu.default(y)
        return torch.ops.aten.sum.default(z)

    def sharded(x, w):
        y = torch.ops.aten.mm.default(x, w)
        z = torch.ops.aten.relu.default(y)
        s = torch.ops.aten.select.int(z, 0, rank if baked else 0)  # edited: this rank's row
        return torch.ops.aten.sum.default(s)

    args = (torch.randn(4, 8), torch.randn(8, 4))
    return [make_fx(f, tracing_mode="fake")(*args) for f in (traced, no_dead, sharded)]


def _run(directory, *, baked: bool, renamed: bool = False, extra: bool = False) -> str:
    from tests.small_captures import CaptureWriter, mesh_rank_table

    w = CaptureWriter(directory, world_size=2)
    for r in range(2):
        rw = w.rank(r, rank_table=mesh_rank_table(r, (2,), ("dp",)), own_device="cpu")
        g0, g1, g2 = _graphs(r, baked)
        rw.apply("remove_dead_code", g0, g1)
        rw.apply("shard_rows", g1, g2)
        rw.apply("tidy" if renamed else "noop", g2, g2)
        if extra:
            rw.apply("extra_pass", g2, g2)
        rw.end()
    return w.finish()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("runs")
    return {
        "clean": _run(d / "clean", baked=False),
        "clean2": _run(d / "clean2", baked=False),
        "edited": _run(d / "edited", baked=True, renamed=True, extra=True),
    }


def test_two_runs_of_one_program_are_the_same(runs):
    r = compare(runs["clean"], runs["clean2"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "stages, the same on every rank" in r.stdout and "nothing new is wrong" in r.stdout
    assert "changed on" not in r.stdout
    doc = json.loads(compare(runs["clean"], runs["clean2"], "--json").stdout)
    assert doc["summary"]["stages"]["same"] == len(doc["stages"]) and doc["summary"]["exit"] == 0
    assert doc["ranks"] == {
        "by": "mesh",
        "pairs": [[0, 0], [1, 1]],
        "base_only": [],
        "new_only": [],
        "roles": {"0": "dp=0", "1": "dp=1"},
        "note": None,
    }


def test_a_pass_edited_on_one_rank_is_named_with_its_rank_and_new_error(runs):
    r = compare(runs["clean"], runs["edited"])
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    shard = next(line for line in lines if line.split()[:1] == ["shard_rows"])
    assert "changed on rank 1:" in shard and "rank 0" not in shard, r.stdout
    renamed = next(line for line in lines if "noop -> tidy" in line)
    assert "renamed; its input changed on rank 1" in renamed, r.stdout
    assert any(line.split()[:2] == ["+", "extra_pass"] and "added" in line for line in lines), r.stdout
    new = [line for line in lines if line.lstrip().startswith("NEW ")]
    assert new and "error" in new[0] and "rank-baked-constant" in new[0] and "ranks 0-1" in new[0], r.stdout
    assert "1 new error in the new run" in r.stdout
    # the way back: the error is gone, nothing new is wrong
    back = compare(runs["edited"], runs["clean"])
    assert back.returncode == 0 and "GONE" in back.stdout and "removed" in back.stdout, back.stdout

    doc = json.loads(compare(runs["clean"], runs["edited"], "--json").stdout)
    by = {(s["base"], s["new"]): s for s in doc["stages"]}
    s = by[("shard_rows", "shard_rows")]
    assert s["status"] == "changed" and [c["status"] for c in s["ranks"]] == ["same", "changed"]
    assert s["ranks"][1]["nodes"] == {"added": 0, "removed": 0, "changed": 1}
    assert by[("noop", "tidy")]["renamed"] and by[("noop", "tidy")]["status"] == "input changed"
    assert by[(None, "extra_pass")]["status"] == "added"
    assert doc["summary"]["new_errors"] == 1 and doc["summary"]["exit"] == 1
    assert doc["findings"][0]["status"] == "new" and doc["findings"][0]["new"]["kind"] == "rank-baked-constant"


def test_pass_diff_between_the_runs(runs):
    r = compare(runs["clean"], runs["edited"], "--pass", "shard_rows")
    assert r.returncode == 0, r.stderr
    assert "shard_rows on rank 1 (pipeline 0): base vs new" in r.stdout
    assert "~ select: args[2]: 0 -> 1" in r.stdout and "rank 0" not in r.stdout.split("\n")[0]
    assert "+" in r.stdout and "aten.select.int" in r.stdout  # the text diff
    r0 = compare(runs["clean"], runs["edited"], "--pass", "shard_rows", "--rank", "0")
    assert "the same in both runs" in r0.stdout, r0.stdout
    doc = json.loads(compare(runs["clean"], runs["edited"], "--pass", "noop", "--json").stdout)
    assert doc["diffs"][0]["stage"] == "noop -> tidy" and doc["diffs"][0]["new_rank"] == 1
    # bad input: one line, exit 2
    for bad, says in (
        (["--pass", "no_such_pass"], "no pass 'no_such_pass'"),
        (["--pass", "shard_rows", "--rank", "7"], "no rank 7"),
    ):
        r = compare(runs["clean"], runs["edited"], *bad)
        assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = compare(runs["clean"], runs["clean"] + "-missing")
    assert r.returncode == 2 and "-missing" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


# -- bundled GPU captures ------------------------------------------------------------------------------


def test_bundled_rank_baked_against_clean_and_4_ranks_by_role(bundled_capture):
    clean = str(bundled_capture("h200x2-clean"))
    same = compare(clean, clean)
    assert same.returncode == 0 and "nothing new is wrong" in same.stdout, same.stdout
    assert "changed on" not in same.stdout and "8 stages: 8 same" in same.stdout, same.stdout

    # the model reads its rank (--bug rank-baked): the traced graph changed, and every pass after
    # it received a changed graph; its rank literals are info in per-rank graphs: nothing new is wrong
    baked = compare(clean, str(bundled_capture("h200x2-rank-baked")), "--json")
    doc = json.loads(baked.stdout)
    assert baked.returncode == 0 and doc["summary"]["new_errors"] == 0, baked.stdout[:3000]
    status = {s["base"]: s["status"] for s in doc["stages"]}
    assert status["trace"] == "changed" and set(status.values()) == {"changed", "input changed"}, status
    assert {f["new"]["kind"] for f in doc["findings"] if f["status"] == "new"} == {"rank-baked-constant"}
    assert all(f["new"]["severity"] == "info" for f in doc["findings"] if f["status"] == "new")

    # compiled on one rank and loaded by the others: the same literals are errors
    coor = compare(str(bundled_capture("h200x2-coor-clean")), str(bundled_capture("h200x2-coor-rank-baked")))
    assert coor.returncode == 1 and "2 new errors in the new run" in coor.stdout, coor.stdout
    assert "  trace " in coor.stdout and "changed on rank 0" in coor.stdout, coor.stdout

    four = compare(clean, str(bundled_capture("h200x4-clean")), "--json")
    doc = json.loads(four.stdout)
    assert four.returncode in (0, 1) and doc["ranks"]["by"] == "mesh", four.stdout[:2000]
    # the 4-rank run's mesh is dp x ep: the 2-rank run's dp ranks pair with those at ep=0
    assert doc["ranks"]["pairs"] == [[0, 0], [1, 2]] and doc["ranks"]["new_only"] == [1, 3]
    assert doc["ranks"]["roles"] == {"0": "dp=0,ep=0", "1": "dp=1,ep=0"}
    text = compare(clean, str(bundled_capture("h200x4-clean")), "--no-check").stdout
    assert "no counterpart for the new run's rank(s) 1,3" in text and "rank 1/2" in text, text


# -- matching findings, whatever their kind ----------------------------------------------------------------


def _f(kind="any-new-kind", severity="error", ranks=(1,), node="mul", intro="p", pipeline="#0") -> Finding:
    return Finding(kind, severity, "m", intro, intro, list(ranks), node=node, pipeline=pipeline)


def _runs(pairs=((0, 0), (1, 1)), renamed=()):
    keys = {StageKey("#0", a, 0, "out"): StageKey("#0", b, 0, "out") for a, b in renamed}
    return SimpleNamespace(ranks=SimpleNamespace(new_of=lambda: {n: b for b, n in pairs}), new_key=keys)


def test_findings_match_by_identity_not_by_kind():
    same = _f()
    assert match_findings([same], [_f()], _runs()) == []  # unchanged: not listed
    got = match_findings([_f(severity="warning")], [_f()], _runs())
    assert [c.status for c in got] == ["graded"] and got[0].adds_error()
    got = match_findings([_f()], [_f(ranks=(1, 2))], _runs())
    assert [c.status for c in got] == ["ranks"] and not got[0].adds_error()
    got = match_findings([_f(intro="a")], [_f(intro="b")], _runs())
    assert [c.status for c in got] == ["moved"] and not got[0].adds_error()
    got = match_findings([_f(intro="old")], [_f(intro="new")], _runs(renamed=[("old", "new")]))
    assert got == []  # a renamed pass's finding is the same finding
    got = match_findings([_f(node="a")], [_f(node="b")], _runs())
    assert sorted(c.status for c in got) == ["gone", "new"] and [c.adds_error() for c in got] == [True, False]
    # ranks through the pairing: new rank 3 is base rank 1
    assert match_findings([_f(ranks=(1,))], [_f(ranks=(3,))], _runs(pairs=((0, 2), (1, 3)))) == []
    got = match_findings([_f(severity="info")], [_f(severity="info"), _f(severity="info")], _runs())
    assert [c.status for c in got] == ["new"] and not got[0].adds_error()


def test_capture_text_is_escaped(runs, tmp_path):
    import re

    from tests.tui_support import EVERY_ESCAPED, hostile_capture

    raw = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
    hostile = hostile_capture(tmp_path / ("cap" + EVERY_ESCAPED))
    for args in ([runs["clean"], hostile, "--all"], [hostile, hostile, "--pass", "#1", "--rank", "1"]):
        r = compare(*args)
        assert r.returncode in (0, 1) and not raw.findall(r.stdout + r.stderr), r.stdout + r.stderr
    assert "introduced by shard\\x1b]0;pwned-title\\x07_rows" in compare(runs["clean"], hostile).stdout


def test_report_page_of_two_runs(runs, tmp_path):
    page = tmp_path / "compare.html"
    r = run_cli("report", runs["clean"], runs["edited"], "-o", str(page))
    assert r.returncode == 0, r.stderr
    html = page.read_text()
    changed, findings, same = (html.index(h) for h in ("Passes that changed", "Findings that changed", "the same on"))
    assert changed < findings < same and "1 new error in the new run" in html
    assert html.index("shard_rows") < html.index("noop -&gt; tidy")  # changed before input-changed
    assert "shard_rows on rank 1 (pipeline 0): base vs new" in html and "~ select: args[2]: 0 -&gt; 1" in html


# -- real runs of the sample under torchrun (the suite's shared captures) -------------------------------


@pytest.mark.slow
def test_sample_against_itself_and_its_buggy_twin(sample_capture):
    clean = str(sample_capture())
    same = compare(clean, clean, "--json")
    doc = json.loads(same.stdout)
    assert same.returncode == 0 and doc["summary"]["stages"]["same"] == len(doc["stages"]) and not doc["findings"]

    bugs = str(sample_capture("device-literal", "rank-baked", "rank-divergent", "stale-symbol"))
    r = compare(clean, bugs, "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["summary"]["new_errors"] >= 1, r.stdout[-3000:]
    status = {s["base"]: s["status"] for s in doc["stages"]}
    assert status["trace"] == "changed", status  # the model reads its rank: the trace differs
    new = [f["new"] for f in doc["findings"] if f["status"] == "new" and f["new"]["severity"] == "error"]
    assert new and all(f["introduced_by"] for f in new), doc["findings"]
    # every new error's pass is a paired pass whose graph changed on a rank the finding names
    changed = {s["base"] for s in doc["stages"] if s["status"] != "same"}
    assert all(f["introduced_by"] in changed for f in new), (changed, new)


def test_a_torch_upgrade_names_the_pass_it_changed(tmp_path):
    """The FSDP2 program (tests/programs/fsdp2_compile.py --plant-rank-literal, 2 gloo ranks,
    --no-blobs) captured with torch 2.13.0 and again with torch 2.14.1: 2.14.1's
    constant_fold_uniform_value folds rank 0's `* 1` away, and it runs a pass 2.13 has not. compare
    names both, and exits 0: nothing new is wrong (the fold changes compute only)."""
    import tarfile

    from tests.capture_utils import ROOT

    with tarfile.open(ROOT / "tests/data/torch_versions/fsdp2-torch-versions.tar.xz") as tf:
        tf.extractall(tmp_path, filter="data")
    r = run_cli("compare", str(tmp_path / "fsdp2-torch213"), str(tmp_path / "fsdp2-torch214"))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert any(l.split()[:2] == ["constant_fold_uniform_value", "changed"] and "rank 0" in l for l in lines), r.stdout
    assert any("+ respecialize_current_device" in l and "added" in l for l in lines), r.stdout
