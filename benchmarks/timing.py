"""The one timing helper of every case: a command run as a fresh process (wall, CPU, peak RSS,
its memory at exit, its first output line), repeats with the load average read before each, and
their median and best.

A case times what a user runs: a fresh process of the installed code, its logs already in the
page cache (`warm`), the package's bytecode written first (`compiled`, as an install has it).
`base_env` runs the same commands with an earlier checkout's code, for a before/after in one run.
"""

from __future__ import annotations

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


def cli(*args: str) -> list[str]:
    """`graphtrain-inspect ARGS` as a command for `timed`, which then also reports its memory at exit."""
    return [sys.executable, "-c", _CLI_WITH_MEMORY, *args]


def status_mb(text: str, key: str) -> float:
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return float(line.split()[1]) / 1024
    return float("nan")


def timed(
    cmd: list[str], *, first_line: bool = False, env: dict | None = None, cwd: Path | None = None, stderr=None
) -> dict:
    """Run `cmd` (in `env`, default this checkout's) to its end. Returns `s` (wall seconds),
    `first_s` (to its first stdout line, with `first_line`), `cpu_s` (user and system, its waited
    children included), `rss_mb` (peak RSS), `rc`, `out` (stdout bytes) and, for `cli(...)`
    commands, `anon_mb` and `file_mb` (its anonymous and file-backed RSS at exit)."""
    mem = tempfile.NamedTemporaryFile(prefix="gti-mem-", delete=False)
    mem.close()
    t0 = time.perf_counter()
    p = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if stderr is None else stderr,
        env={**(env or project_env()), "GTI_BENCH_MEM": mem.name},
        cwd=cwd or ROOT,
    )
    assert p.stdout is not None
    first = None
    if first_line:
        p.stdout.readline()
        first = time.perf_counter() - t0
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    text = Path(mem.name).read_text()
    os.unlink(mem.name)
    return {
        "s": wall,
        "first_s": first,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "rss_mb": usage.ru_maxrss / 1024,
        "rc": p.returncode,
        "out": out,
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


def spread(runs: list[dict], key: str = "s") -> dict:
    """Median, min and max of one figure over the runs, rounded for printing."""
    values = [r[key] for r in runs]
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3), "max": round(max(values), 3)}


def in_process(fn: Callable[[], object]) -> dict:
    """`fn()` timed in this process: wall and CPU seconds, and the result."""
    t0, c0 = time.perf_counter(), time.process_time()
    result = fn()
    return {"s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "result": result}


def peak_rss_mb() -> float:
    """This process's peak RSS so far."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def logs_of(cap: Path) -> list[Path]:
    """A capture's per-rank logs."""
    from graphtrain_inspect.capture import logformat

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
