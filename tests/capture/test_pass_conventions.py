"""`--pass` on torchtitan graph_trainer's conventions (torchtitan/experiments/graph_trainer/passes.py):
passes `(gm, example_inputs=None, *, kw) -> gm` with keyword-only configuration bound by
functools.partial, imported by name into the module that builds the list, the list built inside a
function (`compile_time_passes(traced, config, ...)`) or by a pipeline function kept in a registry
dict filled by a decorator, and applied in a loop that names each pass by `partial.func.__name__`.
In-process: the hooks and the session are the ones a captured worker installs."""

from __future__ import annotations

import functools
import sys
import textwrap

import torch
import torch.fx

from graphtrain_inspect.capture import named_passes, session
from graphtrain_inspect.capture.shared import logformat
from tests.capture_utils import payloads

PASSES_SRC = """
import torch

def scale_pass(gm, example_inputs=None, *, factor):
    out = next(n for n in gm.graph.nodes if n.op == "output")
    with gm.graph.inserting_before(out):
        scaled = gm.graph.call_function(torch.mul, (out.args[0], factor))
    out.replace_input_with(out.args[0], scaled)
    gm.recompile()
    return gm

def drop_relu_pass(gm, example_inputs=None):
    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target is torch.relu:
            n.replace_all_uses_with(n.args[0])
            gm.graph.erase_node(n)
    gm.recompile()
    return gm
"""

PIPELINE_SRC = """
import functools
from {passes} import drop_relu_pass, scale_pass

PIPELINES = {{}}

def register(key):
    def deco(fn):
        PIPELINES[key] = fn
        return fn
    return deco

def build_passes(traced, config, *, extra=False):
    passes = [drop_relu_pass, functools.partial(scale_pass, factor=config)]
    if extra:
        passes.append(functools.partial(scale_pass, factor=10))
    return passes

@register("default")
def default_pipeline(traced, config):
    return [functools.partial(scale_pass, factor=config)]

def pass_name(fn):
    return fn.func.__name__ if isinstance(fn, functools.partial) else fn.__name__

def apply(gm, example_inputs, passes):
    for p in passes:
        gm = p(gm, example_inputs)
    return gm
"""


def _gm():
    def f(x):
        return torch.relu(x) + 1

    return torch.fx.symbolic_trace(f)


def _modules(tmp_path, tag):
    passes, pipeline = f"gti_tt_passes_{tag}", f"gti_tt_pipeline_{tag}"
    (tmp_path / f"{passes}.py").write_text(textwrap.dedent(PASSES_SRC))
    (tmp_path / f"{pipeline}.py").write_text(textwrap.dedent(PIPELINE_SRC.format(passes=passes)))
    sys.path.insert(0, str(tmp_path))
    return passes, pipeline


def _run(tmp_path, tag, targets, body):
    passes, pipeline = _modules(tmp_path, tag)
    out = tmp_path / "cap"
    out.mkdir()
    named_passes.install([t.format(passes=passes, pipeline=pipeline) for t in targets])
    session.start(str(out))
    try:
        mod = __import__(pipeline)
        x = torch.randn(4)
        gm = body(mod)
        result = gm(x)
    finally:
        session.stop()
        sys.path.remove(str(tmp_path))
    recs = payloads(out / logformat.log_file_name(0), logformat.PASS)
    errors = payloads(out / logformat.log_file_name(0), logformat.ERROR)
    return mod, result, x, [(p["name"], p["status"]) for p in recs], errors


def test_partial_bound_keyword_only_passes_named_by_function(tmp_path):
    """The passes themselves named: a partial built later in a function binds the wrapper, and the
    loop's name for it is the pass's own name."""

    def body(mod):
        passes = mod.build_passes(None, 3, extra=True)
        assert [mod.pass_name(p) for p in passes] == ["drop_relu_pass", "scale_pass", "scale_pass"]
        return mod.apply(_gm(), [], passes)

    _, result, x, recs, errors = _run(tmp_path, "a", ["{passes}:scale_pass", "{passes}:drop_relu_pass"], body)
    assert torch.equal(result, (x + 1) * 3 * 10)
    assert recs == [("drop_relu_pass", "ok"), ("scale_pass", "ok"), ("scale_pass", "ok")]
    assert errors == []


def test_pass_list_built_inside_a_function(tmp_path):
    """Only the list-building function named: every pass in the list it returns is recorded,
    configuration kept, the same list object returned."""
    seen = {}

    def body(mod):
        passes = mod.build_passes(None, 2, extra=True)
        seen["names"] = [mod.pass_name(p) for p in passes]
        seen["partial"] = isinstance(passes[1], functools.partial) and passes[1].keywords == {"factor": 2}
        return mod.apply(_gm(), [], passes)

    _, result, x, recs, errors = _run(tmp_path, "b", ["{pipeline}:build_passes"], body)
    assert torch.equal(result, (x + 1) * 2 * 10)
    assert seen == {"names": ["drop_relu_pass", "scale_pass", "scale_pass"], "partial": True}
    assert recs == [("drop_relu_pass", "ok"), ("scale_pass", "ok"), ("scale_pass", "ok")]
    assert errors == []


def test_pipeline_function_in_a_decorator_registry(tmp_path):
    """A pipeline function registered by a decorator (torchtitan's PASS_PIPELINE_REGISTRY): the
    registry's entry is rebound, and the passes the pipeline returns are recorded."""

    def body(mod):
        fn = mod.PIPELINES["default"]
        assert fn is mod.default_pipeline
        return mod.apply(_gm(), [], fn(None, 5))

    _, result, x, recs, errors = _run(tmp_path, "c", ["{pipeline}:default_pipeline"], body)
    assert torch.equal(result, (torch.relu(x) + 1) * 5)
    assert recs == [("scale_pass", "ok")]
    assert errors == []
