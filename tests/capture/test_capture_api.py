"""graphtrain_inspect.capture.record_pass in-process: decorator and context-manager forms, and a no-op
outside a capture."""

from __future__ import annotations

import torch
import torch.fx

from graphtrain_inspect.capture import record_pass, session
from graphtrain_inspect.capture.shared import logformat
from tests.capture_utils import drop_relu as _drop_relu
from tests.capture_utils import payloads


def _gm():
    def f(x):
        return torch.relu(x) + 1

    return torch.fx.symbolic_trace(f)


def test_no_op_outside_a_capture():
    assert session.current() is None
    wrapped = record_pass(_drop_relu)
    gm = wrapped(_gm(), [])
    assert "relu" not in gm.code
    with record_pass("noop", gm) as rec:
        rec.result = gm


def test_decorator_and_context_manager(tmp_path):
    sess = session.start(str(tmp_path))
    try:
        named = record_pass("drop-relu")(_drop_relu)
        gm = named(_gm(), [])
        with record_pass("add-one", gm) as rec:
            out = next(n for n in gm.graph.nodes if n.op == "output")
            with gm.graph.inserting_before(out):
                extra = gm.graph.call_function(torch.add, (out.args[0], 1))
            out.replace_input_with(out.args[0], extra)
            gm.recompile()
            rec.result = gm
        try:
            with record_pass("boom", gm):
                raise KeyError("inside")
        except KeyError:
            pass
        else:
            raise AssertionError("record_pass swallowed the exception")
    finally:
        session.stop()
    passes = payloads(tmp_path / logformat.log_file_name(0), logformat.PASS)
    assert [(p["name"], p["source"], p["status"]) for p in passes] == [
        ("drop-relu", "api", "ok"),
        ("add-one", "api", "ok"),
        ("boom", "api", "raised"),
    ]
    assert passes[0]["traced"] and not passes[1]["traced"]
    assert passes[1]["before"] == passes[0]["after"]["out"] != passes[1]["after"]["out"]
    assert passes[2]["exception"]["type"] == "builtins.KeyError"
    assert sess.capture_errors == 0


def test_a_pass_that_changes_nothing_still_starts_its_pipeline(tmp_path):
    session.start(str(tmp_path))
    try:
        gm = _gm()
        record_pass("noop")(lambda gm, ex: gm)(gm, [])
        record_pass("drop-relu")(_drop_relu)(gm, [])
        other = torch.fx.symbolic_trace(lambda x: x * 3)
        record_pass("noop-on-another")(lambda gm, ex: gm)(other, [])
    finally:
        session.stop()
    passes = payloads(tmp_path / logformat.log_file_name(0), logformat.PASS)
    assert [(p["name"], p["traced"], p["pipeline"]) for p in passes] == [
        ("noop", True, 0),
        ("drop-relu", False, 0),
        ("noop-on-another", True, 1),
    ]


def test_capture_side_imports_stay_light():
    """What runs in every worker at start-up, and the launcher, import neither torch nor any UI."""
    import subprocess
    import sys

    from tests.capture_utils import ROOT

    code = (
        "import sys, capture, capture.shared.logformat, capture.launcher, capture.summary, capture.bootstrap_env\n"
        "capture.bootstrap_env.start_from_env()\n"
        "print(sorted(k for k in ('torch', 'textual', 'rich') if k in sys.modules))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
