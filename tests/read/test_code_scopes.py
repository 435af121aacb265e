"""Symbols a generated wrapper uses where nothing in their scope binds them (`read.code_scopes`),
and Inductor's benchmark harness, on small hand-written wrappers (no torch run): Python's own
scoping rules (closures, comprehensions, lambdas, class bodies, `global`), the harness skipped,
and the line scan that settles correct code without a parse."""

from __future__ import annotations

import ast
import textwrap

from graphtrain_inspect.inspector.read import code_scopes
from graphtrain_inspect.inspector.read.code_scopes import unbound_symbols
from graphtrain_inspect.inspector.read.output_code import harness_spans, training_text

# the shape of torch 2.13's wrapper for a `torch.cond` whose merged output has the strides (u0, 1)
# (pytorch/pytorch#189528): each branch allocates its output with `u0`, bound in `call` only
COND = textwrap.dedent(
    """\
    import torch
    empty_strided_cpu = torch._C._dynamo.guards._empty_strided_cpu
    async_compile = AsyncCompile()

    cpp_fused_sin_0 = async_compile.cpp_pybinding(['const float*', 'float*', 'const int64_t'], r'''
    extern "C" void kernel(const float* in_ptr0, float* out_ptr0, const int64_t ks0)
    {
        auto u0 = ks0;  // C++ in a string: not Python
    }
    ''')

    def true_graph_0(args):
        true_graph_0_arg0_1, true_graph_0_arg1_1 = args
        args.clear()
        s77 = true_graph_0_arg1_1
        true_graph_0_buf1 = empty_strided_cpu((s77, 9), (u0, 1), torch.float32)
        cpp_fused_sin_0(true_graph_0_arg0_1, true_graph_0_buf1, s77, u0)
        return (true_graph_0_buf1, )


    async_compile.wait(globals())
    del async_compile

    class Runner:
        def __init__(self, partitions):
            self.partitions = partitions

        def call(self, args):
            arg0_1, arg1_1, arg2_1 = args
            args.clear()
            s77 = arg0_1
            buf1 = [None] * 1
            if arg2_1.item():
                true_graph_0_args = [arg1_1, s77]
                buf1 = true_graph_0(true_graph_0_args)
            u0 = buf1[0].size(1)
            assert_size_stride(buf1[0], (s77, u0), (u0, 1), 'torch.ops.cond')
            return (buf1[0], )

    runner = Runner(partitions=[])
    call = runner.call


    def get_args():
        from torch._dynamo.testing import rand_strided
        arg0_1 = 5
        arg1_1 = rand_strided((5, 9), (9, 1), device='cpu', dtype=torch.float32)
        return [arg0_1, arg1_1, s0]


    def benchmark_compiled_module(args, times=10, repeat=10):
        from torch._inductor.utils import print_performance
        fn = lambda: call(list(args))
        return print_performance(fn, times=times, repeat=repeat, device='cpu')


    if __name__ == "__main__":
        from torch._inductor.wrapper_benchmark import compiled_module_main
        args = get_args()
        compiled_module_main('None', lambda times, repeat: benchmark_compiled_module(args, times=times, repeat=repeat))
    """
)


def test_a_branch_function_using_a_symbol_only_the_outer_function_binds():
    (u,) = unbound_symbols(COND)
    assert (u.name, u.function) == ("u0", "true_graph_0")
    lines = COND.split("\n")
    assert [lines[i].strip().split(" = ")[0] for i in u.lines] == [
        "true_graph_0_buf1",
        "cpp_fused_sin_0(true_graph_0_arg0_1, true_graph_0_buf1, s77, u0)",
    ]
    assert lines[u.line][u.col : u.col + 2] == "u0" and u.statements == [(i, i) for i in u.lines]
    assert [(fn, lines[ln].strip()) for fn, ln in u.bound_in] == [("Runner.call", "u0 = buf1[0].size(1)")]
    # the fix: the branch keeps its own strides
    assert unbound_symbols(COND.replace("(s77, 9), (u0, 1)", "(s77, 9), (9, 1)").replace("s77, u0)", "s77)")) == []


def test_python_scoping_closures_comprehensions_lambdas_classes_and_globals():
    code = textwrap.dedent(
        """\
        from m import ps0
        zf0 = 1.0

        def outer(args):
            s0, = args
            def inner():
                return s0 + ps0 + zf0          # closure, import, module
            total = sum(s1 for s1 in range(s0))  # the comprehension binds s1
            pairs = [(s2, s3) for s2 in range(2) for s3 in range(s2)]
            f = lambda s4, *s5, s6=s0, **s7: s4 + s6 + s5 + s7
            if (s8 := total):
                pass
            for s9 in range(3):
                pass
            with open(s0) as s10:
                pass
            try:
                pass
            except Exception as s11:
                pass
            return inner, s8, s9, s10, s11, f, pairs

        class C:
            s12 = 1
            y = s12                            # a class body sees its own names
            def m(self):
                return s12                     # ...its methods do not

        def sets_global():
            global s13
            s13 = 2

        def uses_global():
            return s13 + u1 + len(u2)          # u1, u2: bound nowhere

        def comp_leak():
            [u3 for _ in range(2)]
            return [x for x in range(u4) if (u4 := 1)]

        def nonlocal_use():
            u5 = 1
            def g():
                nonlocal u5
                return u5
            return g
        """
    )
    got = [(u.function, u.name) for u in unbound_symbols(code)]
    assert got == [("C.m", "s12"), ("uses_global", "u1"), ("uses_global", "u2"), ("comp_leak", "u3")]
    # a `:=` in a comprehension binds in the function, so u4 is bound (though used before: Python's
    # own UnboundLocalError, not a name nothing binds)


def test_only_symbol_shaped_names_and_only_python():
    assert unbound_symbols("def f():\n    return print(len(x0), tmp0, ks0, i0, xnumel)\n") == []
    assert unbound_symbols("def f():\n    return zuf3\n")[0].name == "zuf3"
    # AOTInductor's C++ (not Python) and code that names no symbol are never parsed
    assert unbound_symbols('extern "C" void f() { return u0; }') == []
    assert unbound_symbols("def f(:\n") == []


def test_the_benchmark_harness_is_not_training():
    spans = harness_spans(COND)
    lines = COND.split("\n")
    assert [(lines[a].split("(")[0], lines[b].strip()[:24]) for a, b in spans] == [
        ("def get_args", "return [arg0_1, arg1_1, "),
        ("def benchmark_compiled_module", "return print_performance"),
        ('if __name__ == "__main__":', "compiled_module_main('No"),
    ]
    text = training_text(COND)
    assert len(text.split("\n")) == len(lines) and "rand_strided" not in text and "compiled_module_main" not in text
    assert text.split("\n")[: spans[0][0]] == lines[: spans[0][0]]
    # `s0` in get_args is bound nowhere, but the harness never runs in training
    assert [u.function for u in unbound_symbols(COND)] == ["true_graph_0"]
    assert harness_spans(COND.split("\n\ndef get_args")[0]) == []


def test_the_line_scan_sends_every_suspect_function_to_the_parse(monkeypatch):
    """Correct code is settled without a parse; code the parse finds something in always reaches it."""
    parsed = []
    real = ast.parse
    monkeypatch.setattr(code_scopes.ast, "parse", lambda code: parsed.append(1) or real(code))
    fixed = COND.replace("(s77, 9), (u0, 1)", "(s77, 9), (9, 1)").replace("s77, u0)", "s77)")
    assert unbound_symbols(fixed) == [] and parsed == []
    assert unbound_symbols(COND) and parsed == [1]
    # a symbol from an enclosing function is sound Python, but the scan cannot tell: parsed, not reported
    closure = "def f(args):\n    s0 = args[0]\n    def g():\n        return s0\n    return g\n"
    assert unbound_symbols(closure) == [] and parsed == [1, 1]


def test_the_line_scan_clears_only_what_the_parse_clears(monkeypatch):
    fixed = COND.replace("(s77, 9), (u0, 1)", "(s77, 9), (9, 1)").replace("s77, u0)", "s77)")
    nested = "class R:\n    def call(self, args):\n        s0, = args\n        def part(a):\n            return s0\n"
    codes = [COND, fixed, nested, "def f(args):\n    s0 = args[0]\n    return [s0 for _ in args]\n"]
    scanned = [unbound_symbols(c) for c in codes]
    monkeypatch.setattr(code_scopes, "_suspect", lambda code: True)
    assert scanned == [unbound_symbols(c) for c in codes]
