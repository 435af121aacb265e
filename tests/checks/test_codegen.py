"""Codegen checks (`"layer": "codegen"`) on small hand-made TORCH_TRACE logs of two ranks."""

from __future__ import annotations

from graphtrain_inspect.inspector.checks import run_checks
from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.read.output_code_logs import post_grad, torch_log, wrapper

PROV = {"cppCodeToPost": {"cpp_fused_add_mul_relu_0:1": ["relu", "mul"]}}


def _codegen(findings):
    return [f for f in findings if f.layer == "codegen"]


def test_rank_baked_literal_in_kernel_is_an_error_in_shared_code_blamed_on_the_fx_node(tmp_path):
    for r in (0, 1):
        torch_log(
            tmp_path, r, [{"graph": post_grad(str(r + 3)), "code": wrapper(f"{r + 3}.0", n=r), "provenance": PROV}]
        )
    # each rank compiled its own code: right for itself (info), an error once the code is shared
    per_rank = _codegen(run_checks(open_capture(str(tmp_path))))
    assert [(f.kind, f.severity, f.evidence["shared"]) for f in per_rank] == [("rank-baked-constant", "info", False)]
    assert "--shared-graph" in per_rank[0].message
    fs = run_checks(open_capture(str(tmp_path)), shared_graph=True)
    cg = _codegen(fs)
    assert [(f.kind, f.severity) for f in cg] == [("rank-baked-constant", "error")]
    f = cg[0]
    assert f.ranks == [0, 1] and f.introduced_by == "inductor_codegen"
    assert f.evidence["kernel"] == "cpp_fused_add_mul_relu_0"
    assert f.evidence["literals"] == {"0": "3.0", "1": "4.0"}
    assert f.evidence["matches"][0]["form"] == "rank + 3"
    assert f.node == "mul"  # the kernel computes relu and mul; only mul's row differs across ranks
    assert f.to_json()["layer"] == "codegen"
    # the FX finding is still there, in the graph layer
    assert any(x.kind == "rank-baked-constant" and x.layer == "graph" for x in fs)


def test_correct_per_rank_compile_has_no_codegen_finding(tmp_path):
    for r in (0, 1):
        torch_log(tmp_path, r, [{"graph": post_grad("3"), "code": wrapper("3.0", n=r), "provenance": PROV}])
    assert _codegen(run_checks(open_capture(str(tmp_path)))) == []


def test_per_rank_gpu_code_on_each_ranks_own_device_is_fine_and_a_foreign_index_is_not(tmp_path):
    ok, bad = tmp_path / "ok", tmp_path / "bad"
    for r in (0, 1):
        dev = f"[4, 1]cuda:{r}"
        torch_log(ok, r, [{"graph": post_grad("3", dev), "code": wrapper(cuda_dev=r, n=r)}])
        torch_log(bad, r, [{"graph": post_grad("3", dev), "code": wrapper(cuda_dev=0, n=r)}])
    assert _codegen(run_checks(open_capture(str(ok)))) == []
    cg = _codegen(run_checks(open_capture(str(bad))))
    assert [(f.kind, f.severity, f.ranks, f.evidence["index"]) for f in cg] == [("device-baked", "error", [1], 0)]


def test_code_compiled_on_one_rank_pins_a_device_every_rank_loads(tmp_path):
    torch_log(tmp_path, 0, [{"graph": post_grad("3", "[4, 1]cuda:0"), "code": wrapper(cuda_dev=0)}])
    # rank 1 compiled nothing: it loads rank 0's code
    (tmp_path / "dedicated_log_torch_trace_rank_1_abc.log").write_text(
        'V1124 03:04:38.336000 4243 torch/x.py:1] {"artifact": {"name": "torch_version", "encoding": '
        '"string"}, "rank": 1, "has_payload": "%s"}\n\t2.13\n' % __import__("hashlib").md5(b"2.13").hexdigest()
    )
    cg = _codegen(run_checks(open_capture(str(tmp_path))))
    assert len(cg) == 1 and cg[0].kind == "device-baked" and cg[0].severity == "error"
    assert cg[0].evidence["index"] == 0 and cg[0].evidence["shared"] is True and cg[0].evidence["loaded_by"] == [1]
    assert cg[0].ranks == [0, 1]


def test_generated_code_that_differs_in_shape_although_the_fx_graphs_agree(tmp_path):
    torch_log(tmp_path, 0, [{"graph": post_grad("3"), "code": wrapper("3.0")}])
    torch_log(tmp_path, 1, [{"graph": post_grad("3"), "code": wrapper("3.0", extra_kernel=True)}])
    cg = _codegen(run_checks(open_capture(str(tmp_path))))
    # the code calls no collective on either rank: a difference in how each rank computes, right in
    # code each rank generated for itself, an error where one rank's code is loaded by the others
    assert [(f.kind, f.severity, f.evidence["differing_ranks"]) for f in cg] == [("codegen-divergent", "info", [1])]
    assert cg[0].evidence["collectives_agree"] and cg[0].evidence["severity_if_shared"] == "error"
    cg = _codegen(run_checks(open_capture(str(tmp_path)), shared_graph=True))
    assert [(f.kind, f.severity) for f in cg] == [("codegen-divergent", "error")]
    # when the FX graphs differ too, the FX checks own it: no codegen-divergent finding
    other = tmp_path / "fxdiffers"
    torch_log(other, 0, [{"graph": post_grad("3"), "code": wrapper("3.0")}])
    torch_log(
        other,
        1,
        [
            {
                "graph": post_grad("3").replace("relu.default", "sigmoid.default"),
                "code": wrapper("3.0", extra_kernel=True),
            }
        ],
    )
    assert not [f for f in _codegen(run_checks(open_capture(str(other)))) if f.kind == "codegen-divergent"]


def test_fx_annotations_copied_into_kernel_comments_are_not_baked_literals(tmp_path):
    """Inductor copies the FX graph into each Triton kernel's comments (`%primals_1 : Tensor
    "f32[4][1]cuda:0"`, the FX args of each op): on a correct per-rank GPU compile they hold each
    rank's own device and the FX graph's own literals. Seen on 2 H200s with FSDP2 + torch.compile as
    123 false errors before comments were skipped and `cuda:<own>` normalized there too."""
    for r in (0, 1):
        comments = (
            f'#   %primals_1 : Tensor "f32[4][1]cuda:{r}" = PlaceHolder[target=primals_1]\n'
            f"#   %mul : call_function[target=torch.ops.aten.mul.Tensor](args = (%x, {r + 1}))\n"
        )
        code = wrapper(cuda_dev=r, n=r).replace("\n", "\n" + comments, 1)
        torch_log(tmp_path, r, [{"graph": post_grad("3", f"[4, 1]cuda:{r}"), "code": code}])
    assert _codegen(run_checks(open_capture(str(tmp_path)))) == []


def test_finding_kinds_are_what_the_checks_report():
    # the TUI's kind filter lists FINDING_KINDS: a check named codegen-rank-baked reports
    # rank-baked-constant findings, so a filter on its name would show nothing
    from graphtrain_inspect.inspector.checks import CHECKS, FINDING_KINDS, KIND_OF_CHECK, check_modules

    kinds = {name: module.KIND for name, module in check_modules().items()}
    assert kinds == {name: KIND_OF_CHECK.get(name, name) for name in CHECKS}
    assert list(FINDING_KINDS) == list(dict.fromkeys(kinds.values()))
    assert "codegen-rank-baked" not in FINDING_KINDS and "rank-baked-constant" in FINDING_KINDS


HARNESS = """

def get_args():
    from torch._dynamo.testing import rand_strided
    arg0_1 = {n}
    arg1_1 = rand_strided(({n}, 4), (4, 1), device='cuda:0', dtype=torch.float32)
    return [arg0_1, arg1_1]


def benchmark_compiled_module(args, times=10, repeat=10):
    from torch._inductor.utils import print_performance
    fn = lambda: call(list(args))
    return print_performance(fn, times=times, repeat=repeat, device='cpu')


if __name__ == "__main__":
    from torch._inductor.wrapper_benchmark import compiled_module_main
    args = get_args()
    compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
"""


def test_the_benchmark_harness_is_not_checked(tmp_path):
    """Inductor's benchmark harness holds each rank's own size hints (a dynamic compile on ranks of
    uneven batches: `arg0_1 = 11` on rank 0, `13` on rank 1) and example inputs on a device: it runs
    only when the wrapper is run as a script. Seen as 3 false warnings on a correct dynamic-shape
    recompile on 2 ranks (tests/programs/dynamic_recompile.py)."""
    for r in (0, 1):
        code = wrapper("3.0", n=r) + HARNESS.format(n=11 + 2 * r)
        torch_log(tmp_path, r, [{"graph": post_grad("3"), "code": code, "provenance": PROV}])
    assert _codegen(run_checks(open_capture(str(tmp_path)))) == []
    assert _codegen(run_checks(open_capture(str(tmp_path)), shared_graph=True)) == []


def test_a_symbol_a_generated_function_uses_and_nothing_in_its_scope_binds(tmp_path):
    """pytorch/pytorch#189528's code (tests/read/test_code_scopes.py): the cond branch's function
    allocates its output with `u0`, which only the outer `call` binds. The same code on both ranks
    is one error naming both."""
    from tests.read.test_code_scopes import COND

    for r in (0, 1):
        torch_log(tmp_path, r, [{"graph": post_grad("3"), "code": COND}])
    (f,) = _codegen(run_checks(open_capture(str(tmp_path))))
    assert (f.kind, f.severity, f.layer, f.ranks, f.introduced_by) == (
        "stale-unbacked-symbol",
        "error",
        "codegen",
        [0, 1],
        "inductor_codegen",
    )
    ev = f.evidence
    assert (ev["symbol"], ev["function"], ev["kernel"], ev["line"]) == ("u0", "true_graph_0", "cpp_fused_sin_0", 16)
    assert ev["code"] == "true_graph_0_buf1 = empty_strided_cpu((s77, 9), (u0, 1), torch.float32)"
    assert ev["bound_in"] == [{"function": "Runner.call", "line": 36}] and ev["uses"] == 2
    assert "NameError" in f.message and "true_graph_0" in f.message
    # only the codegen check reads code: --check stale-unbacked-symbol (the FX graphs) does not
    assert not _codegen(run_checks(open_capture(str(tmp_path)), only=["stale-unbacked-symbol"]))
    assert _codegen(run_checks(open_capture(str(tmp_path)), only=["codegen-stale-symbol"]))


def test_generated_code_whose_collectives_differ_would_hang(tmp_path):
    """The FX graphs agree, but rank 1's code leaves out the all_reduce rank 0's calls: an error
    in per-rank code too (the ranks would hang), whatever the grading."""
    for r in (0, 1):
        code = wrapper(cuda_dev=r, n=r)
        if r == 1:
            code = "\n".join(l for l in code.split("\n") if "all_reduce_" not in l)
        torch_log(tmp_path, r, [{"graph": post_grad("3"), "code": code}])
    cg = [f for f in _codegen(run_checks(open_capture(str(tmp_path)))) if f.kind == "codegen-divergent"]
    assert [(f.severity, f.evidence["collectives_agree"]) for f in cg] == [("error", False)]
    assert "the collectives it calls differ, the ranks would hang" in cg[0].message
