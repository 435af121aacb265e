"""The device policy of `device-baked` (docs/inspector.md): another rank's device or an accelerator
on a CPU rank is an error in the graph that runs and a warning once a later pass removed it; each
rank's own device is info for per-rank compiles and an error in a shared graph (compile on one
rank, or `check --shared-graph`)."""

from __future__ import annotations

import json
import subprocess
import sys

import torch
import torch.fx

from graphtrain_inspect.inspector.checks import run_checks
from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.checks.test_checks import _indexless_device_graph, _one_input_graph, list_device_graph
from tests.small_captures import CaptureWriter


def _base():
    return torch.fx.GraphModule(torch.nn.Module(), _one_input_graph())


def _device(fs):
    return [
        (f.severity, f.introduced_by, f.ranks, f.evidence.get("device") or f.evidence.get("values"))
        for f in fs
        if f.kind == "device-baked"
    ]


def _write(path, own, passes):
    """Two ranks; `own(r)` the rank's device; `passes(r)` [(name, before, after)]."""
    w = CaptureWriter(path, world_size=2)
    for r in (0, 1):
        rw = w.rank(r, own_device=own(r))
        for name, before, after in passes(r):
            rw.apply(name, before, after)
        rw.end()
    return w.finish()


def test_accelerator_on_cpu_ranks_is_an_error_and_a_warning_once_removed(tmp_path):
    """Model code wrote `cuda:<local rank>` on ranks that compute on the CPU (gloo)."""
    kept = _write(tmp_path / "kept", lambda r: "cpu", lambda r: [("trace_like", _base(), list_device_graph(r))])
    fs = run_checks(open_capture(kept))
    assert _device(fs) == [("error", "trace_like", [0], "cuda:0"), ("error", "trace_like", [1], "cuda:1")]
    assert all("accelerator on a rank that computes on cpu" in f.message for f in fs)
    removed = _write(
        tmp_path / "removed",
        lambda r: "cpu",
        lambda r: [
            ("trace_like", _base(), list_device_graph(r)),
            ("place_devices", list_device_graph(r), _indexless_device_graph()),
        ],
    )
    fs = run_checks(open_capture(removed))
    # the index-less `cuda` left by the placement pass is still an accelerator on a CPU rank
    assert [(s, i) for s, i, _, d in _device(fs) if d != "cuda"] == [
        ("warning", "trace_like"),
        ("warning", "trace_like"),
    ]
    assert all(f.evidence.get("fixed_by") == "place_devices" for f in fs if f.evidence.get("device") != "cuda")


def test_another_ranks_device_is_an_error_and_a_warning_once_removed(tmp_path):
    kept = _write(tmp_path / "kept", lambda r: f"cuda:{r}", lambda r: [("hoist", _base(), list_device_graph(0))])
    assert _device(run_checks(open_capture(kept))) == [("error", "hoist", [1], "cuda:0")]
    removed = _write(
        tmp_path / "removed",
        lambda r: f"cuda:{r}",
        lambda r: [
            ("hoist", _base(), list_device_graph(0)),
            ("place_devices", list_device_graph(0), _indexless_device_graph()),
        ],
    )
    assert _device(run_checks(open_capture(removed))) == [("warning", "hoist", [1], "cuda:0")]


def _check_json(path, *extra):
    r = subprocess.run(
        [sys.executable, "-m", "graphtrain_inspect.inspector.cli", "check", str(path), "--json", *extra],
        capture_output=True,
        text=True,
    )
    return r.returncode, json.loads(r.stdout)


def test_own_device_is_info_per_rank_and_an_error_in_a_shared_graph(tmp_path):
    cap = _write(tmp_path / "own", lambda r: f"cuda:{r}", lambda r: [("trace_like", _base(), list_device_graph(r))])
    rc, doc = _check_json(cap)
    assert rc == 0 and [(f["severity"], f["evidence"]["source"]) for f in doc["findings"]] == [("info", "own-device")]
    rc, doc = _check_json(cap, "--shared-graph")
    assert rc == 1
    assert sorted((f["severity"], tuple(f["ranks"]), f["evidence"]["device"]) for f in doc["findings"]) == [
        ("error", (0,), "cuda:0"),
        ("error", (1,), "cuda:1"),
    ]
    assert all("compiling rank's device" in f["message"] for f in doc["findings"])


def test_compile_on_one_rank_is_a_shared_graph_by_itself(tmp_path):
    """Only rank 0 has graphs, the manifest says two ranks ran: its own device is baked for all."""
    w = CaptureWriter(tmp_path / "coor", world_size=2)
    rw = w.rank(0, own_device="cuda:0")
    rw.apply("trace_like", _base(), list_device_graph(0))
    rw.end()
    w.rank(1, own_device="cuda:1").end()
    fs = run_checks(open_capture(w.finish()))
    assert _device(fs) == [("error", "trace_like", [0], "cuda:0")]


def test_one_log_by_itself_is_not_a_shared_graph(tmp_path):
    """A single rank's log read alone (torch's TORCH_TRACE log of rank 1, say) says nothing about
    what the other ranks compiled: its own-device literals are not reported."""
    w = CaptureWriter(tmp_path / "one", world_size=2)
    rw = w.rank(1, own_device="cuda:1")
    rw.apply("trace_like", _base(), list_device_graph(1))
    rw.end()
    w.finish()
    log = next(p for p in (tmp_path / "one").iterdir() if p.name.endswith(".log"))
    assert _device(run_checks(open_capture(str(log)))) == []
