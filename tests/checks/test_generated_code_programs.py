"""The codegen checks on real captures (slow: Inductor compiles), one capture per program:

* tests/programs/cond_branch_strides.py models pytorch/pytorch#189528 (Inductor's lowering of
  `torch.cond` forces the branches' output strides to the merged `(u0, 1)`, and `u0` is bound only
  in the outer function): plain `check` reports each branch's use of `u0` as an error in the
  generated code, with its line, function, kernel and FX node; the run raises NameError at the
  branch's first call, after the code was saved. Its fixed twin (`--fixed`, the upstream fix:
  each branch keeps its own strides) gets no error or warning. One process each: the class does
  not depend on the rank.
* tests/programs/dynamic_recompile.py: a correct dynamic-shape recompile on 2 gloo ranks of uneven
  batches; Inductor's benchmark harness in its code holds each rank's own size hints, and no
  codegen check reads it.
"""

from __future__ import annotations

import json

import pytest

from tests.capture_utils import capture, run_cli, torchrun


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    import sys

    root = tmp_path_factory.mktemp("generated_code")
    runs = {
        "cond": [sys.executable, "-m", "tests.programs.cond_branch_strides"],
        "cond_fixed": [sys.executable, "-m", "tests.programs.cond_branch_strides", "--fixed"],
        "dynamic": torchrun(2, "tests.programs.dynamic_recompile"),
    }
    out = {}
    for name, program in runs.items():
        r = capture(root / name, program, timeout=600)
        out[name] = (root / name, r)
    return out


def _check(path) -> tuple[int, list[dict]]:
    r = run_cli("check", str(path), "--json")
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)["findings"]


@pytest.mark.slow
def test_cond_branches_using_u0_are_errors_in_the_generated_code(captures):
    path, run = captures["cond"]
    assert "NameError: name 'u0' is not defined" in run.stdout + run.stderr  # the training failed
    rc, findings = _check(path)
    # first the failure itself (its traceback ends in the generated branch function), then the cause
    assert findings[0]["kind"] == "training-failed" and "NameError" in findings[0]["message"]
    code = sorted(
        (
            f
            for f in findings
            if f["layer"] == "codegen" and f["severity"] in ("error", "warning") and f["kind"] != "training-failed"
        ),
        key=lambda f: f["evidence"]["function"],
    )
    assert rc == 1
    assert [(f["kind"], f["severity"], f["evidence"]["function"], f["subgraph"]) for f in code] == [
        ("stale-unbacked-symbol", "error", "false_graph_0", "false_graph_0"),
        ("stale-unbacked-symbol", "error", "true_graph_0", "true_graph_0"),
    ]
    narrow, wide = code
    for f, kernel, node, line in ((narrow, "mul", "mul", "return x * 2"), (wide, "sin", "sin", "return y.sin()")):
        ev = f["evidence"]
        assert ev["symbol"] == "u0" and ev["hop_node"] == "cond" and f["introduced_by"] == "inductor_codegen"
        assert ev["kernel"].startswith(f"cpp_fused_{kernel}_") and f["node"].startswith(node)
        assert "(u0, 1)" in ev["code"] and ev["code"].startswith(f"{f['subgraph']}_buf")
        assert [b["function"] for b in ev["bound_in"]] == ["Runner.call"]
        assert f["source"]["file"].endswith("tests/programs/cond_branch_strides.py") and f["source"]["code"] == line
        assert "NameError" in f["message"] and f"line {ev['line']}" in f["message"]
    # the FX graphs are right: the symbol is bound where the graphs use it
    assert not [f for f in findings if f["kind"] == "stale-unbacked-symbol" and f["layer"] == "graph"]
    text = run_cli("check", str(path)).stdout
    assert "unbacked symbol u0 in generated function true_graph_0" in text and "[generated code]" in text


@pytest.mark.slow
def test_the_fixed_cond_has_no_error_or_warning(captures):
    path, run = captures["cond_fixed"]
    assert run.returncode == 0, run.stderr[-4000:]
    rc, findings = _check(path)
    assert rc == 0 and [f for f in findings if f["severity"] != "info"] == []


@pytest.mark.slow
def test_the_benchmark_harness_of_a_dynamic_recompile_is_not_checked(captures):
    path, run = captures["dynamic"]
    assert run.returncode == 0, run.stderr[-4000:]
    _, findings = _check(path)
    # the harness's size hints (`arg0_1 = 11` on rank 0, `13` on rank 1) were 3 warnings
    assert not [f for f in findings if f["layer"] == "codegen" and f["kind"] == "rank-baked-constant"]
    harness = ("get_args", "rand_strided", "benchmark_compiled_module", "compiled_module_main")
    assert not [f for f in findings if any(h in json.dumps(f["evidence"]) for h in harness)]
