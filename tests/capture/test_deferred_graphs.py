"""A large graph's records made by a forked child (capture/deferred_graphs.py): the log is the one
the training process would have written, record for record and in the same order; a child that
fails costs its graph's records only (a capture error, the pass still recorded); the records are
written as the child finishes, not at the next pass or the end."""

from __future__ import annotations

import os
import time

import pytest
import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

from graphtrain_inspect.capture import deferred_graphs, record_pass, session
from graphtrain_inspect.capture.shared import logformat
from tests.capture_utils import drop_relu, records

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="deferred graphs need os.fork")

# changes its graph in place: a child must record the graph as the pass received it
_drop_relu = record_pass("drop_relu")(drop_relu)


@record_pass("add_one")
def _add_one(gm, example_inputs):
    out = next(n for n in gm.graph.nodes if n.op == "output")
    with gm.graph.inserting_before(out):
        extra = gm.graph.call_function(torch.ops.aten.add.Tensor, (out.args[0][0], 1))
    out.args = ((extra,),)
    gm.recompile()
    return gm


def _traced():
    def f(x):
        return (torch.relu(x) * x.shape[0] + 1,)

    return make_fx(f, tracing_mode="symbolic")(torch.randn(4))


def _train(directory, monkeypatch, defer: str) -> torch.Tensor:
    monkeypatch.setenv(deferred_graphs.ENV_NODES, defer)
    session.start(str(directory))
    try:
        gm = _add_one(_drop_relu(_traced(), []), [])
        return gm(torch.tensor([-1.0, 2.0]))[0]
    finally:
        session.stop()


# times, and a pass's `blobs`: the blobs its record names are those collected by then (timing)
_VOLATILE = {"time", "wall_s", "pid", "cpu_s", "blobs"}


def _comparable(log):
    """Each record but the blobs (their records come whenever a child finishes) and the header and
    end (times, pids, child counts): kind, envelope, payload without times."""
    out = []
    for kind, env, payload in records(log):
        if kind in (logformat.BLOB, logformat.HEADER, logformat.END):
            continue
        if isinstance(payload, dict):
            payload = {k: v for k, v in payload.items() if k not in _VOLATILE}
        # the payload's md5 and length follow its times
        env = {**{k: v for k, v in env.items() if k != "has_payload"}, "artifact": dict(env["artifact"])}
        env["artifact"].pop("payload_bytes", None)
        out.append((kind, env, payload))
    return out


def test_a_child_writes_the_log_the_process_would(tmp_path, monkeypatch):
    here, child = tmp_path / "here", tmp_path / "child"
    r_here = _train(here, monkeypatch, "0")
    r_child = _train(child, monkeypatch, "1")
    assert torch.equal(r_here, r_child)
    log_here, log_child = here / logformat.log_file_name(0), child / logformat.log_file_name(0)
    a, b = _comparable(log_here), _comparable(log_child)
    assert [k for k, _, _ in a] == [k for k, _, _ in b]
    assert a == b
    assert {logformat.NODES, logformat.SYMBOLS, logformat.PASS} <= {k for k, _, _ in b}
    blobs_here = {p["gid"] for k, _, p in records(log_here) if k == logformat.BLOB}
    blobs_child = {p["gid"] for k, _, p in records(log_child) if k == logformat.BLOB}
    assert blobs_here == blobs_child and len(blobs_child) == 3
    (end,) = [p for k, _, p in records(log_child) if k == logformat.END]
    assert end["capture_errors"] == 0 and end["blob_children"]["forked"] == 3
    assert not (child / deferred_graphs.PENDING_DIR).exists()  # removed at the end


def _die_before_writing(path, header, buf):
    os._exit(7)


def test_a_child_that_dies_costs_its_graph_only(tmp_path, monkeypatch):
    plain = _train(tmp_path / "here", monkeypatch, "0")
    monkeypatch.setattr(deferred_graphs, "write_file", _die_before_writing)
    monkeypatch.setenv("GTI_CAPTURE_BLOB_WAIT_S", "60")
    assert torch.equal(_train(tmp_path / "cap", monkeypatch, "1"), plain)
    log = tmp_path / "cap" / logformat.log_file_name(0)
    recs = records(log)
    passes = [p for k, _, p in recs if k == logformat.PASS]
    errors = [p for k, _, p in recs if k == logformat.ERROR]
    # every graph's child died: the passes are recorded, naming no graph, and each says why
    assert [(p["name"], p["status"], p["before"], p["after"]) for p in passes] == [
        ("drop_relu", "ok", None, {}),
        ("add_one", "ok", None, {}),
    ]
    assert sorted((e["where"], e["pass"]) for e in errors) == [
        ("graph records (before)", "drop_relu"),
        ("graph records (out)", "add_one"),
        ("graph records (out)", "drop_relu"),
    ]
    assert all("exited with status 7" in e["message"] for e in errors)
    assert [p["capture_errors"] for p in passes] == [2, 1]
    assert not [k for k, _, _ in recs if k in (logformat.GRAPH_CODE, logformat.NODES)]


def test_records_are_written_when_the_child_is_done(tmp_path, monkeypatch):
    """No pass follows the last one (a training that runs steps for hours): the flush thread writes
    its records, without waiting for the end of the capture."""
    monkeypatch.setenv(deferred_graphs.ENV_NODES, "1")
    sess = session.start(str(tmp_path))
    try:
        _drop_relu(_traced(), [])
        log = tmp_path / logformat.log_file_name(0)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if log.exists() and any(k == logformat.PASS for k, _, _ in records(log)):
                break
            time.sleep(0.05)
        kinds = [k for k, _, _ in records(log)]
        assert kinds.count(logformat.PASS) == 1 and kinds.count(logformat.NODES) == 2
        assert not sess.queue and not sess.ended
    finally:
        session.stop()


def test_a_recording_child_needs_a_free_core_or_a_blob(tmp_path, monkeypatch):
    """Without blobs, a rank whose host's cores all run ranks records its graphs itself."""
    monkeypatch.setenv(deferred_graphs.ENV_NODES, "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(len(os.sched_getaffinity(0))))
    assert deferred_graphs.worth_a_child(blobs=True) and not deferred_graphs.worth_a_child(blobs=False)
    session.start(str(tmp_path), blobs=False)
    try:
        _drop_relu(_traced(), [])
    finally:
        session.stop()
    (end,) = [p for k, _, p in records(tmp_path / logformat.log_file_name(0)) if k == logformat.END]
    assert "blob_children" not in end and end["graphs"] == 2
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    assert deferred_graphs.worth_a_child(blobs=False) == (len(os.sched_getaffinity(0)) > 1)


@record_pass("add_two")
def _add_two(gm, example_inputs):
    """Gives each call new args: FX drops the old tuple, whose address the new one may take."""
    for n in gm.graph.nodes:
        if n.op == "call_function":
            n.args = (n.args[0], 2)
    gm.recompile()
    return gm


def _plus_one(x):
    return x + 1


@pytest.mark.parametrize("defer", ["0", "1"])
def test_a_pass_that_replaces_args_returns_a_new_graph(tmp_path, monkeypatch, defer):
    """The fingerprint of the last graph keys on object ids: the objects are kept while it is, also
    where a child made the graph's table (else x + 1 -> x + 2 looked unchanged: the same gid)."""
    monkeypatch.setenv(deferred_graphs.ENV_NODES, defer)
    session.start(str(tmp_path))
    try:
        _add_two(torch.fx.symbolic_trace(_plus_one), [])
    finally:
        session.stop()
    (p,) = [p for k, _, p in records(tmp_path / logformat.log_file_name(0)) if k == logformat.PASS]
    assert p["before"] and p["after"]["out"] and p["after"]["out"] != p["before"]


def _hang_before_writing(path, header, buf):
    time.sleep(120)


def test_a_child_that_hangs_holds_the_records_behind_it_a_bounded_time(tmp_path, monkeypatch):
    """A child stuck before its file (a lock another thread held at the fork) is killed after
    GTI_CAPTURE_DEFER_WAIT_S: the records behind it are written while the training goes on."""
    plain = _train(tmp_path / "here", monkeypatch, "0")
    monkeypatch.setattr(deferred_graphs, "write_file", _hang_before_writing)
    monkeypatch.setenv(deferred_graphs.ENV_NODES, "1")
    monkeypatch.setenv(deferred_graphs.ENV_WAIT, "0.3")
    monkeypatch.setenv("GTI_CAPTURE_BLOB_CHILDREN", "4")  # no pass waits for a child slot
    log = tmp_path / "cap" / logformat.log_file_name(0)
    session.start(str(tmp_path / "cap"))
    try:
        result = _add_one(_drop_relu(_traced(), []), [])(torch.tensor([-1.0, 2.0]))[0]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (log.exists() and _kinds(log).count(logformat.PASS) == 2):
            time.sleep(0.05)
        kinds = _kinds(log)  # before the end of the capture
    finally:
        session.stop()
    assert torch.equal(result, plain)
    assert kinds.count(logformat.PASS) == 2 and kinds.count(logformat.ERROR) == 3
    errors = [p for k, _, p in records(log) if k == logformat.ERROR]
    assert all(e["type"] == "GraphChildTimeout" and "no records after 0.3 s" in e["message"] for e in errors)
    (end,) = [p for k, _, p in records(log) if k == logformat.END]
    assert end["blob_children"]["killed"] == 3


def _kinds(log):
    return [k for k, _, _ in records(log)]
