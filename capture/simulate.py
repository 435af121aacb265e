"""`capture --simulate-world N`: the ranks of an N-rank job, each run as its own process on this
machine with the environment torchrun would give it, on torch's fake process group.

The launcher side (no torch here): which ranks to run, their environment, and running a few at a
time. The in-process side (the fake backend, the early stop) is `fake_world`.

Which ranks by default. A literal baked from the rank, the local rank, the host (group rank) or a
mesh coordinate is found by comparing ranks where that value differs, and attributed by matching
the per-rank values against each of these vectors; so the chosen ranks must (a) include the first
and last value of each, and (b) tell every two of them apart (ranks 0 and N-1 alone give tp and ep
the same vector (0, 1) on a (dp, tp, ep) mesh). The mesh is not known before the script runs:
it comes from `--mesh dp=4,tp=2,ep=2` when given, else from rank 0's own capture, which runs
first (its rank table lists its meshes); then the other ranks are chosen and run.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from graphtrain_inspect.capture.shared import logformat, rank_ranges
from graphtrain_inspect.capture.shared.node_ranks import Meshes

DEFAULT_LOCAL_WORLD_SIZE = 8
MAX_WORLD = 1 << 16


class SimulateError(ValueError):
    """A bad --simulate-* option: one line for the user."""


# -- options -----------------------------------------------------------------------------------


def parse_ranks(text: str, world: int) -> list[int]:
    try:
        return rank_ranges.parse_ranks(text, world)
    except ValueError as e:
        raise SimulateError(f"--simulate-ranks: {e}") from None


def parse_mesh(text: str, world: int) -> tuple[list[str], list[int]]:
    """'dp=4,tp=2,ep=2' -> (names, shape); the product must be the world size."""
    names: list[str] = []
    shape: list[int] = []
    for part in text.split(","):
        name, _, size = part.strip().partition("=")
        try:
            n = int(size)
        except ValueError:
            raise SimulateError(f"--mesh: {part!r} is not NAME=SIZE (e.g. dp=4,tp=2,ep=2)") from None
        if not name or n < 1:
            raise SimulateError(f"--mesh: {part!r} is not NAME=SIZE with SIZE >= 1")
        names.append(name)
        shape.append(n)
    prod = 1
    for n in shape:
        prod *= n
    if prod != world:
        raise SimulateError(
            f"--mesh {text}: {' x '.join(map(str, shape))} = {prod} ranks, not the {world} of --simulate-world"
        )
    return names, shape


format_ranks = rank_ranges.format_ranks


# -- the torchrun environment ------------------------------------------------------------------


def torchrun_env(rank: int, world: int, local_world_size: int, run_id: str) -> dict[str, str]:
    """What torchrun's local elastic agent sets in a worker (torch/distributed/elastic/agent/server/
    local_elastic_agent.py), for a job of `world` ranks on hosts of `local_world_size` GPUs. The
    master address is never contacted: the fake backend has no rendezvous."""
    k = local_world_size
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank % k),
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(k),
        "GROUP_RANK": str(rank // k),
        "GROUP_WORLD_SIZE": str((world + k - 1) // k),
        "ROLE_RANK": str(rank),
        "ROLE_NAME": "default",
        "ROLE_WORLD_SIZE": str(world),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500",
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_RUN_ID": run_id,
        "TORCHELASTIC_USE_AGENT_STORE": "False",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
    }


# -- which ranks ---------------------------------------------------------------------------------


def meshes_from_table(table: dict[str, Any], world: int) -> Meshes:
    """Coordinates of every rank from one rank's captured rank table (`gti_ranks`): each mesh that
    holds all `world` ranks names where each rank sits."""
    m = Meshes()
    best_split = -1
    for i, mesh in enumerate(table.get("meshes") or []):
        if not isinstance(mesh, dict) or not isinstance(mesh.get("shape"), list):
            continue
        shape = mesh["shape"]
        names = mesh.get("dim_names") or [f"mesh{i}.{d}" for d in range(len(shape))]
        flat: list[Any] = []

        def walk(x: Any, idx: tuple) -> None:
            if isinstance(x, list):
                for j, y in enumerate(x):
                    walk(y, (*idx, j))
            else:
                flat.append((x, idx))

        walk(mesh.get("mesh"), ())
        ranks = [r for r, _ in flat]
        if sorted(r for r in ranks if isinstance(r, int)) != list(range(world)):
            continue  # a sub-mesh (mesh["tp"]) holds only this rank's slice
        for d, name in enumerate(names):
            key = str(name)
            if key in m.coords:
                continue
            col = [0] * world
            for r, idx in flat:
                col[r] = idx[d]
            m.coords[key] = col
        # named after the full-world mesh that splits the world most (torchtitan builds several:
        # (pp, batch, cp, tp), (pp, dp_replicate, efsdp, ep), ...), the first of those on a tie
        split = sum(1 for n in shape if n > 1)
        if not m.source or split > best_split:
            best_split = split
            m.source = f"rank 0's mesh ({', '.join(map(str, names))}) = ({', '.join(map(str, shape))})"
    return m


def rank_table_of(directory: str, rank: int) -> dict[str, Any] | None:
    """The last rank table (`gti_ranks`) in a rank's log, or None."""
    path = os.path.join(directory, logformat.log_file_name(rank))
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    table = None
    for _lineno, line, payload_lines in logformat.split_records(data):
        try:
            env = logformat.parse_envelope_line(line)
            if logformat.record_kind(env) == logformat.RANKS:
                table = logformat.decode_payload(payload_lines, env)
        except logformat.FormatError:
            continue
    return table if isinstance(table, dict) else None


# -- running ranks -------------------------------------------------------------------------------


@dataclass
class RankRun:
    rank: int
    code: int | None = None
    signal: str | None = None
    wall_s: float = 0.0
    max_rss_kb: int = 0
    stopped_early: bool = False


def parallelism(max_rss_kb: int) -> tuple[int, str]:
    """How many ranks at once: one per core, and no more than fit in 70% of the memory available
    now at the peak memory of the first rank."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    avail_kb = _mem_available_kb()
    by_mem = max(1, int(avail_kb * 0.7) // max_rss_kb) if avail_kb and max_rss_kb else cores
    n = max(1, min(cores, by_mem))
    why = f"{cores} cores" + (
        f", {avail_kb // 1024} MB available at {max_rss_kb // 1024} MB per rank" if avail_kb and max_rss_kb else ""
    )
    return n, why


def _mem_available_kb() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


_RUNNING: dict[int, subprocess.Popen] = {}


def signal_running(signum: int) -> None:
    """Pass a signal on to the simulated ranks running now (a terminal's Ctrl-C reached them already)."""
    import signal as _signal

    if signum == _signal.SIGINT:
        return
    for p in list(_RUNNING.values()):
        try:
            p.send_signal(signum)
        except OSError:
            pass


def _output_file(path: str | None) -> Any:
    """A rank's output file in the capture, made here (O_EXCL, no link followed: nothing planted
    under its name is written through); /dev/null without one."""
    if path is None:
        return open(os.devnull, "wb")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.fdopen(os.open(path, flags, 0o644), "wb")


def run_ranks(
    cmd: list[str],
    ranks: list[int],
    env_of: Callable[[int], dict[str, str]],
    at_once: int,
    stop_flag: Callable[[], bool],
    on_done: Callable[[RankRun], None] | None = None,
) -> list[RankRun]:
    """Run the command once per rank, at most `at_once` at a time, each its own process; a rank's
    stdout and stderr go to the file `env_of(rank)["__GTI_OUTPUT__"]` names. Peak memory per rank
    comes from wait4 (ru_maxrss of that child)."""
    import signal as _signal

    pending = list(ranks)
    running: dict[int, tuple[RankRun, float]] = {}
    done: list[RankRun] = []
    while pending or running:
        while pending and len(running) < at_once and not stop_flag():
            r = pending.pop(0)
            env = env_of(r)
            out = env.pop("__GTI_OUTPUT__", None)
            try:
                with _output_file(out) as fh:
                    p = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)
            except OSError as e:
                print(f"graphtrain-inspect capture: cannot run {cmd[0]!r} for rank {r}: {e}", file=sys.stderr)
                done.append(RankRun(rank=r, code=127))
                continue
            _RUNNING[p.pid] = p
            running[p.pid] = (RankRun(rank=r), time.perf_counter())
        if not running:
            break
        try:
            pid, status, usage = os.wait4(-1, 0)
        except ChildProcessError:
            break
        if pid not in running:
            continue
        p = _RUNNING.pop(pid)
        p.returncode = code = os.waitstatus_to_exitcode(status)
        rr, t0 = running.pop(pid)
        rr.wall_s = time.perf_counter() - t0
        rr.max_rss_kb = int(usage.ru_maxrss)
        if code < 0:
            rr.signal, rr.code = _signal.Signals(-code).name, 128 - code
        else:
            rr.code = code
        done.append(rr)
        if on_done is not None:
            on_done(rr)
    return sorted(done, key=lambda x: x.rank)


def command_problem(cmd: list[str]) -> str | None:
    """--simulate-world starts each rank itself: a launcher in the command would start its own."""
    base = os.path.basename(cmd[0])
    if base in ("torchrun", "mpirun", "srun") or (
        len(cmd) > 2 and cmd[1] == "-m" and cmd[2] in ("torch.distributed.run", "torch.distributed.launch")
    ):
        return (
            f"--simulate-world runs the command once per simulated rank itself: give the worker command "
            f"(`python train.py ...`), not {shlex.join(cmd[:3])}"
        )
    return None
