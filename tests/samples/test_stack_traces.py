"""The sample's traced nodes keep the model line that made them (make_fx keeps only frames named
`forward` unless torch offers stack-trace anchors: the model's functions are registered as such),
and a finding's node without a stack of its own is given the nearest node's, said so."""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from graphtrain_inspect.inspector.read.source_lines import nearest_source, parse_frame, source_text
from graphtrain_inspect.samples import model
from graphtrain_inspect.samples.tracing import keep_model_frames


def test_model_functions_traced_by_make_fx_name_their_model_line():
    if not keep_model_frames():
        pytest.skip("this torch has no stack-trace anchors: nodes keep frames of modules' forward only")

    def step(x, w):
        return model.rms_norm(x, w, 1e-6).sum()

    gm = make_fx(step, tracing_mode="fake", record_stack_traces=True)(torch.randn(4, 8), torch.randn(8))
    frames = [n.meta.get("stack_trace") for n in gm.graph.nodes if n.op == "call_function"]
    inner = [parse_frame(f.strip().splitlines()[-2] + " | " + f.strip().splitlines()[-1].strip()) for f in frames if f]
    assert inner and any(src and src["file"].endswith("samples/model.py") and src["fn"] == "rms_norm" for src in inner)


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
