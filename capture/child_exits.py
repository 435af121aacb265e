"""How each rank's process ended: its exit code or the signal that killed it, in its status file.

A rank killed with SIGKILL cannot say so itself (nothing runs in a process killed that way), and
only its parent learns how it ended, when it reaps it: torchrun (torch.distributed.elastic runs
workers with subprocess.Popen), torch.multiprocessing / multiprocessing (their fork Popen), or any
launcher in Python. Every process under a capture imports the bootstrap, so the parent is
captured too: `install` wraps the two places Python's process APIs turn a reaped child's wait
status into a return code, and when that child wrote a rank's log (it has a status file,
`status/rank_<R>.<pid>.json`) its status gains `exit_code` and `signal` (the name, e.g.
"SIGKILL"; null for a plain exit), rewritten in place (the same 1024 bytes: no new disk space).
The launcher's summary, the manifest and `ls` then say "rank 1 killed by SIGKILL after 3 passes".

Private APIs, feature-detected: where a Python lacks them nothing is wrapped and a killed rank
reads as before ("no end record"). A failure here is swallowed: it must never reach the parent
(torchrun), whose own handling of the child goes on unchanged.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from graphtrain_inspect.capture.shared import logformat

_INSTALLED: list[str] = []


def describe(code: int) -> tuple[int, str | None]:
    """(exit code as subprocess reports it: negative for a signal, the signal's name or None)."""
    if code < 0:
        try:
            return code, signal.Signals(-code).name
        except ValueError:
            return code, f"signal {-code}"
    return code, None


def record(directory: str, pid: int, code: int) -> bool:
    """Write `code` (subprocess's return code) into the status file of the rank writer `pid`, if
    it has one. Returns whether one was written."""
    sdir = os.path.join(directory, logformat.STATUS_DIR)
    try:
        names = os.listdir(sdir)
    except OSError:
        return False
    suffix = f".{pid}.json"
    done = False
    for name in names:
        if not name.endswith(suffix) or logformat.status_of_file_name(name) is None:
            continue
        path = os.path.join(sdir, name)
        fd = os.open(path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
        try:
            doc = logformat.decode_status(os.pread(fd, logformat.STATUS_BYTES * 4, 0))
            doc["exit_code"], doc["signal"] = describe(code)
            data = logformat.encode_status(doc)
            os.pwrite(fd, data, 0)  # the same bytes of the file: fits on a full disk
            done = True
        except (OSError, logformat.FormatError):
            pass
        finally:
            os.close(fd)
    return done


def install(directory: str) -> None:
    """Wrap subprocess's and multiprocessing's reaping of children in this process (once), as
    each module is imported by the program: nothing is imported here (importing multiprocessing
    at start-up changes how the program's pickles name some objects)."""
    if _INSTALLED:
        return
    _INSTALLED.append(directory)
    from graphtrain_inspect.capture import import_hooks

    import_hooks.when_imported("subprocess", _wrap_subprocess)
    import_hooks.when_imported("multiprocessing.popen_fork", _wrap_popen_fork)


def _wrap_subprocess(subprocess: Any) -> None:
    handle = getattr(subprocess.Popen, "_handle_exitstatus", None)
    if not callable(handle):
        return

    def _handle_exitstatus(self: Any, sts: int, *args: Any, **kwargs: Any) -> Any:
        out = handle(self, sts, *args, **kwargs)
        _note(self)
        return out

    subprocess.Popen._handle_exitstatus = _handle_exitstatus


def _wrap_popen_fork(popen_fork: Any) -> None:
    poll = getattr(popen_fork.Popen, "poll", None)
    if not callable(poll):
        return

    def _poll(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = poll(self, *args, **kwargs)
        if out is not None:
            _note(self)
        return out

    popen_fork.Popen.poll = _poll


def _note(proc: Any) -> None:
    try:
        code = getattr(proc, "returncode", None)
        pid = getattr(proc, "pid", None)
        if type(code) is int and type(pid) is int and not getattr(proc, "_gti_exit_noted", False):
            proc._gti_exit_noted = True
            record(_INSTALLED[0], pid, code)
    except Exception:  # noqa: BLE001 - the parent's own handling of its child must go on
        pass
