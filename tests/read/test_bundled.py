"""The checks on the captures recorded on GPUs (samples/captures/, 2 and 4 H200s, NCCL, torch 2.11).

What differs from the CPU captures: each rank's own device is cuda:<local rank>, so make_fx's
traced graphs hold `device(type='cuda', index=<rank>)` literals: right for these per-rank
compiles (info, whether they stay to the end, as with `--bug device-literal`, or place_devices
removes them, as in the clean run), an error in a shared graph (`check --shared-graph`) when they
stay; NCCL group names, and 4-rank meshes (dp, ep) whose coordinates the evidence names.
"""

from __future__ import annotations

import pytest

from graphtrain_inspect.inspector.checks import run_checks
from graphtrain_inspect.inspector.read import bundled
from graphtrain_inspect.inspector.read.capture_index import open_capture

# with --shared-graph (the graph is to be loaded by every rank), where it differs
SHARED = {
    "device-literal": [("device-baked", "trace", "error")],
    "rank-baked": [("rank-baked-constant", "trace", "error")],
    "rank-divergent": [("rank-divergent-graph", "tag_activation_checkpointing", "error")],
}

EXPECTED = {
    "clean": [],
    "coor-clean": [],
    # the rank read as an int by model code, in per-rank traces: right there (info), an error shared
    "rank-baked": [],
    "coor-rank-baked": [("rank-baked-constant", "trace", "error")],
    "device-literal": [],
    "stale-symbol": [("stale-unbacked-symbol", "concretize_symbolic_shapes", "error")],
    # ranks recompute different nodes, their collectives agree: right in per-rank graphs (info)
    "rank-divergent": [],
}


def _names():
    return [n for n in bundled.names() if n.split("-", 1)[-1] in EXPECTED]


@pytest.mark.skipif(not _names(), reason="no bundled GPU captures in samples/captures/")
@pytest.mark.parametrize("name", _names() or ["none"])
def test_bundled_gpu_capture(name):
    cap = open_capture(str(bundled.path_of(name)))
    assert not cap.errors
    fs = run_checks(cap)
    got = sorted({(f.kind, f.introduced_by, f.severity) for f in fs if f.severity in ("error", "warning")})
    assert got == EXPECTED[name.split("-", 1)[-1]], [
        (f.kind, f.introduced_by, f.severity, f.message) for f in fs if f.severity != "info"
    ]
    if name.endswith("x4-rank-baked"):
        vectors = {
            m["vector"]
            for f in fs
            if f.kind == "rank-baked-constant" and f.evidence.get("matches")
            for m in f.evidence["matches"][:1]
        }
        assert vectors == {"coordinate[dp]", "coordinate[ep]"}
    short = name.split("-", 1)[-1]
    shared = run_checks(cap, shared_graph=True)
    got = sorted({(f.kind, f.introduced_by, f.severity) for f in shared if f.severity in ("error", "warning")})
    assert got == SHARED.get(short, EXPECTED[short]), [
        (f.kind, f.introduced_by, f.severity, f.message) for f in shared if f.severity != "info"
    ]
    if short == "device-literal":
        own = [f for f in fs if f.evidence.get("source") == "own-device"]
        assert own and all(
            f.severity == "info" and set(f.evidence["values"].values()) == {f"cuda:{r}" for r in f.ranks} for f in own
        )
        assert all(
            f.evidence["device"] == f.evidence["own_device"] == f"cuda:{f.ranks[0]}" and len(f.ranks) == 1
            for f in shared
            if f.severity == "error"
        )


@pytest.mark.skipif(not bundled.names(), reason="no bundled GPU captures in samples/captures/")
def test_bundled_capture_is_signed_as_unpacked(tmp_path, monkeypatch):
    """The archives ship with the package (trusted code): their unpacked copy carries this user's
    signature, so replay (and the TUI's replay key) load it without --trust; their manifests name
    the GPU hosts and users that recorded them, which decides nothing. Another key unpacks afresh."""
    from graphtrain_inspect.capture.shared import signing

    name = bundled.names()[0]
    d = bundled.path_of(name)
    v = signing.verify(str(d))
    assert v.ok, v.why
    assert open_capture(str(d)).manifest.get("host") not in (None, "")  # the recording host's claim, kept as it was
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "other-user"))
    assert not signing.verify(str(d)).ok  # another key: not this user's signature
    d2 = bundled.path_of(name)
    assert d2 != d and signing.verify(str(d2)).ok


def test_a_sample_replays_with_its_own_setup_and_is_named_by_its_name(tmp_path):
    """A bundled sample's planted passes read the training's bug switches: replay (the CLI, and the
    TUI's `r` through it) runs the sample's set-up unless told another, and names the sample as the
    user does; any other capture gets neither."""
    from graphtrain_inspect.inspector.read import bundled
    from graphtrain_inspect.tui.replay import replay_argv

    path = str(bundled.path_of("h200x2-device-literal"))
    assert bundled.setup_of(path) == [bundled.SAMPLE_SETUP] and bundled.setup_of(str(tmp_path)) == []
    # the user's own capture of the sample training too, by its command line
    command = ["torchrun", "--nproc-per-node", "2", "-m", "graphtrain_inspect.samples.train", "--bug", "rank-baked"]
    assert bundled.setup_of(str(tmp_path), {"command": command}) == [bundled.SAMPLE_SETUP]
    assert bundled.setup_of(str(tmp_path), {"command": ["torchrun", "train.py"]}) == []
    argv = replay_argv(path, "place_devices", 1, 0)
    assert argv[argv.index("replay") :][:3] == ["replay", "--sample", "h200x2-device-literal"]
    assert replay_argv(str(tmp_path), "p", 0, 0)[argv.index("replay") + 1] == str(tmp_path)
