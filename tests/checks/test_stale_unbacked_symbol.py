"""stale-unbacked-symbol (inspector/checks/stale_unbacked_symbol.py) on hand-built FX graphs written as
a capture: symbols no node in scope binds, in the root and nested subgraphs.
"""

from __future__ import annotations

import torch
import torch.distributed  # registers the functional collectives
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from graphtrain_inspect.inspector.checks import run_checks
from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.small_captures import CaptureWriter, identity_pass, kinds

# ---------------------------------------------------------------------------------------------
# stale-unbacked-symbol


def _cond_program(static: bool):
    def f(x, y):
        nz = torch.ops.aten.nonzero_static.default(x, size=3) if static else torch.nonzero(x)

        def t(a, b):
            return a.sum() + b.float().sum()

        def e(a, b):
            return a.sum() - 1

        return torch.cond(x.sum() > 0, t, e, (y, nz))

    return f


def traced_cond():
    torch._dynamo.reset()  # torch.cond compiles its branches; stale guards break a second trace
    fm = FakeTensorMode(shape_env=ShapeEnv())
    with fm:
        x = fm.from_tensor(torch.tensor([1, 0, 2]))
        y = fm.from_tensor(torch.randn(4))
        return make_fx(_cond_program(False))(x, y)


def concretize_root_only(gm):
    """The buggy concretization pass: rewrites the root (nonzero -> nonzero_static, concrete
    shapes) but leaves the cond branches, whose placeholders still carry u0."""
    torch._dynamo.reset()
    fm = FakeTensorMode(shape_env=ShapeEnv())
    with fm:
        x = fm.from_tensor(torch.tensor([1, 0, 2]))
        y = fm.from_tensor(torch.randn(4))
        new = make_fx(_cond_program(True))(x, y)
    for name in ("true_graph_0", "false_graph_0"):
        setattr(new, name, getattr(gm, name))
    new.recompile()
    return new


def test_stale_symbol_only_in_nested_subgraph_placeholder(tmp_path):
    w = CaptureWriter(tmp_path, world_size=1)
    rw = w.rank(0)
    gm = traced_cond()
    rw.apply("concretize", gm, concretize_root_only(gm))
    rw.end()
    fs = [f for f in run_checks(open_capture(w.finish())) if f.kind == "stale-unbacked-symbol"]
    assert fs, "u0 in the branches' placeholders is bound by nothing once the root no longer has it"
    assert {f.subgraph for f in fs} == {"true_graph_0", "false_graph_0"}
    for f in fs:
        assert f.severity == "error" and f.introduced_by == "concretize"
        assert f.evidence["symbol"] == "u0" and f.evidence["in_placeholder"] is True
        assert f.evidence["bindings"].startswith("captured")


def test_lifted_symbols_are_not_stale(tmp_path):
    w = CaptureWriter(tmp_path, world_size=1)
    rw = w.rank(0)
    gm = traced_cond()
    # the branches take u0 as a Sym(u0) placeholder and a tensor of shape (u0, 1): lifted, bound
    code = gm.print_readable(print_output=False)
    assert "Sym(u0)" in code
    rw.apply("noop", gm, identity_pass(gm))
    rw.end()
    assert kinds(run_checks(open_capture(w.finish()))) == []


def test_copied_meta_without_bindings_is_stale(tmp_path):
    """nonzero swapped for nonzero_static with the old meta copied: u0 now bound by nothing."""
    gm = traced_cond()
    after = traced_cond()
    for n in after.graph.nodes:
        if n.target is torch.ops.aten.nonzero.default:
            n.target = torch.ops.aten.nonzero_static.default
            n.kwargs = {"size": 3}
            n.meta.pop("unbacked_bindings", None)
    after.recompile()
    w = CaptureWriter(tmp_path, world_size=1)
    rw = w.rank(0)
    rw.apply("static_nonzero", gm, after)
    rw.end()
    fs = [f for f in run_checks(open_capture(w.finish())) if f.kind == "stale-unbacked-symbol"]
    root = [f for f in fs if f.subgraph is None]
    assert root and root[0].node == "nonzero" and root[0].introduced_by == "static_nonzero"


def test_stale_symbol_from_text_only_is_a_warning():
    from graphtrain_inspect.inspector.checks.stale_unbacked_symbol import stale_symbols
    from graphtrain_inspect.inspector.read.fxtext import parse_graph_code
    from graphtrain_inspect.inspector.read.graphmodel import GraphTables

    code = concretize_root_only(traced_cond()).print_readable(print_output=False)
    parsed, _ = parse_graph_code(code)
    obs = stale_symbols(GraphTables.from_payload("g", parsed, source="text"), None)
    assert {o.subgraph for o in obs} == {"true_graph_0", "false_graph_0"}
    assert all(o.severity == "warning" for o in obs)
    lifted, _ = parse_graph_code(traced_cond().print_readable(print_output=False))
    assert stale_symbols(GraphTables.from_payload("g", lifted, source="text"), None) == []
