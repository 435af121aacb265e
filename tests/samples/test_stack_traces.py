"""The sample's traced nodes keep the model line that made them (make_fx keeps only frames named
`forward`: where torch offers stack-trace anchors the model's functions are registered as such,
elsewhere, as on torch 2.11, they are named `forward` while make_fx traces), and a finding's node
without a stack of its own is given the nearest node's, said so."""

from __future__ import annotations

import os
import re

import pytest
import torch
import torch.fx.proxy as fx_proxy
from torch.fx.experimental.proxy_tensor import make_fx

from graphtrain_inspect.inspector.read.source_lines import nearest_source, parse_frame, source_text
from graphtrain_inspect.samples import model
from graphtrain_inspect.samples.tracing import model_frames_kept
from tests.capture_utils import ROOT, capture, run_cli, torchrun

# A torch without stack-trace anchors (2.11): what the bundled GPU captures were traced with.
NO_ANCHORS = """import torch.fx.proxy as p
del p._register_stack_trace_anchor
p._STACK_TRACE_ANCHORS = set()
"""


def _innermost_frames(gm) -> list[dict]:
    frames = [n.meta.get("stack_trace") for n in gm.graph.nodes if n.op == "call_function"]
    return [parse_frame(f.strip().splitlines()[-2] + " | " + f.strip().splitlines()[-1].strip()) for f in frames if f]


@pytest.mark.parametrize("anchors", [True, False], ids=["anchors", "no-anchors"])
def test_model_functions_traced_by_make_fx_name_their_model_line(anchors, monkeypatch):
    if not anchors:
        monkeypatch.delattr(fx_proxy, "_register_stack_trace_anchor", raising=False)
        monkeypatch.setattr(fx_proxy, "_STACK_TRACE_ANCHORS", set(), raising=False)
    elif not hasattr(fx_proxy, "_register_stack_trace_anchor"):
        pytest.skip("this torch has no stack-trace anchors (the no-anchors case is the one it takes)")

    def step(x, w):
        return model.rms_norm(x, w, 1e-6).sum()

    with model_frames_kept() as finish:
        gm = make_fx(step, tracing_mode="fake", record_stack_traces=True)(torch.randn(4, 8), torch.randn(8))
    finish(gm)
    inner = _innermost_frames(gm)
    assert inner and all(src and src["file"].endswith("samples/model.py") for src in inner), inner
    assert {src["fn"] for src in inner} == {"rms_norm"}  # the real name, also where it was traced as `forward`
    assert model.rms_norm.__code__.co_name == "rms_norm"  # the rename ends with the trace


@pytest.mark.slow
def test_sample_traced_without_anchors_names_the_model_line_in_check(tmp_path):
    """The README's demo (--coor, rank-baked) on a torch whose make_fx has no anchors: `check`
    prints the model's line under each finding, as on torch 2.11's GPU recordings."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_ANCHORS)
    env = {"PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}  # its sitecustomize runs in every process
    bug = ["--coor", "--bug", "rank-baked"]
    program = torchrun(2, "graphtrain_inspect.samples.train", "--steps", "1", "--quiet", *bug)
    opts = ["--pass", "graphtrain_inspect.samples.pipeline:PIPELINE", "--no-inductor"]
    r = capture(tmp_path / "cap", program, *opts, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    r = run_cli("check", str(tmp_path / "cap"))
    assert r.returncode == 1, r.stdout + r.stderr
    lines = re.findall(r"at \S*samples/model\.py:(\d+)  (.*)", r.stdout)
    assert len(lines) == 2 and all("x.select(0, mesh_coordinate(" in code for _, code in lines), r.stdout


def test_nearest_node_with_a_stack_outside_torch_is_named():
    rows = [
        {"name": "a", "stack": 'File "/x/model.py", line 3, in f | y = a * 2'},
        {
            "name": "b",
            "stack": 'File "/v/site-packages/torch/distributed/_functional_collectives.py", line 9, in forward | w',
        },
        {"name": "c", "stack": None},
        {"name": "d", "stack": None},
    ]
    src = nearest_source(rows, "d")
    assert src["file"] == "/x/model.py" and src["line"] == 3 and src["nearest_node"] == "a"
    assert "nearest node with one, a" in source_text(src)
    assert nearest_source(rows[1:], "d") is None  # torch's own frames are no user's line
