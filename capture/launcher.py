"""`graphtrain-inspect capture [options] -- COMMAND ...`: run COMMAND unchanged, captured on every rank.

The launcher never imports torch: it prepares the environment that every worker inherits
(bootstrap sitecustomize first on PYTHONPATH, GTI_* settings, Inductor caches off, their keys
recorded), runs the command, relays signals, writes the manifest, and prints a summary read back
from the logs. Its parts: out_claim.py (the capture folder made this run's), manifest.py,
simulated_launch.py (`--simulate-world`), launch_summary.py (what is printed at the end).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

from graphtrain_inspect.capture import nodes, session
from graphtrain_inspect.capture.cache_keys import ENV_CACHE_KEYS
from graphtrain_inspect.capture.launch_summary import DISK_FULL_BYTES, free_bytes, print_summary, unresolved_passes
from graphtrain_inspect.capture.manifest import end_manifest, first_manifest, manifest_path, signed_line, write_manifest
from graphtrain_inspect.capture.named_passes import TargetError, parse_target
from graphtrain_inspect.capture.out_claim import ClaimRefused, claim, release, release_part
from graphtrain_inspect.capture.pass_lookup import why_unresolvable
from graphtrain_inspect.capture.shared import node_ranks
from graphtrain_inspect.capture.simulated_launch import simulate_options_problem, simulated_run
from graphtrain_inspect.capture.summary import summarize

# The caches that would let a captured run skip passes, turned off for it: on a warm FX graph or
# AOTAutograd cache Inductor runs no pass at all, and a dynamo profile left by an earlier run (PGO)
# makes the next run trace other graphs (dynamic from the start). The kernel caches stay on: a
# kernel compiled from the same source is the same binary, and TORCHINDUCTOR_FORCE_DISABLE_CACHES=1
# (which compiled every kernel afresh, in a new cache directory per graph) cost a 4-rank CPU
# capture twice the CPU time for the same records. A user's own settings of these win. What the
# FX graph cache would have shared across ranks is not lost: each compile's key is computed as
# torch computes it and recorded (capture/cache_keys.py).
PASS_SKIPPING_CACHES_OFF = {
    "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
    "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE": "0",
    "TORCHINDUCTOR_AUTOGRAD_CACHE": "0",
    "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE": "0",
    "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO": "0",
    "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_REMOTE_PGO": "0",
}


def fx_cache_off(env: dict[str, str]) -> bool:
    """The user's environment turns Inductor's FX graph cache off, as torch reads it ("0"; the
    worker sees TORCHINDUCTOR_FORCE_DISABLE_CACHES itself)."""
    forced = env.get("TORCHINDUCTOR_FX_GRAPH_CACHE")
    return forced == "0" if forced is not None else env.get("TORCHINDUCTOR_FX_GRAPH_CACHE_DEFAULT") == "0"


class _CommandFormatter(argparse.HelpFormatter):
    """argparse's own usage, with the command after `--` named (argparse prints a bare `...`)."""

    def _format_args(self, action: argparse.Action, default_metavar: str) -> str:
        if action.nargs == argparse.REMAINDER:
            return "-- COMMAND [ARGS ...]"
        return super()._format_args(action, default_metavar)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.formatter_class = _CommandFormatter
    p.add_argument("--out", metavar="DIR", help="capture directory (default: a fresh ./gti-capture-<time>)")
    p.add_argument(
        "--pass",
        dest="passes",
        action="append",
        default=[],
        metavar="MODULE:FUNC",
        help="capture this pass function (or Class.method, or a module-level list of passes); repeatable",
    )
    p.add_argument(
        "--ranks",
        metavar="LIST",
        help="record only these ranks of the job (0-7,512; auto: a few that cover every rank, local rank and "
        "host); the others run untouched. Default: every rank",
    )
    p.add_argument("--no-inductor", action="store_true", help="do not capture Inductor's own passes")
    p.add_argument("--no-blobs", action="store_true", help="do not store GraphPickler copies (no replay)")
    p.add_argument(
        "--torch-trace",
        action="store_true",
        help="also write torch's own TORCH_TRACE logs to DIR/torch_trace, beside ours: torch.compile's own events "
        "(graph breaks, recompiles, failed compiles) for ls, check and the TUI",
    )
    sim = p.add_argument_group("simulated world (no GPUs, no real communication: torch's fake process group)")
    sim.add_argument(
        "--simulate-world",
        type=int,
        metavar="N",
        help="run the ranks of an N-rank job here, each its own process with torchrun's environment, "
        "init_process_group and init_device_mesh on the fake backend; COMMAND is the worker (python "
        "train.py), not torchrun",
    )
    sim.add_argument(
        "--simulate-ranks",
        metavar="LIST",
        help="which ranks (0,3,9-15); default: a few that cover every mesh coordinate and local rank",
    )
    sim.add_argument(
        "--local-world-size", type=int, default=None, metavar="K", help="GPUs per simulated host (default 8)"
    )
    sim.add_argument(
        "--mesh",
        metavar="NAME=SIZE,...",
        help="the job's device mesh (dp=4,tp=2,ep=2) for the default rank choice; default: rank 0's own mesh, "
        "read from its capture",
    )
    sim.add_argument(
        "--stop-after-passes",
        action="store_true",
        help="end each simulated rank once its passes ran: at the first call of a graph a named pass returned "
        "(a graph trainer's step), or at its first optimizer step (torch.compile); what runs later on a fake "
        "backend computes garbage",
    )
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="COMMAND", help="the command to run, after --")


def _fail(msg: str) -> int:
    print(f"graphtrain-inspect capture: {msg}", file=sys.stderr)
    return 2


def _default_out() -> str:
    base = time.strftime("gti-capture-%Y%m%d-%H%M%S")
    out, i = base, 1
    while os.path.exists(out):
        i += 1
        out = f"{base}-{i}"
    return out


def run(args: argparse.Namespace) -> int:
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    problem = _arguments_problem(args, cmd)
    if problem:
        return _fail(problem)
    out = os.path.abspath(args.out or _default_out())
    node = nodes.node_of(cmd, os.environ)
    joined = False  # this node joined a folder another node of the job claimed (capture/nodes.py)
    try:
        made = claim(out)
        nodes.claim_part(out, node)
    except (ClaimRefused, nodes.JoinRefused) as e:
        try:
            if not isinstance(e, ClaimRefused):
                release(out, made)
                raise
            nodes.join(out, node, str(e))
            made, joined = False, True
        except nodes.JoinRefused as refused:
            return _fail(f"{refused} (nothing was run)")

    run_id = uuid.uuid4().hex  # every rank's header names it: a log of another run is told apart
    env = _worker_env(args, out, run_id)
    if args.torch_trace:
        try:  # made here, as --out is: torch's own makedirs would follow the umask (a group-writable folder)
            os.mkdir(os.path.join(out, "torch_trace"), 0o755)
        except OSError:
            pass
    env[nodes.ENV_PART] = node.part
    manifest = first_manifest(args, cmd, env, run_id)
    manifest["node"] = node.record()
    manifest["record_ranks"] = args.ranks
    try:
        if not joined:
            write_manifest(out, manifest, first=True)
        write_manifest(nodes.part_dir(out, node), manifest, first=True)
    except OSError as e:
        release_part(out, made, node, joined)
        return _fail(f"cannot write {manifest_path(out)}: {e.strerror or e} (nothing was run)")

    if args.simulate_world:
        code, sig = simulated_run(cmd, env, args, out, manifest)
    else:
        try:
            child = subprocess.Popen(cmd, env=env)
        except OSError as e:
            # Nothing ran: leave --out as it was, so the same command, fixed, can use it.
            release_part(out, made, node, joined)
            return _fail(f"cannot run {cmd[0]!r}: {e.strerror or e} (nothing was run; {out} left as it was)")
        code, sig = _wait_child(child)

    return _after_command(args, out, node, joined, manifest, code, sig)


def _after_command(
    args: argparse.Namespace,
    out: str,
    node: nodes.Node,
    joined: bool,
    manifest: dict[str, Any],
    code: int,
    sig: str | None,
) -> int:
    """Once the command ended: the manifest completed from the logs and written, the capture
    signed, the summary printed; the exit status."""
    others = nodes.others_ranks(out, node)  # ranks of other nodes sharing --out: theirs to tell
    summaries = [s for s in summarize(out) if s.rank not in others]
    free = free_bytes(out)
    disk_full = (free is not None and free < DISK_FULL_BYTES) or any(
        "ENOSPC" in (s.stopped or "") or "EDQUOT" in (s.stopped or "") for s in summaries
    )
    end_manifest(manifest, summaries, code, sig, free, disk_full)
    signed = ""
    if not os.path.isdir(out):
        print(
            f"graphtrain-inspect capture: the capture directory {out} was removed while the command ran; "
            "nothing was kept",
            file=sys.stderr,
        )
    else:
        for where in ([] if joined else [out]) + [nodes.part_dir(out, node)]:
            try:
                write_manifest(where, manifest)
            except OSError as e:
                print(f"graphtrain-inspect capture: could not update {manifest_path(where)}: {e}", file=sys.stderr)
        signed = signed_line(out)
    print_summary(out, args, summaries, code, sig, signed, disk_full, free, node)
    unresolved = unresolved_passes(summaries)
    for target, why in unresolved.items():
        print(
            f"graphtrain-inspect capture: --pass {target}: not captured: {why} (the workers could not resolve it; "
            "the training ran unchanged)",
            file=sys.stderr,
        )
    # the training's own failure first; else a pass asked for and never captured is a wrong argument
    return code or (2 if unresolved else 0)


def _arguments_problem(args: argparse.Namespace, cmd: list[str]) -> str | None:
    """Why the command cannot be run as given (nothing run, nothing written), or None."""
    if not cmd:
        return "no command given: graphtrain-inspect capture [options] -- torchrun --nproc-per-node 2 train.py"
    for t in args.passes:
        try:
            parse_target(t)
        except TargetError as e:
            return str(e)
        unresolvable = why_unresolvable(t)  # a typo ends here, before any training runs
        if unresolvable:
            return f"{unresolvable} (nothing was run)"
    if args.ranks is not None:
        problem = node_ranks.rank_spec_problem(args.ranks)
        if problem or args.simulate_world:
            return problem or "--ranks chooses ranks of a real job; with --simulate-world, --simulate-ranks"
    sim_problem = simulate_options_problem(args, cmd)
    if sim_problem:
        return sim_problem
    problem = _command_problem(cmd[0])
    if problem:
        return f"{problem} (nothing was run, nothing was written)"
    return None


def _worker_env(args: argparse.Namespace, out: str, run_id: str) -> dict[str, str]:
    """The command's environment: the bootstrap on PYTHONPATH (it starts the capture in every
    worker) and the capture's settings."""
    env = dict(os.environ)
    here = os.path.dirname(os.path.abspath(__file__))
    bootstrap = os.path.join(here, "bootstrap")
    env["PYTHONPATH"] = os.pathsep.join([bootstrap, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    env["GTI_CAPTURE_HOME"] = here  # the capture package, for workers of another Python (bootstrap)
    env[session.ENV_DIR] = out
    env[session.ENV_PASSES] = "\n".join(args.passes)
    env[session.ENV_INDUCTOR] = "0" if args.no_inductor else "1"
    env[session.ENV_BLOBS] = "0" if args.no_blobs else "1"
    env[session.ENV_RUN_ID] = run_id
    if args.ranks:
        env[nodes.ENV_RANKS] = args.ranks.strip()
    if not args.no_inductor:
        # the keys the run's FX graph cache would have filed each compile under, unless the user
        # turned that cache off (capture/cache_keys.py); taken before the capture turns it off
        env.setdefault(ENV_CACHE_KEYS, "0" if fx_cache_off(env) else "1")
        for name, value in PASS_SKIPPING_CACHES_OFF.items():
            env.setdefault(name, value)
    if args.torch_trace:
        env["TORCH_TRACE"] = os.path.join(out, "torch_trace")
    return env


def _command_problem(exe: str) -> str | None:
    """Why the command cannot start, found before anything is claimed (None if it may)."""
    if os.sep in exe:
        if not os.path.exists(exe):
            return f"cannot run {exe!r}: no such file"
        if os.path.isdir(exe) or not os.access(exe, os.X_OK):
            return f"cannot run {exe!r}: not an executable file"
        return None
    if shutil.which(exe) is None:
        return f"cannot run {exe!r}: no such command on PATH"
    return None


def _wait_child(child: subprocess.Popen) -> tuple[int, str | None]:
    """Wait for the command, which runs in our process group, so a terminal's Ctrl-C reaches it as
    it would; other signals are relayed."""
    received: list[str] = []

    def relay(signum: int, _frame: Any) -> None:
        received.append(signal.Signals(signum).name)
        # A terminal's Ctrl-C already went to the whole foreground group; anything else
        # (kill, a scheduler) reached only us, so pass it on.
        if signum != signal.SIGINT or not _in_foreground():
            try:
                child.send_signal(signum)
            except OSError:
                pass

    old = {s: signal.signal(s, relay) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        while True:
            try:
                code = child.wait()
                break
            except KeyboardInterrupt:
                continue
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if code < 0:
        return 128 - code, signal.Signals(-code).name
    return code, (received[0] if received else None)


def _in_foreground() -> bool:
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except OSError:
        return False
