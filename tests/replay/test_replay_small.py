"""Replay on small captures written in this process (capture.session, no subprocess): a pass
bound with functools.partial in a registry, a pass that raised in training, a rank-dependent
pass on rank 3 of 4, --fn from a file path. Exercises the library; the command is tested in
tests/replay/test_replay.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from graphtrain_inspect.capture import session
from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.capture.wrap import wrap_pass
from tests.programs import replay_passes as rp


def _traced():
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x, w):
        return (torch.relu(x @ w) + 1,)

    return make_fx(f, tracing_mode="fake")(torch.randn(4, 8), torch.randn(8, 8))


def _traced_cuda():
    """A graph as a GPU capture holds it: fake tensors on cuda:1 (made without a GPU)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    fm = FakeTensorMode(shape_env=ShapeEnv())
    with fm:
        x, w = torch.empty(4, 8, device="cuda:1"), torch.empty(8, 8, device="cuda:1")

    def f(x, w):
        return (torch.relu(x @ w) + 1,)

    return make_fx(f)(x, w)


def _manifest(d: Path, world: int) -> None:
    """What the launcher writes at the end of a capture: the manifest, then its signature."""
    import getpass
    import os
    import socket

    from graphtrain_inspect.capture.shared import signing

    user, uid, host = getpass.getuser(), os.getuid(), socket.gethostname()
    (d / logformat.MANIFEST_NAME).write_text(
        json.dumps(
            {
                "format": logformat.FORMAT_NAME,
                "format_version": logformat.FORMAT_VERSION,
                "command": ["test"],
                "env": {"GTI_CAPTURE_DIR": str(d), "TORCH_SHOW_CPP_STACKTRACES": "0"},
                "torch_version": torch.__version__,
                "host": host,
                "user": user,
                "uid": uid,
                "status": "finished",
                "ranks": {},
            }
        )
    )
    signing.sign(str(d))


@pytest.fixture(scope="module")
def small(tmp_path_factory, monkeypatch_module):
    """Rank 3 of 4 (LOCAL_RANK 1): scale_output through the PASSES registry, add_rank, explode."""
    d = tmp_path_factory.mktemp("small") / "cap"
    for k, v in {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}.items():
        monkeypatch_module.setenv(k, v)
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    # The "training": rank 3 of a 4-rank world with a subgroup (fake backend, one process).
    dist.init_process_group("fake", rank=3, world_size=4, store=FakeStore())
    dist.new_group([1, 3])
    session.start(str(d))
    try:
        reg = "tests.programs.replay_passes:PASSES"
        scale = wrap_pass(rp.scale_output, qualname="tests.programs.replay_passes:scale_output", target=reg)
        scale(_traced(), [], factor=3)
        wrap_pass(rp.add_rank, qualname="tests.programs.replay_passes:add_rank")(_traced(), [])
        wrap_pass(rp.pad_rows, qualname="tests.programs.replay_passes:pad_rows")(_traced_cuda(), [])
        with pytest.raises(ValueError):
            wrap_pass(rp.explode, qualname="tests.programs.replay_passes:explode")(_traced(), [])
    finally:
        session.stop()
        dist.destroy_process_group()
    _manifest(d, 4)
    return d


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def _run(d: Path, name: str, **kw):
    from graphtrain_inspect.inspector.read.capture_index import open_capture
    from graphtrain_inspect.inspector.replay.plan import select
    from graphtrain_inspect.inspector.replay.replayer import Replayer

    cap = open_capture(str(d))
    fn = kw.pop("fn", None)
    return Replayer(cap, select(cap, name, None, None), fn=fn, **kw).run()


def test_partial_from_the_registry_keeps_its_configuration(small):
    out = _run(small, "scale_output")
    assert out.reproduced, out.reason
    assert "as bound in tests.programs.replay_passes:PASSES" in out.pass_fn.description


def test_rank_dependent_pass_sees_the_captured_rank(small):
    import torch.distributed as dist

    out = _run(small, "add_rank")
    assert out.reproduced, out.reason
    assert out.world.env["RANK"] == "3" and out.world.env["LOCAL_RANK"] == "1" and out.world.env["WORLD_SIZE"] == "4"
    assert "rank 3 of 4" in out.world.process_group and "groups 0, 1" in out.world.process_group, out.world
    assert not out.world.notes
    assert not dist.is_initialized()  # the fake world is gone after the pass


def test_a_pass_that_raised_in_training_reproduces_by_raising(small):
    out = _run(small, "explode")
    assert out.reproduced and "raised ValueError as in training" in out.reason
    assert isinstance(out.exception, ValueError)


def test_fn_from_a_file_path(small, tmp_path):
    f = tmp_path / "candidate.py"
    f.write_text("def add_rank(gm, example_inputs):\n    return gm\n")
    out = _run(small, "add_rank", fn=f"{f}:add_rank")
    assert not out.reproduced and out.diff.counts["removed"] == 2


def test_graph_on_cuda_replays_without_a_gpu(small):
    """Fake tensors on cuda devices load and run through a pass without a GPU (this machine's
    torch may not even be built with CUDA)."""
    out = _run(small, "pad_rows")
    assert out.reproduced, out.reason
    assert out.view.tables.root.nodes[0]["val"]["device"] == "cuda:1"
    assert any(l["device"] == "cuda:1" for l in out.view.devices["literals"])


def test_gpu_capture_of_another_torch_replays_here(tmp_path):
    """tests/programs/replay_h200_cuda_device_literal.tar.xz: the sample (--device cuda --bug
    device-literal) captured on 2 H200 GPUs with torch 2.11. Its fake cuda tensors load and replay
    on this CPU machine; another host's capture needs trust; the fix makes the findings go."""
    import tarfile

    from graphtrain_inspect.inspector.read.capture_index import open_capture
    from graphtrain_inspect.inspector.replay.plan import Refused, check_origin, peers, select
    from graphtrain_inspect.inspector.replay.replayer import Replayer, check_delta
    from graphtrain_inspect.samples import bugs

    with tarfile.open(Path(__file__).parents[1] / "programs" / "replay_h200_cuda_device_literal.tar.xz") as tf:
        members = [m for m in tf.getmembers() if m.isfile() or m.isdir()]
        assert all(not m.name.startswith(("/", "..")) and ".." not in m.name.split("/") for m in members)
        tf.extractall(tmp_path, members=members)
    cap = open_capture(str(tmp_path / "gpu"))
    assert cap.header(1)["torch_version"].startswith("2.11")
    with pytest.raises(Refused, match="it is unsigned.*--trust"):  # recorded elsewhere: not signed by this user's key
        check_origin(cap, [1], trust=False)
    saved = bugs.active()
    try:
        setup = ["tests.programs.replay_sample:bugs_from_argv"]
        t = select(cap, "place_devices", 1, None)
        out = Replayer(cap, t, trust=True, setup=setup).run()
        assert out.reproduced, out.reason
        assert out.view.tables.root.nodes[0]["val"]["device"] == "cuda:1"
        fixed = Replayer(cap, t, trust=True, setup=setup, fn="tests.programs.replay_sample:place_devices_fixed")
        outs = {1: fixed.run(), **fixed.run_peers()}
        assert not outs[1].reproduced
        delta = check_delta(cap, t, outs, peers(cap, t))
        assert delta.gone and all(f.kind == "device-baked" for f in delta.gone) and not delta.new
    finally:
        bugs.reset()
        bugs.enable(saved)


def test_replay_that_cannot_load_says_so_in_json(tmp_path):
    """A setup hook that cannot be imported: one line on stderr, and with --json a `cannot-load`
    verdict naming the pass application (the JSON path once named a helper that had moved)."""
    import tarfile

    from tests.capture_utils import run_cli

    with tarfile.open(Path(__file__).parents[1] / "programs" / "replay_h200_cuda_device_literal.tar.xz") as tf:
        tf.extractall(tmp_path, members=[m for m in tf.getmembers() if m.isfile() or m.isdir()])
    r = run_cli(
        "replay",
        str(tmp_path / "gpu"),
        "--pass",
        "place_devices",
        "--rank",
        "1",
        "--batch",
        "--json",
        "--trust",
        "--setup",
        "nosuchmod:f",
    )
    doc = json.loads(r.stdout)
    assert (doc["verdict"], doc["pass"], doc["rank"]) == ("cannot-load", "place_devices", 1)
    assert "cannot import nosuchmod" in doc["reason"]
    assert r.stderr.strip().splitlines() == [
        "graphtrain-inspect replay: cannot import nosuchmod: ModuleNotFoundError: No module named 'nosuchmod'"
    ]
