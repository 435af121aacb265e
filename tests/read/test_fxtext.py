"""Graph text (print_readable) parsed into the node model matches what a capture's node table holds."""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from graphtrain_inspect.capture.graph_tables import node_tables, readable_code
from graphtrain_inspect.inspector.read.fxtext import parse_annotation, parse_graph_code

KEYS = ("name", "op", "target", "args", "kwargs", "val", "syms")


def _program(x, y):
    nz = torch.nonzero(x)

    def t(a, b):
        return a.sum() * 0 + b.float().sum() + torch.zeros(b.shape[0], device=torch.device("cpu")).sum()

    def e(a, b):
        return a.sum() - 1

    r = torch.cond(x.sum() > 0, t, e, (y, nz))
    z = torch.full([2], 3, device="cpu")
    v, idx = torch.max(y.view(2, -1), 1)
    return (
        r + nz.float().sum() + y.mul(1) + z.sum(),
        torch.ops.aten.slice.Tensor(y, 0, 1, 2),
        -y,
        y[1:],
        v,
        idx,
        torch.tensor([1, 2]) + 1,
        y.to(torch.float16),
        torch.clamp(y, min=float("-inf"), max=2.5),
    )


def test_parsed_text_equals_node_tables():
    torch._dynamo.reset()
    fm = FakeTensorMode(shape_env=ShapeEnv())
    with fm:
        gm = make_fx(_program)(fm.from_tensor(torch.tensor([1, 0, 2])), fm.from_tensor(torch.randn(4)))
    real = node_tables(gm)
    parsed, warnings = parse_graph_code(readable_code(gm))
    assert warnings == []
    assert [(g["path"], g["parent_node"]) for g in parsed["graphs"]] == [
        (g["path"], g["parent_node"]) for g in real["graphs"]
    ]
    for gr, gp in zip(real["graphs"], parsed["graphs"]):
        assert len(gr["nodes"]) == len(gp["nodes"])
        for a, b in zip(gr["nodes"], gp["nodes"]):
            for k in KEYS:
                if k == "val" and isinstance(a.get("val"), list):
                    continue  # multi-output values print no annotation
                assert a.get(k) == b.get(k), (a["name"], k, a.get(k), b.get(k))
            assert bool(a.get("subgraph")) == bool(b.get("subgraph"))


def test_annotations():
    assert parse_annotation("f32[u0, 4][4, 1]cuda:1") == {
        "t": "tensor",
        "dtype": "float32",
        "shape": ["u0", 4],
        "stride": [4, 1],
        "device": "cuda:1",
    }
    assert parse_annotation("bf16[s0 - 2, Max(1, u1)][1, s0]cpu")["shape"] == ["s0 - 2", "Max(1, u1)"]
    assert parse_annotation("Sym(u0)") == {"t": "sym", "type": "SymInt", "expr": "u0"}
    assert parse_annotation("Sym(u0 >= 0)")["type"] == "SymBool"
    assert parse_annotation("i64[][]cpu") == {
        "t": "tensor",
        "dtype": "int64",
        "shape": [],
        "stride": [],
        "device": "cpu",
    }
    assert parse_annotation("f32[4, 4]") == {"t": "tensor", "dtype": "float32", "shape": [4, 4]}
    assert parse_annotation("not an annotation") is None


DYNAMO = """class GraphModule(torch.nn.Module):
    def forward(self, L_x_: "f32[2, 4][4, 1]cuda:1", s0: "Sym(s0)"):
        l_x_ = L_x_

        # File: /tmp/t.py:9 in forward, code: y = x * rank
        y: "f32[2, 4][4, 1]cuda:1" = l_x_ * 1;  l_x_ = None
        z: "f32[3][1]cuda:1" = torch.zeros(3, device = device(type='cuda', index=1))

        # No stacktrace found for following nodes
        r = torch.ops._c10d_functional.all_reduce.default(y, 'sum', '2');  y = None
        w: "f32[2, 4][4, 1]cuda:1" = torch.ops._c10d_functional.wait_tensor.default(r);  r = None
        relu: "f32[2, 4][4, 1]cuda:1" = w.relu();  w = None
        getitem: "f32[4][1]cuda:1" = relu[0]
        return (getitem, z)


 # graph id: 140692049665104
"""

JOINT = """class inner_f(torch.nn.Module):
    def forward(
        self,
        primals,
        tangents,
    ):
        primals_1: "f32[4, 4][4, 1]cpu"  # PlainAOTInput(idx=0)
        tangents_1: "f32[][]cpu"  # TangentAOTInput(output=PlainAOTOutput(idx=0))
        primals_1, tangents_1, = fx_pytree.tree_flatten_spec([primals, tangents], self._in_spec)
        sum_1: "f32[][]cpu" = torch.ops.aten.sum.default(primals_1)
        expand: "f32[4, 4][0, 0]cpu" = torch.ops.aten.expand.default(tangents_1, [4, 4]);  tangents_1 = None
        return pytree.tree_unflatten([
            sum_1,  # PlainAOTOutput(idx=0)
            expand,  # GradAOTOutput(grad_of=PlainAOTInput(idx=0))
        ], self._out_spec)
"""


def test_dynamo_style_code():
    tables, warnings = parse_graph_code(DYNAMO)
    assert warnings == []
    rows = {r["name"]: r for r in tables["graphs"][0]["nodes"]}
    assert rows["l_x_"]["op"] == "placeholder" and rows["l_x_"]["target"] == "L_x_"
    assert rows["s0"]["val"] == {"t": "sym", "type": "SymInt", "expr": "s0"} and rows["s0"]["syms"] == ["s0"]
    assert rows["y"]["target"] == "operator.mul" and rows["y"]["args"] == [{"n": "l_x_"}, 1]
    assert rows["y"]["stack"] == 'File "/tmp/t.py", line 9, in forward | y = x * rank'
    assert rows["z"]["kwargs"] == {"device": {"dev": "cuda:1"}}
    assert rows["r"]["target"] == "_c10d_functional.all_reduce.default" and rows["r"]["args"][2] == "2"
    assert "stack" not in rows["r"]
    assert rows["relu"]["op"] == "call_method" and rows["relu"]["args"] == [{"n": "w"}]
    assert rows["getitem"]["target"] == "operator.getitem"
    assert rows["output"]["args"] == [[{"n": "getitem"}, {"n": "z"}]]


def test_joint_graph_style_code():
    tables, warnings = parse_graph_code(JOINT)
    rows = tables["graphs"][0]["nodes"]
    assert [r["name"] for r in rows] == ["primals_1", "tangents_1", "sum_1", "expand", "output"]
    assert rows[0]["op"] == "placeholder" and rows[0]["val"]["shape"] == [4, 4]
    assert rows[-1]["args"] == [[{"n": "sum_1"}, {"n": "expand"}]]


def test_code_that_does_not_parse_is_read_line_by_line():
    bad = DYNAMO.replace('relu: "f32[2, 4][4, 1]cuda:1" = w.relu()', "relu = w.relu(<lambda>)")
    tables, warnings = parse_graph_code(bad)
    assert warnings and "does not parse" in warnings[0]
    names = [r["name"] for r in tables["graphs"][0]["nodes"]]
    assert "relu" not in names and "getitem" in names and "z" in names
