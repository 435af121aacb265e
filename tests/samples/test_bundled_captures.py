"""The captures recorded on H200 GPUs (samples/captures/) stay readable and keep their findings."""

from __future__ import annotations

import subprocess

import pytest

from graphtrain_inspect.inspector.checks import run_checks
from graphtrain_inspect.inspector.read import bundled
from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.capture_utils import run_cli, tlparse_exe

# capture (without its hardware prefix) -> the (kind, blamed pass, layer) of every error and warning
EXPECTED = {
    "clean": set(),
    "coor-clean": set(),
    # per-rank traces of model code that reads the rank as an int: an error once shared
    "rank-baked": {("rank-baked-constant", "trace", "graph")},
    "coor-rank-baked": {("rank-baked-constant", "trace", "graph")},
    # On CUDA make_fx records cuda:<local rank> in the trace; the bug is that place_devices keeps it:
    # right for these per-rank compiles, wrong in a graph loaded by every rank (--shared-graph)
    "device-literal": {("device-baked", "trace", "graph")},
    "stale-symbol": {("stale-unbacked-symbol", "concretize_symbolic_shapes", "graph")},
    "rank-divergent": {("rank-divergent-graph", "tag_activation_checkpointing", "graph")},
    # torch's FSDP2 + torch.compile (tests/programs/fsdp2_compile.py): correct, and with
    # y * (rank + 1) planted: in the traced graph and in the Triton code Inductor generated from it
    "fsdp2-compile-clean": set(),
    # (shared, the per-rank GPU code also pins each rank's own device: device-baked in the code)
    "fsdp2-compile-rank-literal": {
        ("rank-baked-constant", "trace", "graph"),
        ("rank-baked-constant", "inductor_codegen", "codegen"),
        ("device-baked", "inductor_codegen", "codegen"),
    },
    # samples/codegen_one_rank.py: Inductor code compiled on rank 0 and loaded by both ranks pins
    # device 0 (rank 1 failed: "Expected all tensors to be on the same device"); --virtual-local-rank
    # hides it at run time, the code still pins it; per-rank compiles are right
    # (the run failed, exit 1: training-failed says so first; recorded before ranks' exits were)
    "codegen-coor": {("device-baked", "inductor_codegen", "codegen"), ("training-failed", None, "graph")},
    "codegen-virtual": {("device-baked", "inductor_codegen", "codegen")},
    "codegen-per-rank": set(),
    # pipelines paired by identity, recorded with torch's trace (benchmarks/gpu/identity_runs.sh): only rank 1
    # recompiles (an error, and no device-baked: rank 1's code is its own, not shared) and its
    # twin; rank 0 compiles and broadcasts, every rank loads and runs a load-time pass: the slice
    # rank 0 traced is baked into the graph every rank runs (no pass-ran-on-one-rank alarm)
    "rank-recompile-divergent": {("rank-divergent-compile", "dynamo", "graph")},
    "rank-recompile-twin": set(),
    "precompile-load": {("rank-baked-constant", "trace", "graph")},
}

# bugs that live in model code read by per-rank traces: right for the rank that traced, wrong once
# one rank's graph is loaded by the others, so they are errors only with --shared-graph
# (and a pass that recomputes other nodes on each rank while the collectives agree: rank-divergent)
SHARED_ONLY = {"rank-baked", "device-literal", "fsdp2-compile-rank-literal", "rank-divergent"}


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
    bug = name.split("-", 1)[1]
    shared = bug in SHARED_ONLY
    findings = [f for f in run_checks(cap, shared_graph=shared) if f.severity in ("error", "warning")]
    assert {(f.kind, f.introduced_by, f.layer) for f in findings} == EXPECTED[bug], f"{name}: {findings}"
    if shared:  # each rank traced and compiled for itself: right there, so info only
        per_rank = run_checks(cap)
        assert [f for f in per_rank if f.severity in ("error", "warning")] == []
        planted = {
            (f.kind, f.introduced_by, f.layer)
            for f in per_rank
            if f.evidence.get("severity_if_shared") or f.kind == "device-baked"
        }
        assert planted >= {k for k in EXPECTED[bug] if k[0] != "device-baked" or bug == "device-literal"}


# the bugs planted in samples.train: every kind of error they raise names a line of the sample (the
# model's, or for a pass's bug the pass's). torch 2.11 has no stack-trace anchors, so its model lines
# come from the sample's fallback (samples/tracing.py).
SAMPLE_BUGS = {"rank-baked", "coor-rank-baked", "device-literal", "stale-symbol", "rank-divergent"}


@pytest.mark.parametrize("name", [n for n in bundled.names() if n.split("-", 1)[1] in SAMPLE_BUGS])
def test_planted_findings_name_their_line_of_the_sample(name):
    cap = open_capture(str(bundled.path_of(name)))
    errors = [f for f in run_checks(cap, shared_graph=True) if f.severity == "error"]
    assert errors
    for kind in {f.kind for f in errors}:
        lines = {
            (f.source["file"].rsplit("/samples/", 1)[-1], f.source["line"])
            for f in errors
            if f.kind == kind and f.source and f.source.get("line") and "/samples/" in (f.source.get("file") or "")
        }
        assert lines, f"{name}: no {kind} finding names a line of the sample"


def test_check_on_the_bundled_demo_prints_the_model_line():
    """What docs/inspector.md's `check --sample h200x2-coor-rank-baked` shows: the line that baked the
    rank, relative to the recorded program's root."""
    r = run_cli("check", "--sample", "h200x2-coor-rank-baked")
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.count("at samples/model.py:198  x = x.select(0, mesh_coordinate(pc.mesh, dim, baked=baked))") == 2


def test_tlparse_reads_gpu_logs(tmp_path):
    path = bundled.path_of("h200x4-rank-divergent")
    logs = sorted(path.glob("dedicated_log_torch_trace_rank_*_gti.log"))
    assert len(logs) == 4
    for log in logs:
        r = subprocess.run(
            [
                tlparse_exe(),
                str(log),
                "-o",
                str(tmp_path / log.stem),
                "--strict",
                "--strict-compile-id",
                "--no-browser",
            ],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr
