"""capture/failure.py: the exception that ended a rank's program, as a `gti_failure` record, with
its frames in generated code tied to what the capture recorded (in process, no torchrun)."""

from __future__ import annotations

import hashlib
import sys

import torch
import torch.fx

from graphtrain_inspect.capture import failure, session
from graphtrain_inspect.capture.shared import logformat
from tests.capture_utils import payloads


def _picks_past_the_end(x):
    return torch.relu(x)[8]


def test_frames_in_a_graphs_forward_and_in_recorded_output_code(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.distributed.elastic.agent.server.api", sys)  # as after torchrun tests
    # a rank, as torchrun starts it: RANK and LOCAL_RANK (without LOCAL_RANK, a process that has
    # imported torchrun's elastic agent, as an earlier test in this process may have, is the launcher)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    sess = session.Session(directory=str(tmp_path))
    monkeypatch.setattr(session, "_CURRENT", sess)
    gm = torch.fx.symbolic_trace(_picks_past_the_end)
    sess.lineage.produced(gm, 3)  # a captured pass (seq 3) returned this graph
    try:
        gm(torch.ones(4))
    except IndexError as e:
        rows = failure.frames(sess, e.__traceback__)
    fx = next(r for r in rows if r["file"].startswith("<eval_with_key>"))
    assert fx["function"] == "forward" and fx["pass_seq"] == 3 and fx["node"] == "getitem", fx
    assert fx["code"].startswith("getitem = relu[8]"), fx

    code = "def call(args):\n    x = args[0]\n    raise RuntimeError('index out of bounds: 0 <= tmp7 < 4L')\n"
    path = tmp_path / "cabc.py"
    path.write_text(code)
    oid = "o" + hashlib.sha256(code.encode()).hexdigest()[:16]
    sess.__dict__["_gti_output_codes"] = {oid}  # as output_code records it
    scope: dict = {}
    exec(compile(code, str(path), "exec"), scope)
    try:
        scope["call"]([1])
    except RuntimeError as e:
        exc = e
    rows = failure.frames(sess, exc.__traceback__)
    assert rows[-1] == {"file": str(path), "line": 3, "function": "call", "code": rows[-1]["code"], "oid": oid}

    failure.record(exc, exc.__traceback__)
    failure.record(exc, exc.__traceback__)  # one record per exception
    sess.finish()
    (rec,) = payloads(tmp_path / logformat.log_file_name(0), logformat.FAILURE)
    assert rec["type"] == "builtins.RuntimeError" and rec["message"].startswith("index out of bounds")
    assert "Traceback (most recent call last)" in rec["traceback"] and rec["frames"][-1]["oid"] == oid


def test_the_hook_prints_as_before_and_skips_the_launcher(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setitem(sys.modules, "torch.distributed.elastic.agent.server.api", sys)  # as after torchrun tests
    sess = session.Session(directory=str(tmp_path))
    monkeypatch.setattr(session, "_CURRENT", sess)
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    failure.install()
    try:
        raise ValueError("no shard file")
    except ValueError as e:
        sys.excepthook(type(e), e, e.__traceback__)
    assert "ValueError: no shard file" in capsys.readouterr().err  # the previous hook ran
    # torchrun's own process: an elastic agent without LOCAL_RANK, no record written yet
    launcher = session.Session(directory=str(tmp_path / "launcher"))
    monkeypatch.setattr(session, "_CURRENT", launcher)
    monkeypatch.setitem(sys.modules, "torch.distributed.elastic.agent.server.api", sys)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    failure.record(RuntimeError("ChildFailedError"), None)
    assert not launcher.header_written
    monkeypatch.delitem(sys.modules, "torch.distributed.elastic.agent.server.api")
    monkeypatch.delenv("RANK")  # a parent of ranks of another launcher (multiprocessing): not a rank either
    failure.record(RuntimeError("ProcessRaisedException"), None)
    assert not launcher.header_written
    sess.finish()
    assert [p["message"] for p in payloads(tmp_path / logformat.log_file_name(0), logformat.FAILURE)] == [
        "no shard file"
    ]
