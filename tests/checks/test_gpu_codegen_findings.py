"""Generated-code findings on the bundled GPU capture of torch's FSDP2 + torch.compile with a planted
`y * (dist.get_rank() + 1)` (2 H200s, torch 2.11, Triton): each names its Triton kernel, the FX
node the kernel computes, the source node Inductor's comments map it from, and the model line;
the evidence line is cut to the width with the literal in view. The backward's literal is an error
where it lives, the backward graph (it was "gone after min_cut_rematerialization_partition")."""

from __future__ import annotations

import json

from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.output_code import code_text, kernel_source_nodes, kernels_of, output_codes
from tests.capture_utils import run_cli

NAME = "h200x2-fsdp2-compile-rank-literal"


def test_triton_kernel_spans_its_source_string_and_maps_its_nodes(bundled_capture):
    cap = open_capture(str(bundled_capture(NAME)))
    text = code_text(cap, output_codes(cap, 0)[0])
    lines = text.split("\n")
    ks = kernels_of(text)
    assert ks and all(k.kind == "triton" for k in ks)
    for k in ks:
        # the decorator's bare `)` line is inside; the string's closing line ends the kernel
        assert lines[k.last].startswith("''', device_str=") and any(
            l.startswith("def " + k.name) for l in lines[k.first : k.last]
        )
        assert lines[k.header].startswith("# kernel path:")
    k = next(k for k in ks if k.name == "triton_poi_fused_add_addmm_mul_view_3")
    assert k.first <= 311 <= k.last and "tl.full([1], 1.0" in lines[311]
    assert kernel_source_nodes(lines, k)["mul_7"] == "y_1"


def test_each_generated_code_finding_names_kernel_fx_node_and_source_line(bundled_capture):
    # each rank compiled for itself: the literals are info (right per rank); as a shared graph, errors
    per_rank = run_cli("check", str(bundled_capture(NAME)), "--json", "-j", "1")
    assert per_rank.returncode == 0, per_rank.stderr
    fs = json.loads(per_rank.stdout)["findings"]
    assert {(f["kind"], f["severity"]) for f in fs if f["introduced_by"] != "dynamo"} == {
        ("rank-baked-constant", "info")
    }
    # torch's own compile events (recorded with --torch-trace: FSDP2's hook wrapper, a recompile) are info
    assert all(f["severity"] == "info" for f in fs)
    r = run_cli("check", str(bundled_capture(NAME)), "--json", "-j", "1", "--shared-graph")
    assert r.returncode == 1, r.stderr
    roots = [f for f in json.loads(r.stdout)["findings"] if f["kind"] == "rank-baked-constant"]
    # one root cause: the forward literal, its backward copy and the kernel lines its consequences
    assert [f["node"] for f in roots] == ["y_1"]
    fs = [*roots, *roots[0]["consequences"]]
    gen = [f for f in fs if f["layer"] == "codegen"]
    assert len(gen) == 2
    for f in gen:
        ev = f["evidence"]
        assert ev["kernel"].startswith("triton_") and f"kernel {ev['kernel']}" in f["message"]
        assert f["node"] == ev["fx_node"] and f["node"] in ev["fx_nodes"]
        assert (
            f["source"]["file"].endswith("tests/programs/fsdp2_compile.py")
            and "dist.get_rank() + 1" in f["source"]["code"]
        )
        assert "1.0" in ev["code"] and len(ev["code"]) <= 100 and ev["column"] >= 1
    assert {(f["node"], f["evidence"]["line"]) for f in gen} == {("mul_7", 312), ("mul_8", 84)}
    # the forward kernel's comments map mul_7 to Dynamo's y_1 (the backward's nodes map to themselves)
    fwd = next(f for f in gen if f["node"] == "mul_7")
    assert (
        fwd["evidence"]["source_node"] == "y_1" and "computed from FX node mul_7 (y_1 in the model)" in fwd["message"]
    )
    # the backward's literal, in the backward graph: an error there, not "gone"
    graph = [f for f in fs if f["layer"] == "graph"]
    assert [(f["node"], f["severity"]) for f in graph] == [("y_1", "error"), ("mul_8", "error")]
    bwd = graph[1]
    assert bwd["evidence"]["lives_in"] == "backward" and "gone after" not in bwd["message"]
    table = run_cli(
        "check", str(bundled_capture(NAME)), "-j", "1", "--width", "200", "--severity", "info", "--all"
    ).stdout
    assert (
        "kernel triton_poi_fused_add_addmm_mul_view_3" in table
        and "line 312: tmp6 = tl.full([1], 1.0, tl.float32)" in table
    )
    # the literal (its 3 copies under it), and torch's own compile events (FSDP2's hook wrapper's
    # failure and break, a recompile)
    assert "4 findings: 0 errors, 0 warnings, 4 info (3 consequences under them)" in table


def test_evidence_of_a_long_line_is_cut_around_the_literal():
    from graphtrain_inspect.inspector.checks.codegen_sites import clip_code

    line = (
        "    triton_meta={'signature': {"
        + "'in_ptr0': '*fp32', " * 20
        + "}, 'device': DeviceProperties(type='cuda', index=1, cc=90)}, "
        + "'constants': {}, " * 10
    )
    at = line.index("index=1")
    cut = clip_code(line, at, at + len("index=1"), 100)
    assert len(cut) == 100 and "index=1" in cut and cut.startswith("…") and cut.endswith("…")
    assert clip_code("    x = 1.0", 8, 11) == "x = 1.0"


def test_what_was_not_checked_is_said(bundled_capture):
    # captured with --no-inductor: no generated code; compile on one rank: code of rank 0 only
    doc = json.loads(run_cli("check", str(bundled_capture("h200x2-clean")), "--json", "-j", "1").stdout)
    reasons = {n["check"]: n["reason"] for n in doc["summary"]["not_run"]}
    assert {"codegen-rank-baked", "codegen-device-baked", "codegen-divergent"} <= set(reasons)
    assert "--no-inductor" in reasons["codegen-rank-baked"]
    doc = json.loads(run_cli("check", str(bundled_capture("h200x2-codegen-coor")), "--json", "-j", "1").stdout)
    reasons = {n["check"]: n["reason"] for n in doc["summary"]["not_run"]}
    assert "rank 0 only" in reasons["codegen-divergent"] and "codegen-device-baked" not in reasons
    assert any("left no log" in n for n in doc["summary"]["notes"])
