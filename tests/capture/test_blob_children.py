"""Blobs made by forked children (format 3), in process: every graph's blob is written and loads
as the graph was when the capture saw it; a child that fails, dies or hangs costs only its blob
(a recorded capture error), never the training's result; no child outlives the capture."""

from __future__ import annotations

import hashlib
import os
import signal

import pytest
import torch
import torch.fx

from graphtrain_inspect.capture import blob_children, blobs, record_pass, session
from graphtrain_inspect.capture.shared import logformat
from tests.capture_utils import drop_relu, payloads

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="blob children need os.fork")


def _gm():
    def f(x):
        return torch.relu(x) * 2 + 1

    return torch.fx.symbolic_trace(f)


# changes the graph in place: a blob of its input must still hold the relu
_drop_relu = record_pass("drop_relu")(drop_relu)


@record_pass("add_one")
def _add_one(gm, example_inputs):
    out = next(n for n in gm.graph.nodes if n.op == "output")
    with gm.graph.inserting_before(out):
        extra = gm.graph.call_function(torch.add, (out.args[0], 1))
    out.replace_input_with(out.args[0], extra)
    gm.recompile()
    return gm


def _train(directory) -> torch.Tensor:
    """Two captured passes (when a capture runs), then the graph computes: the training's result."""
    if directory is not None:
        session.start(str(directory))
    try:
        gm = _add_one(_drop_relu(_gm(), []), [])
        return gm(torch.tensor([-1.0, 2.0]))
    finally:
        session.stop()


def _no_child_left() -> bool:
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def _load(path):
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    gm, _ = blobs.pickler().loads(path.read_bytes(), FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True))
    return gm


def test_every_graph_has_its_blob_from_a_child(tmp_path):
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    result = _train(tmp_path)
    assert torch.equal(result, _train(None))
    log = tmp_path / logformat.log_file_name(0)
    passes = payloads(log, logformat.PASS)
    made = {b["gid"]: b for b in payloads(log, logformat.BLOB)}
    traced, mid, last = passes[0]["before"], passes[0]["after"]["out"], passes[1]["after"]["out"]
    assert set(made) == {traced, mid, last}  # each distinct graph once, the last output too (the REPL's `after`)
    for b in made.values():
        data = (tmp_path / b["path"]).read_bytes()
        assert b["path"] == logformat.blob_relpath(b["sha256"])
        assert hashlib.sha256(data).hexdigest() == b["sha256"] and len(data) == b["bytes"]
    # the child pickled the graph as drop_relu received it, though the pass then changed it in place
    assert "relu" in _load(tmp_path / made[traced]["path"]).code
    assert "relu" not in _load(tmp_path / made[mid]["path"]).code
    end = payloads(log, logformat.END)[0]
    assert end["blobs"] == 3 and end["blob_children"]["forked"] == 3 and end["blob_children"]["failed"] == 0
    assert _no_child_left()
    # the reader gives each pass the blobs of its graphs, wherever the log named them
    recs = open_capture(str(tmp_path)).passes(0)
    assert [set(p.blobs) for p in recs] == [{traced, mid}, {mid, last}]
    assert all(p.blobs[g]["sha256"] == made[g]["sha256"] for p in recs for g in p.blobs)


def test_blobs_in_the_training_process_are_the_same(tmp_path, monkeypatch):
    """GTI_CAPTURE_BLOB_FORK=0 (and every case a child cannot be used): made in the process and
    named by the pass records, as before format 3; a child makes the same bytes."""
    forked = tmp_path / "forked"
    _train(forked)
    monkeypatch.setenv(blob_children.ENV_FORK, "0")
    here = tmp_path / "here"
    _train(here)
    log = here / logformat.log_file_name(0)
    assert payloads(log, logformat.BLOB) == []
    in_records = {g: b["sha256"] for p in payloads(log, logformat.PASS) for g, b in p["blobs"].items()}
    from_children = {b["gid"]: b["sha256"] for b in payloads(forked / logformat.log_file_name(0), logformat.BLOB)}
    assert in_records == from_children and len(in_records) == 3


def test_one_child_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setenv(blob_children.ENV_CHILDREN, "1")
    _train(tmp_path)
    log = tmp_path / logformat.log_file_name(0)
    assert len(payloads(log, logformat.BLOB)) == 3 and not payloads(log, logformat.ERROR)
    assert _no_child_left()


def _raise(*a, **k):
    raise RuntimeError("planted pickling failure")


def _die(*a, **k):
    os.kill(os.getpid(), signal.SIGKILL)


def _hang(*a, **k):
    while True:
        signal.pause()


def _in_children(monkeypatch, fault) -> None:
    """`fault` replaces blobs.dump in the blob children only (the parent's stays as it is)."""
    real = blob_children.child_dump

    def child_dump(directory, gm, shape_env):
        blobs.dump = fault  # runs in the child: its own copy of the module
        return real(directory, gm, shape_env)

    monkeypatch.setattr(blob_children, "child_dump", child_dump)


@pytest.mark.parametrize(
    "fault, wait, why",
    [
        (_raise, "300", "planted pickling failure"),
        (_die, "300", "died of signal SIGKILL without a blob"),
        (_hang, "0.2", "killed: still running after 0.2 s"),
    ],
    ids=["raises", "dies", "hangs"],
)
def test_a_failing_child_costs_only_its_blob(tmp_path, monkeypatch, fault, wait, why):
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    plain = _train(None)
    _in_children(monkeypatch, fault)
    monkeypatch.setenv(blob_children.ENV_CHILDREN, "3")
    # The end of the capture waits for the children that raise or die until they have (on a
    # loaded machine a niced child can take seconds to get there: a short wait killed it first and
    # recorded "killed" instead of its own failure); the hanging ones are killed after 0.2 s.
    monkeypatch.setenv(blob_children.ENV_WAIT, wait)
    assert torch.equal(_train(tmp_path), plain)
    assert _no_child_left()
    log = tmp_path / logformat.log_file_name(0)
    errors = payloads(log, logformat.ERROR)
    assert len(errors) == 3 and all(why in e["message"] for e in errors)
    assert {(e["where"], e["pass"]) for e in errors} == {
        ("blob (before)", "drop_relu"),
        ("blob (out)", "drop_relu"),
        ("blob (out)", "add_one"),
    }
    assert payloads(log, logformat.BLOB) == [] and not list((tmp_path / logformat.BLOB_DIR).glob("*"))
    passes = payloads(log, logformat.PASS)
    assert [p["status"] for p in passes] == ["ok", "ok"]
    end = payloads(log, logformat.END)[0]
    assert end["capture_errors"] == 3 and end["blobs"] == 0 and end["blob_children"]["failed"] == 3
    # errors that came after their pass's record are counted on the pass by the reader
    cap = open_capture(str(tmp_path))
    assert [p.capture_errors for p in cap.passes(0)] == [2, 1]
    assert len(cap.capture_errors(0)) == 3


def test_a_hanging_child_never_holds_the_training(tmp_path, monkeypatch):
    """One child at a time, and it hangs: the next graphs' blobs are made in the process after a
    bounded wait, the hanging child is killed at the end."""
    plain = _train(None)
    _in_children(monkeypatch, _hang)
    monkeypatch.setenv(blob_children.ENV_CHILDREN, "1")
    monkeypatch.setenv(blob_children.ENV_WAIT, "0.2")
    assert torch.equal(_train(tmp_path), plain)
    assert _no_child_left()
    log = tmp_path / logformat.log_file_name(0)
    passes = payloads(log, logformat.PASS)
    (error,) = payloads(log, logformat.ERROR)
    assert (error["where"], error["pass"]) == ("blob (before)", "drop_relu") and "killed" in error["message"]
    made_here = {g for p in passes for g in p["blobs"]}
    assert made_here == {passes[0]["after"]["out"], passes[1]["after"]["out"]}
    assert payloads(log, logformat.END)[0]["blob_children"] | {"cpu_s": 0, "waited_s": 0, "waited_at_end_s": 0} == {
        "forked": 1,
        "failed": 1,
        "killed": 1,
        "cpu_s": 0,
        "waited_s": 0,
        "waited_at_end_s": 0,
    }


def test_graphs_with_accelerator_tensors_stay_in_process(monkeypatch):
    # the walk, as where an accelerator was started (on this CPU build none can be: skipped)
    monkeypatch.setattr(blob_children, "_no_accelerator_started", lambda: False)
    gm = _gm()
    assert blob_children.fork_unsafe(gm) is None
    assert not blob_children.holds_accelerator_tensors(gm)

    class NotCpu(torch.Tensor):  # a real tensor that says it lives on an accelerator
        @property
        def device(self):
            return torch.device("cuda", 0)

    gm.register_buffer("constant", torch.zeros(2).as_subclass(NotCpu))
    assert blob_children.holds_accelerator_tensors(gm)
    assert "accelerator" in blob_children.fork_unsafe(gm)


def test_no_walk_for_accelerator_tensors_where_none_was_started():
    """On a CPU build of torch (this machine's) no tensor can be on an accelerator: the graph is
    not walked, whatever it holds; where CUDA is there, the walk is skipped until it is started."""
    no_device = torch.accelerator.current_accelerator() is None
    assert blob_children._no_accelerator_started() is (no_device or not torch.cuda.is_initialized())
    if no_device:

        class NotCpu(torch.Tensor):  # says it lives on an accelerator: only a walk would ask
            @property
            def device(self):
                return torch.device("cuda", 0)

        gm = _gm()
        gm.register_buffer("constant", torch.zeros(2).as_subclass(NotCpu))
        assert not blob_children.holds_accelerator_tensors(gm)


def test_a_wait_sleeps_while_a_child_that_has_answered_exits(monkeypatch):
    """A child whose pipe is at end of file is exiting (it answered and closed it); the wait for
    it sleeps between waitpids instead of polling the pipe, which is always ready then (a spin
    of ~1,000 polls per rank, measured on graph_trainer: 48-69 ms of the training's CPU)."""
    import time

    polls: list[float] = []
    real = blob_children._ready
    monkeypatch.setattr(blob_children, "_ready", lambda fds, t: polls.append(t) or real(fds, t))

    def job():
        os.closerange(3, blob_children._max_fd())  # the answer's pipe closed: end of file now
        time.sleep(0.3)  # and the child lives on a while, as a large process's exit does
        return {"records": True}

    kids = blob_children.Children()
    kids.start("g", "test", None, job)
    t0 = time.monotonic()
    done = kids.wait(10.0, one=True)
    assert len(done) == 1 and not kids.running
    assert time.monotonic() - t0 >= 0.25
    assert len(polls) <= 3, len(polls)
