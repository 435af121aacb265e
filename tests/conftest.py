"""Shared, session-scoped captures of the real sample training (2 CPU ranks, gloo).

Capturing a 2-rank torchrun costs ~10-20 s on 2 cores, so every test module that needs a capture
of the sample asks this fixture instead of running its own: each distinct configuration runs once
per test session.

    def test_x(sample_capture):
        cap_dir = sample_capture("rank-baked")               # --bug rank-baked
        cap_dir = sample_capture()                           # clean
        cap_dir = sample_capture("rank-baked", coor=True)    # compile on one rank
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import settings

from tests.capture_utils import run_cli, torchrun

# The same examples every run (and no example database carried between runs): a property test that
# fails does so on every run, and CI sees what the developer saw.
settings.register_profile("deterministic", derandomize=True, database=None)
settings.load_profile("deterministic")

SAMPLE_STEPS = "2"


def pytest_configure(config):
    """A signing key (capture.shared.signing) and a bundled-capture cache of this test session's own, so
    tests never read or make the developer's key in ~/.config, and every process they start (the
    CLI, torchrun's workers) sees the same ones; and bytecode written for those processes.

    Under `-n N` (pytest-xdist, as pyproject.toml sets it) the workers inherit the controller's
    environment: one key and one cache for the whole session, made by the controller."""
    import os
    import tempfile

    if os.environ.get("PYTEST_XDIST_WORKER"):
        config._gti_home = None  # the controller's, inherited and removed by it
        return
    config._gti_home = tempfile.mkdtemp(prefix="gti-tests-")
    os.environ["XDG_CONFIG_HOME"] = os.path.join(config._gti_home, "config")
    os.environ["XDG_CACHE_HOME"] = os.path.join(config._gti_home, "cache")
    # Every program a test starts imports this package (the CLI, the capture's launcher, each
    # torchrun worker: hundreds of processes). Where the environment says not to write bytecode
    # (PYTHONDONTWRITEBYTECODE, set on the CI machines), each of them compiled the package again:
    # 0.10-0.15 s a `check` on the 30k-node benchmark capture.
    # The first process now writes it (`__pycache__/`, ignored by git) and the others read it.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    # `check -j N` makes small work in one process (inspector/checks/parallel.py); the suite's
    # captures are small, and its `-j` tests (in process and through the CLI) must use the pool
    os.environ["GTI_CHECK_MIN_POOL_WEIGHT"] = "0"


def pytest_unconfigure(config):
    import shutil

    home = getattr(config, "_gti_home", None)
    if home:
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def made_once(tmp_path_factory, kind: str, name: str) -> Iterator[tuple[Path, bool]]:
    """(directory, whether it is still to be made) for a session-wide artifact, made once for
    the whole session: under `-n N` in a folder all workers share (their base temps' parent), the
    first worker to ask makes it while holding a lock and the others wait for it and read it. The
    caller makes `directory` when told to; an attempt that failed leaves nothing behind it."""
    import os
    import shutil

    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    where = root / "shared" / kind
    where.mkdir(parents=True, exist_ok=True)
    out, done = where / name, where / f"{name}.done"
    with FileLock(str(where / f"{name}.lock")):
        if done.exists():
            yield out, False
            return
        shutil.rmtree(out, ignore_errors=True)  # a failed attempt's leftovers
        yield out, True
        done.touch()


@pytest.fixture(scope="session")
def sample_capture(tmp_path_factory):
    cache: dict[tuple, Path] = {}

    def get(*bugs: str, coor: bool = False, blobs: bool = True, nproc: int = 2) -> Path:
        key = (tuple(sorted(bugs)), coor, blobs, nproc)
        if key not in cache:
            name = (
                "-".join([*key[0], *(["coor"] if coor else []), *([] if blobs else ["noblobs"]), f"n{nproc}"])
                or "clean"
            )
            with made_once(tmp_path_factory, "sample", name) as (out, to_make):
                if to_make:
                    _capture_sample(out, key)
            cache[key] = out
        return cache[key]

    def _capture_sample(out: Path, key: tuple) -> None:
        bugs, coor, blobs, nproc = key
        args = [
            "--steps",
            SAMPLE_STEPS,
            "--quiet",
            *[a for b in bugs for a in ("--bug", b)],
            *(["--coor"] if coor else []),
        ]
        opts = [
            "--pass",
            "graphtrain_inspect.samples.pipeline:PIPELINE",
            "--no-inductor",
            *([] if blobs else ["--no-blobs"]),
        ]
        cmd = torchrun(nproc, "graphtrain_inspect.samples.train", *args)
        r = run_cli("capture", "--out", str(out), *opts, "--", *cmd, timeout=600)
        assert r.returncode == 0, f"sample capture {out.name} failed:\n{r.stderr[-4000:]}"

    return get


@pytest.fixture(scope="session")
def compile_events_trace(tmp_path_factory) -> Path:
    """torch's own TORCH_TRACE log of tests/programs/compile_events.py (one process, aot_eager:
    two graph breaks, two restarts, two recompiles, one fullgraph=True failure; ~10 s)."""
    import os
    import subprocess
    import sys

    from tests.capture_utils import ROOT

    with made_once(tmp_path_factory, "compile_events", "trace") as (out, to_make):
        if to_make:
            env = {**os.environ, "TORCH_TRACE": str(out), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
            r = subprocess.run(
                [sys.executable, "-m", "tests.programs.compile_events"],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert r.returncode == 0 and "g failed: Unsupported" in r.stdout, r.stderr[-3000:]
    return out


# ---------------------------------------------------------------------------------------------
# The TUI's tests (tests/tui/)


@pytest.fixture(scope="session")
def tui_small_capture(tmp_path_factory) -> Path:
    """A deterministic 2-rank capture with one rank-baked constant (tests/tui_support.py)."""
    from tests.tui_support import small_capture

    return Path(small_capture(tmp_path_factory.mktemp("tui") / "small"))


@pytest.fixture(scope="session")
def bundled_capture():
    """A bundled GPU capture (samples/captures/NAME.tar.xz), unpacked once."""
    from graphtrain_inspect.inspector.read import bundled

    def get(name: str) -> Path:
        if name not in bundled.names():
            pytest.skip(f"bundled capture {name} is not in samples/captures")
        return bundled.path_of(name)

    return get


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run `async def` tests (the TUI's pilot tests) in a fresh event loop; no plugin needed."""
    import asyncio
    import inspect

    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(pyfuncitem.obj(**args))
    return True
