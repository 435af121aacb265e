"""The capture's manifest (`manifest.json`, docs/log-format.md): written before the command starts
and again once it ended, in place within a reserved size, never through a link; and the line
the launcher's summary prints about signing what replay will load.
"""

from __future__ import annotations

import argparse
import getpass
import os
import shlex
import socket
import time
from typing import Any

import orjson

from graphtrain_inspect.capture.shared import logformat, signing

# Variables that shape a run and are worth keeping in the manifest.
_ENV_PREFIXES = ("TORCH", "TORCHINDUCTOR_", "NCCL_", "GLOO_", "CUDA_", "OMP_", "PYTORCH_", "GTI_", "MASTER_", "NVIDIA_")


def manifest_path(out: str) -> str:
    return os.path.join(out, logformat.MANIFEST_NAME)


NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def write_new(path: str, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to a file made here (O_EXCL, no link followed: a link or file planted under
    the name is not written through; a leftover of ours from an earlier attempt is removed first)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
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
    tmp = manifest_path(out) + ".tmp"
    try:
        write_new(tmp, data)
        os.replace(tmp, manifest_path(out))
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
        _write_in_place(manifest_path(out), manifest)
    except OSError:
        raise failed from None


def _write_in_place(path: str, manifest: dict[str, Any]) -> None:
    """Overwrite the manifest's existing bytes (no new disk space), padded to its size."""
    fd = os.open(path, os.O_WRONLY | NOFOLLOW)
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


def _torch_version() -> str | None:
    # Without importing torch (seconds): read the installed distribution's metadata.
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:  # noqa: BLE001
        return None


def first_manifest(args: argparse.Namespace, cmd: list[str], env: dict[str, str], run_id: str) -> dict[str, Any]:
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


def end_manifest(
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


def signed_line(out: str) -> str:
    """Sign what replay will load, now that every rank and blob child has written its records
    (capture.shared.signing); the line the summary prints about it."""
    try:
        kid = signing.sign(out, own=True)
    except (signing.KeyProblem, OSError) as e:
        return f"not signed ({e}): replay will need --trust, or `graphtrain-inspect trust {shlex.quote(out)}`"
    warn = signing.key_folder_problem()
    return f"signed with your key ({kid}): replay loads it without --trust" + (f"; warning: {warn}" if warn else "")


def manifest_simulated(out: str) -> dict[str, Any] | None:
    try:
        with open(manifest_path(out), "rb") as f:
            m = orjson.loads(f.read())
    except (OSError, orjson.JSONDecodeError):
        return None
    sim = m.get("simulated") if isinstance(m, dict) else None
    return sim if isinstance(sim, dict) else None
