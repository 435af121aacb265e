"""One root cause, one finding: the grouping rules of checks.root_causes on findings made by hand,
each check module's evidence lines, and a bundled capture's literal with its backward copy and the
kernel lines generated from both."""

from __future__ import annotations

from graphtrain_inspect.inspector.checks import CHECKS, check_modules, check_report
from graphtrain_inspect.inspector.checks.evidence import evidence_lines
from graphtrain_inspect.inspector.checks.findings import Finding
from graphtrain_inspect.inspector.checks.root_causes import every, group
from graphtrain_inspect.inspector.read import bundled
from graphtrain_inspect.inspector.read.capture_index import open_capture

SRC = {"file": "/w/model.py", "line": 45, "code": "y = y * (rank + 1)"}
VALUES = {"0": 1, "1": 2}


def _literal(**kw) -> Finding:
    base = dict(
        kind="rank-baked-constant",
        severity="error",
        message="literal",
        introduced_by="trace",
        pass_="p",
        ranks=[0, 1],
        graph="gfwd",
        node="y_1",
        pipeline="1/0#0",
        source=dict(SRC),
        evidence={"values": dict(VALUES), "matches": [{"vector": "rank", "form": "rank + 1"}], "graph_now": "gfwd2"},
    )
    base.update(kw)
    return Finding(**base)


def test_a_literal_its_backward_copy_and_kernel_lines_are_one_finding():
    fwd = _literal()
    bwd = _literal(
        node="mul_8",
        graph="gbwd",
        pipeline="1/0#1",
        evidence={"values": dict(VALUES), "backward": True, "graph_now": "gbwd2", "nodes": {"0": "mul_8"}},
    )
    code_fwd = _literal(
        layer="codegen",
        node="mul_7",
        graph="gfwd2",
        pipeline="1/0#3",
        introduced_by="inductor_codegen",
        evidence={"values": {"0": 1.0, "1": 2.0}, "fx_node": "mul_7", "source_node": "y_1"},
    )
    code_bwd = _literal(
        layer="codegen",
        node="mul_8",
        graph="gbwd2",
        pipeline="1/0#4",
        introduced_by="inductor_codegen",
        evidence={"values": {"0": 1.0, "1": 2.0}, "fx_node": "mul_8", "source_node": "mul_8"},
    )
    other = _literal(node="z", source={**SRC, "line": 50}, evidence={"values": {"0": 3, "1": 4}})
    roots = group([fwd, bwd, code_fwd, code_bwd, other])
    assert roots == [fwd, other]
    assert fwd.consequences == [bwd, code_fwd, code_bwd] and other.consequences == []
    assert every(roots) == [fwd, bwd, code_fwd, code_bwd, other]
    doc = fwd.to_json()
    assert [c["node"] for c in doc["consequences"]] == ["mul_8", "mul_7", "mul_8"]
    assert "consequences" not in other.to_json()  # a finding without keeps its shape
    # each consequence keeps its own kind, severity, message and evidence
    assert doc["consequences"][1]["layer"] == "codegen" and doc["consequences"][1]["evidence"]["fx_node"] == "mul_7"


def test_a_kernel_line_of_a_renamed_node_follows_by_its_values_and_source_line():
    fwd = _literal()
    code = _literal(layer="codegen", node="mul_7", graph="gfwd2", evidence={"values": {"0": 1.0, "1": 2.0}})
    elsewhere = _literal(layer="codegen", node="mul_9", graph="gfwd2", evidence={"values": {"0": 1.0, "1": 2.0}},
                         source={**SRC, "line": 60})  # fmt: skip
    assert group([fwd, code, elsewhere]) == [fwd, elsewhere] and fwd.consequences == [code]


def test_a_kernel_line_of_other_values_or_another_graph_stays_a_root():
    fwd = _literal()
    elsewhere = _literal(layer="codegen", node="mul_7", graph="gother", evidence={"fx_node": "y_1"})
    other_values = _literal(layer="codegen", node="y_1", graph="gfwd2", evidence={"values": {"0": 5, "1": 6}})
    assert group([fwd, elsewhere, other_values]) == [fwd, elsewhere, other_values]


def test_a_worse_finding_is_never_a_consequence_of_a_milder_one():
    fwd = _literal(severity="info")
    code = _literal(layer="codegen", node="y_1", graph="gfwd2", severity="error", evidence={"fx_node": "y_1"})
    assert group([fwd, code]) == [fwd, code]


def test_a_collective_mismatch_takes_the_divergences_of_its_pass():
    stage = dict(introduced_by="bucketing", pipeline="0", introduced_seq=3, ranks=[0, 1])
    cm = Finding("collective-mismatch", "error", "collectives differ", node="all_reduce", **stage)
    div = Finding("rank-divergent-graph", "info", "differ structurally; see collective-mismatch", **stage)
    code = Finding("codegen-divergent", "info", "code differs", pipeline="0", ranks=[0, 1], layer="codegen")
    elsewhere = Finding("rank-divergent-graph", "info", "x", **{**stage, "introduced_seq": 9})
    assert group([cm, div, code, elsewhere]) == [cm, elsewhere]
    assert cm.consequences == [div, code]


def test_a_pass_divergence_takes_later_traced_graphs_and_unexplained_literals_of_its_stage():
    stage = dict(introduced_by="reorder", pipeline="2/0#0", introduced_seq=5, ranks=[0, 1])
    root = Finding("rank-divergent-graph", "error", "pass reorder: rank 1 differs", **stage)
    later = Finding("rank-divergent-graph", "warning", "traced graphs differ", introduced_by="trace",
                    pipeline="2/0#1", ranks=[0, 1])  # fmt: skip
    moved = Finding("rank-baked-constant", "warning", "no rank value", evidence={"values": {"0": 1, "1": 3}}, **stage)
    rank_literal = Finding(
        "rank-baked-constant", "warning", "equals rank", evidence={"matches": [{"vector": "r"}]}, **stage
    )
    other_compile = Finding(
        "rank-divergent-graph", "warning", "x", introduced_by="trace", pipeline="3/0#1", ranks=[0, 1]
    )
    roots = group([root, later, moved, rank_literal, other_compile])
    assert roots == [root, rank_literal, other_compile]
    assert root.consequences == [later, moved]


def test_every_check_renders_its_own_evidence():
    modules = check_modules()
    for name in CHECKS:
        assert callable(getattr(modules[name], "evidence_lines", None)), name
    f = _literal(evidence={"values": {"0": 1, "1": 2}, "matches": [{"vector": "rank", "form": "rank + 1"}]})
    assert evidence_lines(f) == ["r0=1, r1=2  = rank + 1"]
    code = _literal(layer="codegen", evidence={"literals": {"0": "1.0", "1": "2.0"}, "line": 3, "code": "x = 1.0"})
    assert evidence_lines(code) == ["r0=1.0, r1=2.0  |  line 3: x = 1.0"]
    assert evidence_lines(Finding("recompile", "info", "m")) == []


def test_a_bundled_literal_is_one_finding_with_its_copies():
    cap = open_capture(str(bundled.path_of("h200x2-fsdp2-compile-rank-literal")))
    with cap:
        rep = check_report(cap, shared_graph=True)
    roots = [f for f in rep.findings if f.kind == "rank-baked-constant"]
    assert len(roots) == 1
    (root,) = roots
    assert root.node == "y_1" and root.layer == "graph"
    assert [(c.layer, c.node) for c in root.consequences] == [
        ("graph", "mul_8"),
        ("codegen", "mul_7"),
        ("codegen", "mul_8"),
    ]
    summary = rep.summary()
    assert summary["by_kind"]["rank-baked-constant"] == 1
    # each compile names its own device in every kernel: one root a compile, its kernels under it
    devices = [f for f in rep.findings if f.kind == "device-baked" and f.layer == "codegen"]
    assert [(f.pipeline, len(f.consequences)) for f in devices] == [("1/0#3", 3), ("1/1#3", 3)]
    assert summary["consequences"] == 3 + 6
