"""The one timing helper of every case: a command run as a fresh process (wall, CPU, peak RSS,
its memory at exit, its first output line), repeats with the load average read before each, and
their median and best.

A case times what a user runs: a fresh process of the installed code, its logs already in the
page cache (`warm`), the package's bytecode written first (`compiled`, as an install has it).
`base_env` runs the same commands with an earlier checkout's code, for a before/after in one run.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = ("capture", "inspector", "tui", "samples")

_COMPILED: set[Path] = set()


def compiled(checkout: Path) -> None:
    """Write the bytecode of a checkout's package folders, once per run: an install has it, while a
    machine with PYTHONDONTWRITEBYTECODE set would otherwise compile every module edited since its
    last .pyc in every timed process (0.07-0.1 s of a 1 s `check`)."""
    import compileall

    checkout = Path(checkout).resolve()
    if checkout not in _COMPILED:
        _COMPILED.add(checkout)
        for name in PACKAGE_DIRS:
            if (checkout / name).is_dir():
                compileall.compile_dir(str(checkout / name), quiet=1)


def _with_path(first: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(first), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    return env


def project_env() -> dict:
    """This checkout's code, its bytecode written, `benchmarks` importable."""
    compiled(ROOT)
    return _with_path(ROOT)


def base_env(checkout: Path, work: Path | None = None) -> dict:
    """An environment in which `graphtrain_inspect` is the code of another checkout (a git worktree
    of an earlier commit): its package folders linked under `work`/graphtrain_inspect, first on the
    path (ahead of this checkout's editable install). Exits where `checkout` has no capture/: the
    links would lead nowhere, and the editable install's code would be timed as the base's."""
    if not (Path(checkout) / "capture").is_dir():
        raise SystemExit(f"{checkout}: no checkout of the project (no capture/ in it)")
    compiled(checkout)
    work = work or Path(tempfile.mkdtemp(prefix="gti-base-"))
    pkg = work / "graphtrain_inspect"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").touch()
    for name in PACKAGE_DIRS:
        link = pkg / name
        if not link.exists():
            link.symlink_to(Path(checkout).resolve() / name)
    return _with_path(work)


# Runs the CLI and, as it exits, writes its anonymous and file-backed resident memory to the file
# named by GTI_BENCH_MEM: peak RSS alone counts the log pages a scan has mapped, which are page
# cache the kernel reclaims, not memory the tool holds.
_CLI_WITH_MEMORY = """
import atexit, os, runpy, sys
def _mem():
    with open("/proc/self/status") as f, open(os.environ["GTI_BENCH_MEM"], "w") as out:
        out.write(f.read())
atexit.register(_mem)
sys.argv[0] = "graphtrain-inspect"
runpy.run_module("graphtrain_inspect.inspector.cli", run_name="__main__")
"""


# the command line of `graphtrain-inspect`, as this Python runs it
GTI = [sys.executable, "-m", "graphtrain_inspect.inspector.cli"]


def cli(*args: str) -> list[str]:
    """`graphtrain-inspect ARGS` as a command for `timed`, which then also reports its memory at exit."""
    return [sys.executable, "-c", _CLI_WITH_MEMORY, *args]


def status_mb(text: str, key: str) -> float:
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return float(line.split()[1]) / 1024
    return float("nan")


# Runs the command as its child and reports the child's wall, CPU and peak RSS to the file named by
# GTI_BENCH_RUSAGE. The command is not started from the benchmark's own process because Linux keeps
# a process's peak RSS across exec: a child spawned (vfork or fork) from a benchmark that has grown
# to hundreds of MB would report that as its own peak. This launcher is small, and its child's peak
# is counted from there.
_LAUNCHER = """
import json, os, resource, subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)
line = p.stdout.readline()
first = time.perf_counter() - t0
rest = p.stdout.read()
rc = p.wait()
wall = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
out = line + rest
view = memoryview(out)
while view:
    view = view[os.write(1, view):]
cpu = ru.ru_utime + ru.ru_stime
with open(os.environ["GTI_BENCH_RUSAGE"], "w") as f:
    json.dump({"s": wall, "first_s": first, "cpu_s": cpu, "rss_mb": ru.ru_maxrss / 1024, "rc": rc}, f)
"""


def timed(
    cmd: list[str], *, first_line: bool = False, env: dict | None = None, cwd: Path | None = None, stderr=None
) -> dict:
    """Run `cmd` (in `env`, default this checkout's) to its end. Returns `s` (wall seconds),
    `first_s` (to its first stdout line, with `first_line`), `cpu_s` (user and system, its waited
    children included), `rss_mb` (peak RSS), `rc`, `out` (stdout bytes) and, for `cli(...)`
    commands, `anon_mb` and `file_mb` (its anonymous and file-backed RSS at exit). `stderr`: a
    file to write the command's stderr to (default: dropped)."""
    files = []
    for prefix in ("gti-mem-", "gti-rusage-"):
        f = tempfile.NamedTemporaryFile(prefix=prefix, delete=False)
        f.close()
        files.append(f.name)
    mem, rusage = files
    p = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if stderr is None else stderr,
        env={**(env or project_env()), "GTI_BENCH_MEM": mem, "GTI_BENCH_RUSAGE": rusage},
        cwd=cwd or ROOT,
        check=False,
    )
    try:
        got = json.loads(Path(rusage).read_text())
    except ValueError:  # the launcher itself failed
        got = {"s": float("nan"), "first_s": None, "cpu_s": float("nan"), "rss_mb": float("nan"), "rc": p.returncode}
    text = Path(mem).read_text()
    for name in files:
        os.unlink(name)
    return {
        **got,
        "first_s": got["first_s"] if first_line else None,
        "out": p.stdout,
        "anon_mb": status_mb(text, "RssAnon"),
        "file_mb": status_mb(text, "RssFile"),
    }


def repeated(repeat: int, run: Callable[[], dict]) -> list[dict]:
    """`run()` `repeat` times, each result with the 1-minute load average read just before it."""
    runs = []
    for _ in range(repeat):
        load = os.getloadavg()[0]
        runs.append({**run(), "load": load})
    return runs


def best(runs: list[dict], key: str = "s") -> dict:
    """The run least slowed by other work on a shared machine."""
    return min(runs, key=lambda r: r[key])


def median_of(runs: list[dict], key: str = "s") -> float:
    return statistics.median(r[key] for r in runs)


def logs_of(cap: Path) -> list[Path]:
    """A capture's per-rank logs."""
    from graphtrain_inspect.capture.shared import logformat

    return sorted(Path(cap).glob(logformat.LOG_PREFIX + "*"))


def warm(paths: list[Path]) -> None:
    """Read the files once, so every timed run finds them in the page cache."""
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


def machine_line() -> str:
    """The `#` line every case prints first: which machine, and how busy it was."""
    return (
        f"# {platform.node()}, {os.cpu_count()} CPUs, python {platform.python_version()}, "
        f"load {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d', time.gmtime())}"
    )
