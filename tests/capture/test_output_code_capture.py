"""Capturing Inductor's generated code on 2 gloo ranks (slow: one real torchrun for the module)."""

from __future__ import annotations

import json
import subprocess

import pytest

from graphtrain_inspect.capture.shared import logformat
from tests.capture_utils import every_finding, payloads, run_cli, tlparse_exe, torchrun

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    out = tmp_path_factory.mktemp("codegen") / "cap"
    r = run_cli(
        "capture",
        "--out",
        str(out),
        "--torch-trace",
        "--",
        *torchrun(2, "tests.programs.rank_literal_compile"),
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    return out


def test_both_ranks_hold_the_generated_code_linked_to_its_graph_and_compile(captured):
    for rank in (0, 1):
        log = captured / logformat.log_file_name(rank)
        codes = payloads(log, logformat.OUTPUT_CODE)
        links = payloads(log, logformat.CODEGEN)
        assert any(f"static_cast<float>({rank + 3}.0)" in c for c in codes)
        assert len(links) >= 3  # baked, agnostic forward and backward
        assert all(l["compile_id"] and l["graph"] for l in links)
        graphs = {p["gid"] for p in payloads(log, logformat.NODES)}
        assert all(l["graph"] in graphs for l in links)  # linked to a captured post-grad graph
        baked = next(l for l in links if any("mul" in ns for ns in l["kernels"].values()) and l["compile_id"] == "0/0")
        assert any(k.startswith("cpp_fused") for k in baked["kernels"])


def test_the_capture_records_exactly_the_code_torch_logs(captured):
    """torch's own TORCH_TRACE logs of the same run (--torch-trace) hold the same code, and the
    reader gives the same compiles from either source."""
    from graphtrain_inspect.inspector.read.capture_index import open_capture
    from graphtrain_inspect.inspector.read.output_code import code_text, output_codes

    with open_capture(str(captured)) as ours, open_capture(str(captured), source="torch") as theirs:
        assert theirs.kind == "torch_trace"
        for rank in (0, 1):
            a = [(oc.compile_id, code_text(ours, oc)) for oc in output_codes(ours, rank)]
            b = [(oc.compile_id, code_text(theirs, oc)) for oc in output_codes(theirs, rank)]
            assert len(a) >= 3 and a == b


def test_check_has_the_fx_finding_and_the_codegen_finding(captured):
    # each rank traced and compiled its own graph: the literal is right per rank (info), and wrong
    # where one rank's graph is loaded by all (--shared-graph: errors)
    for opts, severity in (([], "info"), (["--shared-graph"], "error")):
        r = run_cli("check", str(captured), "--json", *opts)
        doc = json.loads(r.stdout)
        doc["findings"] = every_finding(doc)  # the kernel line is the FX literal's consequence
        baked = [f for f in doc["findings"] if f["kind"] == "rank-baked-constant"]
        assert {f["layer"] for f in baked} == {"graph", "codegen"} and {f["severity"] for f in baked} == {severity}, (
            baked
        )
        cg = [f for f in doc["findings"] if f["layer"] == "codegen"]
        assert len(cg) == 1, cg  # the rank-agnostic compile gives no codegen finding
        ev = cg[0]["evidence"]
        assert cg[0]["node"] == "mul" and ev["kernel"].startswith("cpp_fused")
        assert (
            ev["literals"] == {"0": "3.0", "1": "4.0"}
            and ev["fx_stack"]
            and "rank_literal_compile.py" in ev["fx_stack"]
        )
        assert (
            cg[0]["source"]["file"].endswith("rank_literal_compile.py") and "get_rank() + 3" in cg[0]["source"]["code"]
        )


def test_diff_of_generated_code_across_ranks_shows_only_the_literal(captured):
    r = run_cli("diff", str(captured), "--output-code", "--ranks", "0,1", "--json")
    assert r.returncode == 0, r.stderr
    diffs = json.loads(r.stdout)["diffs"]
    assert len(diffs) >= 3
    changed = [l for d in diffs for l in d["diff"] if l[:1] in "+-" and not l.startswith(("+++", "---"))]
    assert [l[0] + l[1:].strip() for l in changed] == [
        "-auto tmp4 = static_cast<float>(3.0);",
        "+auto tmp4 = static_cast<float>(4.0);",
    ]
    assert sum(1 for d in diffs if d["empty"]) == len(diffs) - 1


def test_ls_lists_generated_code_as_the_last_stage(captured):
    r = run_cli("ls", str(captured), "--all")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("inductor codegen") >= 6  # three compiles' code on two ranks
    assert "generated code, 1 kernel" in r.stdout


def test_tlparse_strict_accepts_the_logs(captured, tmp_path):
    tl = tlparse_exe()
    for rank in (0, 1):
        log = captured / logformat.log_file_name(rank)
        p = subprocess.run(
            [tl, str(log), "-o", str(tmp_path / f"tl{rank}"), "--strict", "--strict-compile-id", "--no-browser"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert p.returncode == 0, p.stderr[-2000:]
        assert "Unknown fields" not in p.stdout + p.stderr


def test_code_compiled_on_one_rank_is_recorded_there_and_clean_on_cpu(tmp_path):
    """samples/codegen_one_rank on CPU: rank 0 compiles, both ranks run its code (right on CPU:
    C++ code pins no device); the code is recorded on rank 0 only and checks report nothing in it."""
    out = tmp_path / "cap"
    r = run_cli(
        "capture", "--out", str(out), "--", *torchrun(2, "graphtrain_inspect.samples.codegen_one_rank"), timeout=600
    )
    assert r.returncode == 0, r.stderr[-4000:]
    assert "0 of 2 ranks failed" in r.stdout
    assert payloads(out / logformat.log_file_name(0), logformat.OUTPUT_CODE)
    assert not (out / logformat.log_file_name(1)).exists() or not payloads(
        out / logformat.log_file_name(1), logformat.OUTPUT_CODE
    )
    doc = json.loads(run_cli("check", str(out), "--json").stdout)
    assert [f for f in doc["findings"] if f["layer"] == "codegen"] == []
