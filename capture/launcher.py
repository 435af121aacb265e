"""`graphtrain-inspect capture [options] -- COMMAND ...`: run COMMAND unchanged, captured on every rank.

The launcher never imports torch: it prepares the environment that every worker inherits
(bootstrap sitecustomize first on PYTHONPATH, GTI_* settings, Inductor caches off), runs the
command, relays signals, writes the manifest, and prints a summary read back from the logs.
"""

from __future__ import annotations

import argparse
import getpass
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import orjson

from graphtrain_inspect.capture import logformat, session
from graphtrain_inspect.capture.named_passes import TargetError, parse_target
from graphtrain_inspect.capture.summary import RankSummary, summarize

# Variables that shape a run and are worth keeping in the manifest.
_ENV_PREFIXES = ("TORCH", "TORCHINDUCTOR_", "NCCL_", "GLOO_", "CUDA_", "OMP_", "PYTORCH_", "GTI_", "MASTER_", "NVIDIA_")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.usage = "graphtrain-inspect capture [--out DIR] [--pass MODULE:FUNC]... [--no-inductor] [--no-blobs] -- COMMAND [ARGS...]"
    p.add_argument("--out", metavar="DIR", help="capture directory (default: a fresh ./gti-capture-<time>)")
    p.add_argument("--pass", dest="passes", action="append", default=[], metavar="MODULE:FUNC",
                   help="capture this pass function (or Class.method, or a module-level list of passes); repeatable")
    p.add_argument("--no-inductor", action="store_true", help="do not capture Inductor's own passes")
    p.add_argument("--no-blobs", action="store_true", help="do not store GraphPickler copies (no replay)")
    p.add_argument("--torch-trace", action="store_true", help="also write torch's own TORCH_TRACE logs to DIR/torch_trace")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command to run, after --")


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


def write_manifest(out: str, manifest: dict[str, Any]) -> None:
    """Write the manifest whole or not at all (a full disk leaves the previous one); OSError."""
    tmp = _manifest_path(out) + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
        os.replace(tmp, _manifest_path(out))
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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
    if not cmd:
        return _fail("no command given: graphtrain-inspect capture [options] -- torchrun --nproc-per-node 2 train.py")
    for t in args.passes:
        try:
            parse_target(t)
        except TargetError as e:
            return _fail(str(e))
    out = os.path.abspath(args.out or _default_out())
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        return _fail(f"{out} already exists and is not an empty directory; choose another --out (nothing was run)")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        return _fail(f"cannot create {out}: {e}")

    env = dict(os.environ)
    here = os.path.dirname(os.path.abspath(__file__))
    bootstrap = os.path.join(here, "bootstrap")
    env["PYTHONPATH"] = os.pathsep.join([bootstrap, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    env["GTI_CAPTURE_HOME"] = here  # the capture package, for workers of another Python (bootstrap)
    env[session.ENV_DIR] = out
    env[session.ENV_PASSES] = "\n".join(args.passes)
    env[session.ENV_INDUCTOR] = "0" if args.no_inductor else "1"
    env[session.ENV_BLOBS] = "0" if args.no_blobs else "1"
    if not args.no_inductor:
        # On a warm FX/AOT cache Inductor runs no pass at all; a capture needs them to run.
        env.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
    if args.torch_trace:
        env["TORCH_TRACE"] = os.path.join(out, "torch_trace")

    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001
        user = str(os.getuid())
    manifest: dict[str, Any] = {
        "format": logformat.FORMAT_NAME,
        "format_version": logformat.FORMAT_VERSION,
        "command": cmd,
        "command_line": shlex.join(cmd),
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
        "options": {"passes": args.passes, "inductor": not args.no_inductor, "blobs": not args.no_blobs, "torch_trace": args.torch_trace},
        "ranks": {},
    }
    try:
        write_manifest(out, manifest)
    except OSError as e:
        return _fail(f"cannot write {_manifest_path(out)}: {e.strerror or e} (nothing was run)")

    code, sig = _run_child(cmd, env)

    summaries = summarize(out)
    manifest["ended"] = time.time()
    manifest["exit_code"] = code
    manifest["signal"] = sig
    manifest["status"] = "interrupted" if sig in ("SIGINT", "SIGTERM") else ("finished" if code == 0 else "failed")
    manifest["ranks"] = {str(s.rank): s.manifest_entry() for s in summaries}
    # What a reader must know first: which ranks' logs do not run to a clean end, and why.
    manifest["incomplete_ranks"] = [s.rank for s in summaries if s.state() != "complete"]
    manifest["stopped_ranks"] = {str(s.rank): s.stopped for s in summaries if s.stopped}
    manifest["still_running"] = {str(s.rank): s.alive for s in summaries if s.alive}
    if not os.path.isdir(out):
        print(f"graphtrain-inspect capture: the capture directory {out} was removed while the command ran; nothing was kept", file=sys.stderr)
    else:
        try:
            write_manifest(out, manifest)
        except OSError as e:
            print(f"graphtrain-inspect capture: could not update {_manifest_path(out)}: {e}", file=sys.stderr)
    _print_summary(out, args, summaries, code, sig)
    return code


def _run_child(cmd: list[str], env: dict[str, str]) -> tuple[int, str | None]:
    """Run the command in our process group, so a terminal's Ctrl-C reaches it as it would."""
    try:
        child = subprocess.Popen(cmd, env=env)
    except OSError as e:
        print(f"graphtrain-inspect capture: cannot run {cmd[0]!r}: {e}", file=sys.stderr)
        return 127, None
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


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _print_summary(out: str, args: argparse.Namespace, summaries: list[RankSummary], code: int, sig: str | None) -> None:
    p = lambda s="": print(s, file=sys.stderr)  # noqa: E731 - the summary goes where logs go
    p()
    p(f"graphtrain-inspect capture: command exited with {code}" + (f" ({sig})" if sig else ""))
    if not summaries:
        p("  no rank wrote a capture log.")
    for s in summaries:
        if s.stopped:
            state = "incomplete: the capture stopped writing (training went on)"
        elif s.ended:
            state = "complete"
        elif s.alive:
            state = f"incomplete: still running (pid {', '.join(map(str, s.alive))})"
        else:
            state = "incomplete: no end record (the process was killed or crashed)"
        p(f"  rank {s.rank}: {s.passes} passes, {s.graphs} graphs, {s.records} records, {_fmt_bytes(s.bytes)}, "
          f"{s.capture_errors} capture errors, {s.raised} passes raised; {state}")
        if not s.has_log:
            p(f"    no log: {s.log} is missing")
        if s.problems:
            p(f"    {len(s.problems)} damaged lines, first: {s.problems[0]}")
        if s.stopped:
            p(f"    capture stopped: {s.stopped}")
    blob_dir = os.path.join(out, logformat.BLOB_DIR)
    try:
        files = [f for f in os.listdir(blob_dir) if f.endswith(logformat.BLOB_SUFFIX)]
        size = sum(os.path.getsize(os.path.join(blob_dir, f)) for f in files)
        p(f"  blobs: {len(files)} files, {_fmt_bytes(size)}")
    except OSError:
        pass
    total = sum(s.passes for s in summaries)
    if total == 0:
        p("  no graph pass fired. Possible reasons:")
        if not args.passes:
            p("   - no --pass MODULE:FUNC was named, so only Inductor's passes and record_pass() are captured;")
        else:
            p(f"   - the modules of {', '.join(args.passes)} were never imported, or the functions were never called with a GraphModule;")
        if args.no_inductor:
            p("   - --no-inductor: torch.compile's passes were not hooked;")
        else:
            p("   - the program never ran torch.compile with Inductor (or Inductor's caches were forced on);")
        p("   - the program did not run under this Python (PYTHONPATH must reach the workers).")
    else:
        unmatched = [t for t in args.passes if not any(t in s.targets for s in summaries)]
        for t in unmatched:
            p(f"  note: --pass {t} never fired (module never imported, or never called with a GraphModule)")
    p(f"  capture: {out}")
    p(f"  next:    graphtrain-inspect ls {shlex.quote(out)}    |    graphtrain-inspect check {shlex.quote(out)}")
