"""The captures recorded on H200 GPUs (samples/captures/) stay readable and keep their findings."""

from __future__ import annotations

import subprocess

import pytest

from graphtrain_inspect.inspector.read import bundled
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.checks import run_checks
from tests.capture.test_capture import _tlparse

# bug switch -> (finding kind, the pass blamed for it)
EXPECTED = {
    "clean": None,
    "coor-clean": None,
    "rank-baked": ("rank-baked-constant", "trace"),
    "coor-rank-baked": ("rank-baked-constant", "trace"),
    # On CUDA make_fx records cuda:<local rank> in the trace; the bug is that place_devices keeps it:
    # right for these per-rank compiles, wrong in a graph loaded by every rank (--shared-graph)
    "device-literal": ("device-baked", "trace"),
    "stale-symbol": ("stale-unbacked-symbol", "concretize_symbolic_shapes"),
    "rank-divergent": ("rank-divergent-graph", "tag_activation_checkpointing"),
}


def test_all_bundled_captures_are_listed():
    names = bundled.names()
    assert bundled.DEFAULT in names
    assert {n.split("-", 1)[1] for n in names} == set(EXPECTED)
    assert {n.split("-", 1)[0] for n in names} == {"h200x2", "h200x4"}


@pytest.mark.parametrize("name", bundled.names())
def test_check_finds_exactly_the_planted_bug(name):
    cap = open_capture(str(bundled.path_of(name)))
    assert not cap.errors, cap.errors
    assert cap.manifest["torch_version"].startswith("2.11")
    shared = name.endswith("device-literal")
    findings = [f for f in run_checks(cap, shared_graph=shared) if f.severity in ("error", "warning")]
    expected = EXPECTED[name.split("-", 1)[1]]
    if expected is None:
        assert findings == []
        return
    assert findings, f"{name}: the planted bug was not found"
    assert {(f.kind, f.introduced_by) for f in findings} == {expected}


def test_tlparse_reads_gpu_logs(tmp_path):
    path = bundled.path_of("h200x4-rank-divergent")
    logs = sorted(path.glob("dedicated_log_torch_trace_rank_*_gti.log"))
    assert len(logs) == 4
    for log in logs:
        r = subprocess.run([_tlparse(), str(log), "-o", str(tmp_path / log.stem), "--strict", "--strict-compile-id", "--no-browser"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
