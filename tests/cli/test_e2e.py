"""End to end: real 2-rank torchrun captures (gloo) checked, listed and diffed.

* our own small program (tests/programs/inspector_planted.py) with one planted bug per check,
  captured with `--torch-trace` so the same run also gives torch's own TORCH_TRACE logs of a
  2-rank torch.compile;
* the sample training (samples/) with each bug switch, through the shared `sample_capture`
  fixture (tests/conftest.py): exactly that bug, blamed on the right pass; clean: nothing.
"""

from __future__ import annotations

import json

import pytest

from graphtrain_inspect.inspector.checks import run_checks
from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.capture_utils import run_cli, torchrun

pytestmark = pytest.mark.slow


def serious(findings):
    return [f for f in findings if f.severity in ("error", "warning")]


def kinds_and_blame(findings):
    return sorted({(f.kind, f.introduced_by) for f in serious(findings)})


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    out = tmp_path_factory.mktemp("planted") / "cap"
    r = run_cli(
        "capture",
        "--out",
        str(out),
        "--pass",
        "tests.programs.inspector_planted_passes:PASSES",
        "--no-inductor",
        "--no-blobs",
        "--torch-trace",
        "--",
        *torchrun(2, "tests.programs.inspector_planted"),
        env={"TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"},
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    return out


def test_planted_bugs_found_and_blamed(planted):
    r = run_cli("check", str(planted), "--json")
    assert r.returncode == 1, r.stderr  # error findings
    doc = json.loads(r.stdout)
    assert set(doc) == {"findings", "summary"}
    got = sorted({(f["kind"], f["introduced_by"]) for f in doc["findings"] if f["severity"] in ("error", "warning")})
    assert got == [
        ("device-baked", "pin_device"),
        ("rank-baked-constant", "bake_rank"),
        ("stale-unbacked-symbol", "concretize_root_only"),
    ]
    # rank 1 recomputes a sum rank 0 shares: a divergence in compute only (the collectives agree),
    # right in graphs each rank compiled for itself, an error where one rank's graph is shared
    [div] = [f for f in doc["findings"] if f["kind"] == "rank-divergent-graph"]
    assert (div["severity"], div["introduced_by"]) == ("info", "rank_local_fusion")
    assert div["evidence"]["collectives_agree"] and div["evidence"]["severity_if_shared"] == "error"
    for f in doc["findings"]:
        assert set(f) >= {
            "kind",
            "severity",
            "introduced_by",
            "pass",
            "ranks",
            "graph",
            "subgraph",
            "node",
            "message",
            "evidence",
        }
    stale = [f for f in doc["findings"] if f["kind"] == "stale-unbacked-symbol"]
    assert {f["subgraph"] for f in stale} == {"true_graph_0", "false_graph_0"}
    dev = next(f for f in doc["findings"] if f["kind"] == "device-baked")
    assert dev["evidence"]["values"] == {"0": "cpu:0", "1": "cpu:1"} and dev["ranks"] == [0, 1]
    assert doc["summary"]["error"] == len([f for f in doc["findings"] if f["severity"] == "error"])
    # human output: grouped by kind and pass
    r = run_cli("check", str(planted), "--color", "never", "--severity", "info")
    assert "introduced by pin_device" in r.stdout and "rank-divergent-graph" in r.stdout


def test_torch_trace_of_two_rank_compile_is_read_listed_and_diffed(planted):
    tt = planted / "torch_trace"
    cap = open_capture(str(tt))
    assert cap.kind == "torch_trace" and cap.ranks == [0, 1] and not cap.all_errors()
    kinds = {rec.kind for rec in cap.records(0)}
    assert {
        "dynamo_output_graph",
        "aot_joint_graph",
        "aot_forward_graph",
        "aot_backward_graph",
        "before_post_grad_graph",
        "inductor_post_grad_graph",
    } <= kinds
    names = [p.name for p in cap.passes(0)]
    for n in ("dynamo", "pre_grad_passes", "aot_autograd", "partition", "post_grad_passes"):
        assert n in names
    part = next(p for p in cap.passes(1) if p.name == "partition")
    assert set(part.after) == {"fw", "bw"}
    t = cap.node_table(1, part.after["fw"])
    assert t.source == "text" and not t.warnings
    assert any(r["target"] == "aten.mm.default" for r in t.root.nodes)

    r = run_cli("ls", str(tt), "--color", "never")
    assert r.returncode == 0 and "torch_trace" in r.stdout and "post_grad_passes" in r.stdout
    r = run_cli("ls", str(planted), "--source", "torch", "--color", "never")
    assert r.returncode == 0 and "partition" in r.stdout
    # rank diff of the traced graph: the rank literal of narrow(x, 0, rank, 2) is the one change
    r = run_cli("diff", str(tt), "--pass", "dynamo", "--ranks", "0,1", "--pipeline", "1/0", "--color", "never")
    assert r.returncode == 0, r.stderr
    assert "~ narrow: args[2]: 0 -> 1" in r.stdout
    # pass diff on one rank
    r = run_cli("diff", str(tt), "--pass", "partition", "--rank", "0", "--role", "bw", "--color", "never")
    assert r.returncode == 0 and "output bw" in r.stdout and "nodes:" in r.stdout
    # checks on torch's own logs
    fs = run_checks(cap)
    rb = [f for f in fs if f.kind == "rank-baked-constant"]
    assert rb and rb[0].introduced_by == "trace" and rb[0].node == "narrow"


# ---------------------------------------------------------------------------------------------
# the sample training


@pytest.mark.parametrize(
    "bug, expected",
    [
        ("rank-baked", ("rank-baked-constant", "trace")),
        ("device-literal", ("device-baked", "place_devices")),
        ("stale-symbol", ("stale-unbacked-symbol", "concretize_symbolic_shapes")),
        ("rank-divergent", ("rank-divergent-graph", "tag_activation_checkpointing")),
    ],
)
def test_sample_bug_switch_finds_exactly_that_bug(sample_capture, bug, expected):
    cap = open_capture(str(sample_capture(bug)))
    # the rank read as an int by model code is right in per-rank traces (info), wrong once shared;
    # so is a pass that recomputes other nodes per rank while the collectives agree
    shared = bug in ("rank-baked", "rank-divergent")
    fs = run_checks(cap, shared_graph=shared)
    assert kinds_and_blame(fs) == [expected], [(f.kind, f.introduced_by, f.message) for f in serious(fs)]
    if shared:
        assert serious(run_checks(cap)) == []
    assert all(f.severity == "error" for f in serious(fs))
    if bug == "stale-symbol":
        assert all((f.subgraph or "").startswith("ep_chunk_") for f in fs)
    if bug == "rank-baked":
        assert {f.node for f in fs} == {"select", "select_1"}
        assert all(f.evidence["values"] == {"0": 0, "1": 1} for f in fs)


def test_sample_clean_has_no_findings(sample_capture):
    out = sample_capture()
    fs = run_checks(open_capture(str(out)))
    assert serious(fs) == []
    r = run_cli("check", str(out))
    assert r.returncode == 0 and "no findings" in r.stdout
    r = run_cli("ls", str(out), "--color", "never")
    assert r.returncode == 0 and "place_devices" in r.stdout and "same passes and graphs as rank 0" not in r.stderr


def test_sample_compile_on_one_rank(sample_capture):
    fs = run_checks(open_capture(str(sample_capture("rank-baked", coor=True))))
    assert kinds_and_blame(fs) == [("rank-baked-constant", "trace")]
    assert {f.evidence.get("equals") for f in fs} == {"coordinate[dp]"}
