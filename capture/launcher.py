"""`graphtrain-inspect capture [options] -- COMMAND ...`: run COMMAND unchanged, captured on every rank.

The launcher never imports torch: it prepares the environment that every worker inherits
(bootstrap sitecustomize first on PYTHONPATH, GTI_* settings, Inductor caches off, their keys
recorded), runs the command, relays signals, writes the manifest, and prints a summary read back
from the logs.
"""

from __future__ import annotations

import argparse
import getpass
import os
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import uuid
from typing import Any, Callable

import orjson

from graphtrain_inspect.capture import fake_world, nodes, session, simulate
from graphtrain_inspect.capture.cache_keys import ENV_CACHE_KEYS
from graphtrain_inspect.capture.named_passes import TargetError, parse_target
from graphtrain_inspect.capture.pass_lookup import why_unresolvable
from graphtrain_inspect.capture.shared import logformat, node_ranks, signing
from graphtrain_inspect.capture.summary import RankSummary, summarize

# Variables that shape a run and are worth keeping in the manifest.
_ENV_PREFIXES = ("TORCH", "TORCHINDUCTOR_", "NCCL_", "GLOO_", "CUDA_", "OMP_", "PYTORCH_", "GTI_", "MASTER_", "NVIDIA_")

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


def this_command() -> str:
    """`graphtrain-inspect` as the user can run it again from this shell: the bare name when PATH
    finds this very executable, else the path that ran (a virtual environment not activated), else
    this Python running the module."""
    import shutil

    ran = sys.argv[0] if sys.argv else ""
    if os.path.basename(ran) == "graphtrain-inspect":
        found = shutil.which("graphtrain-inspect")
        if found and os.path.realpath(found) == os.path.realpath(ran):
            return "graphtrain-inspect"
        return shlex.quote(ran)
    return f"{shlex.quote(sys.executable)} -m graphtrain_inspect.inspector.cli"


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


def _manifest_path(out: str) -> str:
    return os.path.join(out, logformat.MANIFEST_NAME)


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def write_new(path: str, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to a file made here (O_EXCL, no link followed: a link or file planted under
    the name is not written through; a leftover of ours from an earlier attempt is removed first)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


# The first manifest is padded with spaces (JSON allows them after the document) to this size, so
# the last one can be written over the same bytes of the file when a full disk refuses a new file.
MANIFEST_RESERVE = 64 << 10


def write_manifest(out: str, manifest: dict[str, Any], *, first: bool = False) -> None:
    """Write the manifest whole (a new file, padded to MANIFEST_RESERVE, then renamed over the old
    one). When that fails (a full disk) and there is an old one (not `first`), write it over the
    old file's own bytes; a manifest too large for them is written without its per-rank detail
    and environment. OSError when neither can be written."""
    data = orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    if len(data) < MANIFEST_RESERVE:
        data += b" " * (MANIFEST_RESERVE - 1 - len(data)) + b"\n"
    tmp = _manifest_path(out) + ".tmp"
    try:
        write_new(tmp, data)
        os.replace(tmp, _manifest_path(out))
        return
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if first:
            raise
        failed = e
    try:
        _write_in_place(_manifest_path(out), manifest)
    except OSError:
        raise failed from None


def _write_in_place(path: str, manifest: dict[str, Any]) -> None:
    """Overwrite the manifest's existing bytes (no new disk space), padded to its size."""
    fd = os.open(path, os.O_WRONLY | _NOFOLLOW)
    try:
        size = os.fstat(fd).st_size
        for doc in (manifest, {k: v for k, v in manifest.items() if k not in ("ranks", "env")}):
            data = orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS)
            if len(data) < size:
                os.pwrite(fd, data + b" " * (size - 1 - len(data)) + b"\n", 0)
                return
        raise OSError(f"no room in {path} for the final manifest")
    finally:
        os.close(fd)


# Below this much free space the capture's filesystem is taken for full (a status or log write
# there fails): the summary says so rather than guessing at a crash.
DISK_FULL_BYTES = 1 << 20


def free_bytes(path: str) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _torch_version() -> str | None:
    # Without importing torch (seconds): read the installed distribution's metadata.
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:  # noqa: BLE001
        return None


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
    manifest = _first_manifest(args, cmd, env, run_id)
    manifest["node"] = node.record()
    manifest["record_ranks"] = args.ranks
    try:
        if not joined:
            write_manifest(out, manifest, first=True)
        write_manifest(nodes.part_dir(out, node), manifest, first=True)
    except OSError as e:
        _release(out, made, node, joined)
        return _fail(f"cannot write {_manifest_path(out)}: {e.strerror or e} (nothing was run)")

    if args.simulate_world:
        code, sig = simulated_run(cmd, env, args, out, manifest)
    else:
        try:
            child = subprocess.Popen(cmd, env=env)
        except OSError as e:
            # Nothing ran: leave --out as it was, so the same command, fixed, can use it.
            _release(out, made, node, joined)
            return _fail(f"cannot run {cmd[0]!r}: {e.strerror or e} (nothing was run; {out} left as it was)")
        code, sig = _wait_child(child)

    others = nodes.others_ranks(out, node)  # ranks of other nodes sharing --out: theirs to tell
    summaries = [s for s in summarize(out) if s.rank not in others]
    free = free_bytes(out)
    disk_full = (free is not None and free < DISK_FULL_BYTES) or any(
        "ENOSPC" in (s.stopped or "") or "EDQUOT" in (s.stopped or "") for s in summaries
    )
    _end_manifest(manifest, summaries, code, sig, free, disk_full)
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
                print(f"graphtrain-inspect capture: could not update {_manifest_path(where)}: {e}", file=sys.stderr)
        signed = _sign(out)
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


def unresolved_passes(summaries: list[RankSummary]) -> dict[str, str]:
    """--pass targets a worker imported but could not resolve (the launcher could not tell before
    the training: the module is on the workers' path only, say), each with the first reason."""
    found: dict[str, str] = {}
    for s in summaries:
        for target, why in s.target_errors.items():
            found.setdefault(target, why)
    return found


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
    sim_problem = _simulate_options_problem(args, cmd)
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


def _first_manifest(args: argparse.Namespace, cmd: list[str], env: dict[str, str], run_id: str) -> dict[str, Any]:
    """The manifest written before the command starts (status running)."""
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001
        user = str(os.getuid())
    return {
        "format": logformat.FORMAT_NAME,
        "format_version": logformat.FORMAT_VERSION,
        "command": cmd,
        "command_line": shlex.join(cmd),
        "run_id": run_id,
        "cwd": os.getcwd(),
        "env": {k: v for k, v in sorted(env.items()) if k.startswith(_ENV_PREFIXES)},
        "torch_version": _torch_version(),
        "host": socket.gethostname(),
        "user": user,
        "uid": os.getuid(),
        "started": time.time(),
        "ended": None,
        "exit_code": None,
        "signal": None,
        "status": "running",
        "options": {
            "passes": args.passes,
            "inductor": not args.no_inductor,
            "blobs": not args.no_blobs,
            "torch_trace": args.torch_trace,
        },
        "ranks": {},
    }


def _end_manifest(
    manifest: dict[str, Any], summaries: list, code: int, sig: str | None, free: int | None, disk_full: bool
) -> None:
    """The manifest once the command ended: how, and each rank's log as the launcher found it."""
    manifest["ended"] = time.time()
    manifest["exit_code"] = code
    manifest["signal"] = sig
    manifest["status"] = "interrupted" if sig in ("SIGINT", "SIGTERM") else ("finished" if code == 0 else "failed")
    manifest["ranks"] = {str(s.rank): s.manifest_entry() for s in summaries}
    # What a reader must know first: which ranks' logs do not run to a clean end, and why.
    manifest["incomplete_ranks"] = [s.rank for s in summaries if s.state() != "complete"]
    manifest["stopped_ranks"] = {str(s.rank): s.stopped for s in summaries if s.stopped}
    manifest["still_running"] = {str(s.rank): s.alive for s in summaries if s.alive}
    manifest["disk"] = {"free_bytes": free, "full": disk_full}
    # What went wrong, said once each: a failed write (where), a rank killed or exited without its end
    manifest["problems"] = [
        *(f"rank {s.rank}: {s.stopped}" for s in summaries if s.stopped),
        *(f"rank {s.rank}: {s.ending(disk_full).removeprefix('incomplete: ')}" for s in summaries
          if not s.stopped and not s.ended and not s.alive),
        *(["disk full: what could not be written is missing from the capture"] if disk_full else []),
    ]  # fmt: skip
    if "simulated" in manifest:
        manifest["simulated"]["stopped_after_passes"] = [s.rank for s in summaries if s.stopped_after_passes]


def _sign(out: str) -> str:
    """Sign what replay will load, now that every rank and blob child has written its records
    (capture.shared.signing); the line the summary prints about it."""
    try:
        kid = signing.sign(out, own=True)
    except (signing.KeyProblem, OSError) as e:
        return f"not signed ({e}): replay will need --trust, or `graphtrain-inspect trust {shlex.quote(out)}`"
    warn = signing.key_folder_problem()
    return f"signed with your key ({kid}): replay loads it without --trust" + (f"; warning: {warn}" if warn else "")


class ClaimRefused(Exception):
    """--out cannot be this capture's; one line says why."""


def claim(out: str) -> bool:
    """Make `out` this capture's before anything is written into it: created here (mkdir is
    exclusive; mode 0700), or an existing empty directory of this user's that no one else can
    write (another user who could would add files the capture then signs); either way the claim
    file is then created with O_EXCL, so of two captures started at once on one --out exactly one
    gets it (a check for emptiness followed by a write leaves a gap that both pass). Returns
    whether `out` was created here (release removes it then). ClaimRefused otherwise, its line
    naming the fix; nothing is written then."""
    parent = os.path.dirname(out)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as e:
        raise ClaimRefused(f"cannot create {parent}: {e.strerror or e}") from None
    try:
        os.mkdir(out, 0o700)
        made = True
    except FileExistsError:
        made = False
        problem = foreign_dir_problem(out)
        if problem:
            raise ClaimRefused(problem) from None
        try:
            if os.listdir(out):
                raise ClaimRefused(
                    f"{out} already exists and is not an empty directory (another capture's?); choose another --out"
                )
        except OSError as e:
            raise ClaimRefused(f"cannot list {out}: {e.strerror or e}") from None
    except OSError as e:
        raise ClaimRefused(f"cannot create {out}: {e.strerror or e}") from None
    path = os.path.join(out, logformat.CLAIM_NAME)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644)
    except FileExistsError:
        raise ClaimRefused(
            f"{out} was just claimed by another capture started at the same time; choose another --out"
        ) from None
    except OSError as e:
        if made:
            _rmdir(out)
        raise ClaimRefused(f"cannot claim {out}: {e.strerror or e}") from None
    with os.fdopen(fd, "w") as f:
        f.write(f"{os.getpid()}\n")
    return made


def foreign_dir_problem(out: str) -> str | None:
    """Why the existing `out` cannot be a capture's directory (None when it can): not a directory
    (or a link to one), another user's, or writable by group or others."""
    try:
        st = os.lstat(out)
    except OSError as e:
        return f"cannot use {out}: {e.strerror or e}; choose another --out"
    if not stat.S_ISDIR(st.st_mode):
        return f"{out} already exists and is not a directory (or is a link); choose another --out"
    if st.st_uid != os.getuid():
        return f"{out} belongs to another user (uid {st.st_uid}); choose another --out (capture creates it, mode 0700)"
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        return (
            f"{out} can be written by others (mode {mode:04o}): what they put there would be signed as your capture; "
            f"fix: chmod go-w {shlex.quote(out)}, or choose a new --out (capture creates it, mode 0700)"
        )
    return None


def _release(out: str, made: bool, node: nodes.Node, joined: bool) -> None:
    """`release`, for this node's part of a folder it claimed or joined (another's files stay)."""
    if not nodes.release_part(out, node, joined):
        release(out, made)


def release(out: str, made: bool) -> None:
    """Undo `claim` for a command that never ran: only the files the launcher wrote go, and the
    directory only if it was made here, so --out can be used again."""
    for name in (logformat.CLAIM_NAME, logformat.MANIFEST_NAME):
        try:
            os.unlink(os.path.join(out, name))
        except OSError:
            pass
    _rmdir(os.path.join(out, "torch_trace"))  # made by `run` before the command, empty if it never ran
    if made:
        _rmdir(out)


def _rmdir(path: str) -> None:
    try:
        os.rmdir(path)  # only if empty: never removes what someone else put there
    except OSError:
        pass


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


def _fmt_bytes(size: int) -> str:
    n = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def print_summary(
    out: str,
    args: argparse.Namespace,
    summaries: list[RankSummary],
    code: int,
    sig: str | None,
    signed: str = "",
    disk_full: bool = False,
    free: int | None = None,
    node: nodes.Node | None = None,
) -> None:
    p = lambda s="": print(s, file=sys.stderr)  # noqa: E731 - the summary goes where logs go
    p()
    p(f"graphtrain-inspect capture: command exited with {code}" + (f" ({sig})" if sig else ""))
    if not summaries:
        p("  no rank wrote a capture log.")
    for s in summaries:
        state = s.ending(disk_full)
        p(
            f"  rank {s.rank}: {s.passes} passes, {s.graphs} graphs, {s.records} records, {_fmt_bytes(s.bytes)}, "
            f"{s.capture_errors} capture errors, {s.raised} passes raised; {state}"
        )
        if not s.has_log:
            p(f"    no log: {s.log} is missing")
        if s.problems:
            p(f"    {len(s.problems)} damaged lines, first: {s.problems[0]}")
        if s.stopped:
            p(f"    capture stopped: {s.stopped}")
    world = min(max((s.world_size for s in summaries), default=0), 1 << 20)  # a damaged header: not expanded
    if not manifest_simulated(out):  # under --coor: the ranks that loaded rank 0's graph
        here = node or nodes.Node(None, None, None, "")
        for line in nodes.absent_lines(out, here, getattr(args, "ranks", None), world, {s.rank for s in summaries}):
            p(f"  {line}")
    blob_dir = os.path.join(out, logformat.BLOB_DIR)
    try:
        files = [f for f in os.listdir(blob_dir) if f.endswith(logformat.BLOB_SUFFIX)]
        size = sum(os.path.getsize(os.path.join(blob_dir, f)) for f in files)
        p(f"  blobs: {len(files)} files, {_fmt_bytes(size)}")
    except OSError:
        pass
    sim = manifest_simulated(out)
    if sim:
        stopped = [s.rank for s in summaries if s.stopped_after_passes]
        p(
            f"  simulated: {len(sim.get('ranks') or [])} of {sim.get('world_size')} ranks "
            f"({simulate.format_ranks(sim.get('ranks') or [])}), "
            f"hosts of {sim.get('local_world_size')}, fake process group"
        )
        if stopped:
            where = sorted({s.stopped_at for s in summaries if s.stopped_after_passes and s.stopped_at})
            p(
                f"  stopped after their passes ({'; '.join(where) or 'at the first optimizer step'}; the "
                "rest of training "
                f"did not run): ranks {simulate.format_ranks(stopped)}"
            )
    wrap_errors = unresolved_passes(summaries)  # said last, each in its own line (run)
    total = sum(s.passes for s in summaries)
    if disk_full:
        now = _fmt_bytes(free) if free is not None else "?"
        full_now = free is not None and free < DISK_FULL_BYTES
        p(
            f"  the capture's filesystem is full ({now} free): what could not be written is missing from the capture"
            if full_now
            else f"  a write failed for lack of space (ENOSPC/EDQUOT; {now} free now): what could not be written is "
            "missing from the capture"
        )
    if total == 0 and disk_full:
        p("  no pass was recorded: nothing could be written (the disk is full), whether or not passes ran")
    elif total == 0:
        p("  no graph pass fired. Possible reasons:")
        if not args.passes:
            p("   - no --pass MODULE:FUNC was named, so only Inductor's passes and record_pass() are captured;")
        elif set(args.passes) - set(wrap_errors):
            unexplained = [t for t in args.passes if t not in wrap_errors]
            p(
                f"   - the modules of {', '.join(unexplained)} were never imported, or the functions were "
                "never called with a GraphModule;"
            )
        if wrap_errors:
            p(f"   - {len(wrap_errors)} --pass target(s) did not resolve in the workers (last line: which, and why);")
        if args.no_inductor:
            p("   - --no-inductor: torch.compile's passes were not hooked;")
        else:
            p("   - the program never ran torch.compile with Inductor (or Inductor's caches were forced on);")
        p("   - the program did not run under this Python (PYTHONPATH must reach the workers).")
    else:
        unmatched = [t for t in args.passes if not any(t in s.targets for s in summaries) and t not in wrap_errors]
        for t in unmatched:
            p(f"  note: --pass {t} never fired (module never imported, or never called with a GraphModule)")
    if signed:
        p(f"  {signed}")
    p(f"  capture: {out}")
    exe = this_command()
    p(f"  next:    {exe} ls {shlex.quote(out)}    |    {exe} check {shlex.quote(out)}")


# -- simulated worlds (--simulate-world) ---------------------------------------------------------


def _simulate_options_problem(args: argparse.Namespace, cmd: list[str]) -> str | None:
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


def manifest_simulated(out: str) -> dict[str, Any] | None:
    try:
        with open(_manifest_path(out), "rb") as f:
            m = orjson.loads(f.read())
    except (OSError, orjson.JSONDecodeError):
        return None
    sim = m.get("simulated") if isinstance(m, dict) else None
    return sim if isinstance(sim, dict) else None


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

    def env_of(rank: int) -> dict[str, str]:
        e = dict(env)
        e.update(simulate.torchrun_env(rank, n, k, run_id))
        e[fake_world.ENV_WORLD] = str(n)
        e[fake_world.ENV_STOP] = "1" if args.stop_after_passes else "0"
        # torchrun sets one thread per worker when a host runs several; so do we (several run at once)
        e.setdefault("OMP_NUM_THREADS", "1")
        e["__GTI_OUTPUT__"] = os.path.join(out, "simulate", f"rank_{rank}.out")
        return e

    def record(rr: simulate.RankRun) -> None:
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
