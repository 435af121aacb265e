"""A node a pass makes has no model stack: the capture notes the pass's own line that made it."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from graphtrain_inspect.capture import session
from graphtrain_inspect.capture.wrap import wrap_pass
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.source_lines import node_source, source_text
from tests.programs import joint_passes


def _line_of(fn, text: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_a_pass_made_node_names_the_pass_line_that_made_it(tmp_path):
    gm = make_fx(lambda x: ((x * 2).sum(),))(torch.randn(4))
    traced = {n.name for n in gm.graph.nodes}
    create_node = torch.fx.Graph.create_node
    session.start(str(tmp_path))
    try:
        out = wrap_pass(joint_passes.scale_by_rank, qualname="tests.programs.joint_passes:scale_by_rank")(gm, [])
    finally:
        session.stop()
    assert torch.fx.Graph.create_node is create_node  # put back once the pass returned
    made = [n for n in out.graph.nodes if n.name not in traced]
    assert len(made) == 3 and all(set(n.meta) == {"val"} for n in made)  # the training's graph: untouched

    cap = open_capture(str(tmp_path))
    (p,) = cap.passes(0)
    rows = {r["name"]: r for r in cap.node_table(0, p.after["out"]).root.nodes}
    rank_mul = made[1].name  # `rk = ... (zero, rank)`: the rank literal the checks find
    assert "stack" not in rows[rank_mul]
    src = node_source(rows[rank_mul], "scale_by_rank")
    assert src["created_by"] == "scale_by_rank" and src["file"] == joint_passes.__file__
    assert src["line"] == _line_of(joint_passes.scale_by_rank, "rk = gm.graph.call_function")
    assert source_text(src) == f"created by pass scale_by_rank at {joint_passes.__file__}:{src['line']}  {src['code']}"
    assert src["code"].startswith("rk = gm.graph.call_function")
    # traced nodes keep their model frame and get no `created`
    assert not any("created" in rows[n] for n in traced if n in rows)


def test_a_node_made_below_the_pass_by_code_not_the_users_gets_no_line(tmp_path):
    # a pass whose code is not a file (as torch's own passes are not the user's): the frames
    # outside it are the pass's callers (this test), which did not make the node
    ns: dict = {}
    exec(
        compile(
            "def add_one(gm, inputs):\n"
            "    out = next(n for n in gm.graph.nodes if n.op == 'output')\n"
            "    with gm.graph.inserting_before(out):\n"
            "        gm.graph.call_function(torch.ops.aten.add.Tensor, (out.args[0][0], 1))\n"
            "    return gm\n",
            "<generated pass>",
            "exec",
        ),
        {"torch": torch},
        ns,
    )
    gm = make_fx(lambda x: ((x * 2).sum(),))(torch.randn(4))
    session.start(str(tmp_path))
    try:
        wrap_pass(ns["add_one"], qualname="generated:add_one")(gm, [])
    finally:
        session.stop()
    cap = open_capture(str(tmp_path))
    (p,) = cap.passes(0)
    rows = cap.node_table(0, p.after["out"]).root.nodes
    added = [r for r in rows if r["target"] == "aten.add.Tensor"]
    assert len(added) == 1 and "created" not in added[0] and "stack" not in added[0]
    assert source_text(node_source(added[0], "add_one")) == "created by pass add_one"
