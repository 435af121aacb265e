"""device-baked (inspector/checks/device_baked.py) on hand-built FX graphs written as a capture: device
literals and constants pinned to a device, and the device policy (docs/inspector.md): another rank's
device or an accelerator on a CPU rank is an error in the graph that runs and a warning once a later
pass removed it; each rank's own device is info for per-rank compiles and an error in a shared graph
(compile on one rank, or `check --shared-graph`)."""

from __future__ import annotations

import json
import subprocess
import sys

import torch
import torch.distributed  # registers the functional collectives
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

from graphtrain_inspect.inspector.checks import run_checks
from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.small_captures import CaptureWriter

# ---------------------------------------------------------------------------------------------
# device-baked


def move_all(tensors, devices):
    return [t for t in tensors]


def list_device_graph(device_index: int):
    """A node whose list argument holds a device literal: args[1][0]."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    n = g.call_function(move_all, ([x], [torch.device("cuda", device_index)]))
    g.output(n)
    return torch.fx.GraphModule(torch.nn.Module(), g)


def test_device_literal_inside_a_list_argument(tmp_path):
    w = CaptureWriter(tmp_path, world_size=2)
    for r in (0, 1):
        rw = w.rank(r, own_device=f"cuda:{r}")
        base = torch.fx.GraphModule(torch.nn.Module(), _one_input_graph())
        rw.apply("hoist", base, list_device_graph(0))  # compiled on rank 0: cuda:0 everywhere
        rw.end()
    fs = run_checks(open_capture(w.finish()))
    dev = [f for f in fs if f.kind == "device-baked"]
    assert len(dev) == 1
    f = dev[0]
    assert f.ranks == [1] and f.severity == "error" and f.introduced_by == "hoist"
    assert f.evidence["where"] == "args[1][0]" and f.evidence["device"] == "cuda:0"
    assert f.evidence["own_device"] == "cuda:1"


def _one_input_graph():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output(x)
    return g


def test_device_constant_on_foreign_device(tmp_path):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("buf", torch.zeros(2, device="meta"))

    w = CaptureWriter(tmp_path, world_size=2)
    for r in (0, 1):
        rw = w.rank(r, own_device=f"cuda:{r}")
        g = torch.fx.Graph()
        x = g.placeholder("x")
        b = g.get_attr("buf")
        g.output((x, b))
        gm = torch.fx.GraphModule(M(), g)
        # the device table says where the buffer lives; simulate a .cuda() to cuda:0
        rw.own_device = f"cuda:{r}"
        gid = rw.graph(gm)
        _patch_devices(
            rw,
            gid,
            {"graph": "", "node": "buf", "kind": "buffer", "device": "cuda:0", "dtype": "float32", "shape": [2]},
        )
        rw.apply("to_cuda", torch.fx.GraphModule(torch.nn.Module(), _one_input_graph()), gm)
        rw.end()
    fs = [f for f in run_checks(open_capture(w.finish())) if f.kind == "device-baked"]
    assert [(f.ranks, f.node, f.evidence["source"]) for f in fs] == [([1], "buf", "buffer")]


def _patch_devices(rw, gid, value):
    """Rewrite the last gti_devices record of `gid` with one more value entry (a buffer on CUDA)."""
    import orjson

    from graphtrain_inspect.capture.shared import logformat

    rw.f.flush()
    data = open(rw.path, "rb").read().split(b"\n")
    # records are: ... gti_devices envelope, payload line; find the envelope for gid
    for i in range(len(data) - 1, -1, -1):
        if b'"gti_devices"' in data[i] and gid.encode() in data[i]:
            payload = orjson.loads(data[i + 1][1:])
            payload["values"].append(value)
            rec = logformat.encode_record(logformat.DEVICES, payload, rank=rw.rank, meta={"gid": gid})
            data[i : i + 2] = rec.rstrip(b"\n").split(b"\n")
            break
    rw.f.close()
    with open(rw.path, "wb") as f:
        f.write(b"\n".join(data))
    rw.f = open(rw.path, "ab")


def _zeros_on(r):
    return lambda x: x + torch.zeros(2, device=torch.device("cpu", r))


def test_device_literal_differing_by_rank_on_cpu(tmp_path):
    w = CaptureWriter(tmp_path, world_size=2)
    for r in (0, 1):
        rw = w.rank(r)  # own device cpu: the literal cpu:<local rank> is only visible across ranks
        before = make_fx(lambda x: x + torch.zeros(2))(torch.randn(2))
        after = make_fx(_zeros_on(r))(torch.randn(2))
        rw.apply("place", before, after)
        rw.end()
    fs = [f for f in run_checks(open_capture(w.finish())) if f.kind == "device-baked"]
    assert len(fs) == 1 and fs[0].severity == "error" and fs[0].introduced_by == "place"
    assert fs[0].evidence["values"] == {"0": "cpu:0", "1": "cpu:1"}
    assert fs[0].evidence["matches"][0]["vector"] == "rank"


def test_own_device_literals_are_info_per_rank_and_once_fixed(tmp_path):
    """cuda:<own> on every rank (what make_fx records on GPUs): fine per rank (info), wrong if
    shared (the device policy, below)."""
    w = CaptureWriter(tmp_path / "kept", world_size=2)
    for r in (0, 1):
        rw = w.rank(r, own_device=f"cuda:{r}")
        rw.apply("place", torch.fx.GraphModule(torch.nn.Module(), _one_input_graph()), list_device_graph(r))
        rw.end()
    fs = run_checks(open_capture(w.finish()))
    assert [(f.kind, f.severity, f.evidence["source"]) for f in fs] == [("device-baked", "info", "own-device")]
    assert fs[0].evidence["values"] == {"0": "cuda:0", "1": "cuda:1"}
    # a later pass that makes the device index-less repairs it: info, naming the pass
    w = CaptureWriter(tmp_path / "fixed", world_size=2)
    for r in (0, 1):
        rw = w.rank(r, own_device=f"cuda:{r}")
        rw.apply("trace_like", torch.fx.GraphModule(torch.nn.Module(), _one_input_graph()), list_device_graph(r))
        rw.apply("place_devices", list_device_graph(r), _indexless_device_graph())
        rw.end()
    fs = run_checks(open_capture(w.finish()))
    assert [(f.severity, f.introduced_by, f.pass_, f.evidence["fixed_by"]) for f in fs] == [
        ("info", "trace_like", "trace_like", "place_devices")
    ]


def _indexless_device_graph():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    n = g.call_function(move_all, ([x], [torch.device("cuda")]))
    g.output(n)
    return torch.fx.GraphModule(torch.nn.Module(), g)


# ---------------------------------------------------------------------------------------------
# the device policy


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
