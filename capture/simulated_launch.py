"""`capture --simulate-world N`: the chosen ranks of a simulated world run a few at a time on a
fake process group (capture/simulate.py), rank 0 first and alone.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from functools import partial
from typing import Any, Callable

from graphtrain_inspect.capture import fake_world, simulate
from graphtrain_inspect.capture.manifest import write_manifest
from graphtrain_inspect.capture.shared import node_ranks


def simulate_options_problem(args: argparse.Namespace, cmd: list[str]) -> str | None:
    if args.simulate_world is None:
        if args.simulate_ranks or args.local_world_size or args.mesh or args.stop_after_passes:
            return "--simulate-ranks, --local-world-size, --mesh and --stop-after-passes need --simulate-world N"
        return None
    n = args.simulate_world
    if not 1 <= n <= simulate.MAX_WORLD:
        return f"--simulate-world {n}: give a world size from 1 to {simulate.MAX_WORLD}"
    k = args.local_world_size or simulate.DEFAULT_LOCAL_WORLD_SIZE
    if k < 1:
        return f"--local-world-size {k}: give at least 1"
    args.local_world_size = min(k, n)
    try:
        args.simulate_rank_list = simulate.parse_ranks(args.simulate_ranks, n) if args.simulate_ranks else None
        args.mesh_shape = simulate.parse_mesh(args.mesh, n) if args.mesh else None
    except simulate.SimulateError as e:
        return str(e)
    return simulate.command_problem(cmd)


def simulated_run(
    cmd: list[str], env: dict[str, str], args: argparse.Namespace, out: str, manifest: dict[str, Any]
) -> tuple[int, str | None]:
    """Run the chosen ranks of the simulated world, a few at a time; rank 0 first and alone
    (its peak memory sizes the rest, and its rank table gives the mesh for the default choice)."""
    n, k = args.simulate_world, args.local_world_size
    say = lambda s: print(f"graphtrain-inspect capture: {s}", file=sys.stderr, flush=True)  # noqa: E731
    sim: dict[str, Any] = {
        "world_size": n,
        "local_world_size": k,
        "backend": "fake",
        "ranks": [],
        "chosen_by": None,
        "reasons": [],
        "mesh_source": None,
        "stop_after_passes": bool(args.stop_after_passes),
        "at_once": None,
        "per_rank": {},
    }
    manifest["simulated"] = sim
    try:
        os.mkdir(os.path.join(out, "simulate"), 0o755)
    except FileExistsError:
        pass
    run_id = f"gti-simulated-{os.getpid()}"
    received: list[str] = []

    env_of = partial(_rank_env, env, n, k, run_id, bool(args.stop_after_passes), out)
    record = partial(_record_rank, sim, out, manifest, say)

    def relay(signum: int, _frame: Any) -> None:
        received.append(signal.Signals(signum).name)
        simulate.signal_running(signum)

    old = {s: signal.signal(s, relay) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        explicit = getattr(args, "simulate_rank_list", None)
        first = [explicit[0]] if explicit else [0]
        say(f"simulating {n} ranks on hosts of {k} (fake process group); rank {first[0]} first")
        runs = simulate.run_ranks(cmd, first, env_of, 1, lambda: bool(received), record)
        ranks = _simulated_ranks(args, out, sim, say)
        sim["ranks"] = ranks
        rest = [r for r in ranks if r != first[0]]
        if runs and runs[0].code and rest:
            # the others would fail the same way: say so rather than run hundreds of them
            say(f"rank {first[0]} failed (exit {runs[0].code}); the other {len(rest)} ranks were not run")
            sim["not_run"] = rest
            rest = []
        at_once, why = simulate.parallelism(max(rr.max_rss_kb for rr in runs) if runs else 0)
        sim["at_once"] = at_once
        if rest and not received:
            say(f"running {len(rest)} more ranks, {at_once} at a time ({why})")
            runs += simulate.run_ranks(cmd, rest, env_of, at_once, lambda: bool(received), record)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    sim["chosen"] = sim["ranks"]
    sim["ranks"] = sorted(rr.rank for rr in runs)  # those that ran
    bad = [rr for rr in runs if rr.code]
    code = bad[0].code if bad else 0
    sig = received[0] if received else (bad[0].signal if bad else None)
    return int(code or 0), sig


def _rank_env(env: dict[str, str], n: int, k: int, run_id: str, stop: bool, out: str, rank: int) -> dict[str, str]:
    """The environment of one simulated rank: torchrun's variables, the fake world's size and stop."""
    e = dict(env)
    e.update(simulate.torchrun_env(rank, n, k, run_id))
    e[fake_world.ENV_WORLD] = str(n)
    e[fake_world.ENV_STOP] = "1" if stop else "0"
    # torchrun sets one thread per worker when a host runs several; so do we (several run at once)
    e.setdefault("OMP_NUM_THREADS", "1")
    e["__GTI_OUTPUT__"] = os.path.join(out, "simulate", f"rank_{rank}.out")
    return e


def _record_rank(
    sim: dict[str, Any], out: str, manifest: dict[str, Any], say: Callable[[str], None], rr: simulate.RankRun
) -> None:
    """A simulated rank that ended: into the manifest (written again), said, its output's tail
    printed where it failed."""
    sim["per_rank"][str(rr.rank)] = {
        "exit_code": rr.code,
        "signal": rr.signal,
        "wall_s": round(rr.wall_s, 3),
        "max_rss_mb": round(rr.max_rss_kb / 1024, 1),
    }
    state = f"exit {rr.code}" + (f" ({rr.signal})" if rr.signal else "")
    say(
        f"rank {rr.rank} done: {state}, {rr.wall_s:.1f} s, {rr.max_rss_kb // 1024} MB peak; output in "
        f"{os.path.join(out, 'simulate', f'rank_{rr.rank}.out')}"
    )
    if rr.code:
        _print_tail(os.path.join(out, "simulate", f"rank_{rr.rank}.out"))
    try:
        write_manifest(out, manifest)
    except OSError:
        pass


def _simulated_ranks(args: argparse.Namespace, out: str, sim: dict[str, Any], say: Callable[[str], None]) -> list[int]:
    """The ranks to simulate (noted in `sim`): those named, else a choice covering each mesh
    coordinate (the mesh from --mesh, or from rank 0's rank table, once it ran)."""
    n, k = args.simulate_world, args.local_world_size
    explicit = getattr(args, "simulate_rank_list", None)
    if explicit:
        sim["chosen_by"] = "--simulate-ranks"
        sim["reasons"] = [f"rank {r}: named" for r in explicit]
        return explicit
    meshes = node_ranks.Meshes()
    if getattr(args, "mesh_shape", None):
        names, shape = args.mesh_shape
        meshes = node_ranks.Meshes(node_ranks.mesh_coords(names, shape), f"--mesh {args.mesh}")
    else:
        table = simulate.rank_table_of(out, 0)
        if table:
            meshes = simulate.meshes_from_table(table, n)
    ranks, sim["reasons"] = node_ranks.choose_ranks(n, k, meshes)
    sim["chosen_by"] = "default"
    sim["mesh_source"] = meshes.source or None
    how = meshes.source or "no mesh spanning the world in rank 0's capture: ranks, local ranks and hosts only"
    say(f"ranks chosen ({how}): {simulate.format_ranks(ranks)}")
    for line in sim["reasons"]:
        say(f"  {line}")
    return ranks


def _print_tail(path: str, lines: int = 15) -> None:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            tail = f.read().decode(errors="replace").splitlines()[-lines:]
    except OSError:
        return
    for line in tail:
        print(f"    | {line}", file=sys.stderr)
