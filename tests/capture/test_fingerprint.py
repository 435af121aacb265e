"""The fingerprint that tells an unchanged graph from a changed one (graph_tables.Fingerprint)."""

import torch
import torch.fx

from graphtrain_inspect.capture import graph_tables


class _WithSub(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x) + 1


class _KeepGraphModules(torch.fx.Tracer):
    def is_leaf_module(self, m, qualname):
        return isinstance(m, torch.fx.GraphModule) or super().is_leaf_module(m, qualname)


def _traced(root: torch.nn.Module) -> torch.fx.GraphModule:
    return torch.fx.GraphModule(root, _KeepGraphModules().trace(root))


def _nested() -> torch.fx.GraphModule:
    """A graph calling a graph calling a graph (call_module of a GraphModule): paths "", "inner",
    "inner/inner", the last made anew by every walk."""
    return _traced(_WithSub(_traced(_WithSub(torch.fx.symbolic_trace(torch.nn.ReLU())))))


def _fp(gm):
    return graph_tables.TableCache().fingerprint_of(gm)


def test_the_same_graph_walked_twice_is_the_same_also_with_a_nested_graph():
    gm = _nested()
    walked = list(graph_tables.iter_graph_modules(gm))
    assert [p for p, _, _ in walked] == ["", "inner", "inner/inner"]
    a, b = _fp(gm), _fp(gm)
    assert a.same_as(b) and a.nodes == b.nodes == sum(len(m.graph.nodes) for _, m, _ in walked)


def test_every_change_a_row_depends_on_is_a_changed_graph():
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    add = next(n for n in gm.graph.nodes if n.op == "call_function")
    changes = [
        lambda: setattr(add, "args", (add.args[0], 2)),  # FX replaces the tuple
        lambda: add.meta.__setitem__("val", torch.empty(1)),
        lambda: add.meta.__setitem__("stack_trace", "File x, line 1"),
        lambda: add.meta.__setitem__("recompute", "MUST_SAVE"),
        lambda: setattr(add, "name", "renamed"),
        lambda: setattr(add, "target", torch.mul),
    ]
    for change in changes:
        before = _fp(gm)
        change()
        assert not _fp(gm).same_as(before), change
        assert _fp(gm).same_as(_fp(gm))


def test_equal_values_that_are_other_objects_are_a_change_never_compared():
    """Values are compared by identity: == on a tensor would compute (on a SymInt, add a guard)."""
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    add = next(n for n in gm.graph.nodes if n.op == "call_function")
    add.meta["val"] = torch.zeros(2)
    before = _fp(gm)
    add.meta["val"] = torch.zeros(2)
    assert not _fp(gm).same_as(before)
    assert not _fp(gm).same_as(None)
