"""Appends whole records to one rank's log; a failing disk stops the capture, never the training."""

from __future__ import annotations

import errno
import os
import sys
import time
from typing import Any

from graphtrain_inspect.capture.shared import logformat

# What a write error means to whoever reads the summary, by errno name.
_WRITE_ERRORS = {
    "ENOSPC": "disk full",
    "EDQUOT": "disk quota exceeded",
    "EIO": "I/O error",
    "EFBIG": "file size limit reached",
    "EROFS": "filesystem is read-only",
}


def write_error(e: OSError, at: int, rank: int) -> str:
    """One line naming a failed write and where: "disk full (ENOSPC: No space left on device) at
    30012 bytes of rank 1's log" (`at`: the bytes of the log written before it)."""
    name = errno.errorcode.get(e.errno) if isinstance(e.errno, int) else None
    what = _WRITE_ERRORS.get(name or "", "write error")
    code = f"{name}: {e.strerror}" if name else f"{type(e).__name__}: {e}"
    return f"{what} ({code}) at {at} bytes of rank {rank}'s log"


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class RankLog:
    """One rank's log file, opened at the first record, written record by record.

    Each record goes out in one write on an O_APPEND descriptor with no userspace buffer, so a
    rank killed at any moment leaves all earlier records intact. After the first failed write
    the log stops (a half-written capture is worse than a short one): a partly written record is
    cut off again, so the log ends at a whole record, and the reason goes to stderr and to this
    process's status file (`status/rank_<R>.<pid>.json`, made with the log and rewritten in
    place, so it can be updated on a full disk), where the launcher's summary finds it.
    A log deleted under a running capture (its directory removed) stops it the same way.
    """

    def __init__(self, directory: str, rank: int):
        self.path = os.path.join(directory, logformat.log_file_name(rank))
        self.rank = rank
        self.pid = os.getpid()
        self.status_path = os.path.join(directory, logformat.STATUS_DIR, logformat.status_file_name(rank, self.pid))
        self.fd: int | None = None
        self.status_fd: int | None = None
        self.records = 0
        self.bytes = 0
        self.stopped: str | None = None

    def write(self, kind: str, payload: Any, *, meta: dict | None = None, compile_id: dict | None = None) -> bool:
        if self.stopped is not None:
            return False
        data = logformat.encode_record(kind, payload, rank=self.rank, meta=meta, compile_id=compile_id, pid=self.pid)
        return self.write_encoded(data, 1)

    def write_encoded(self, data: bytes, records: int) -> bool:
        """Append `records` whole records already encoded (`logformat.encode_record`), in one write:
        what a forked child made of a graph (`deferred_graphs`)."""
        if self.stopped is not None:
            return False
        written = 0
        try:
            if self.fd is None:
                self._open_status()
                # appended to by every process of the rank; never through a link planted under its name
                self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | _NOFOLLOW | _CLOEXEC, 0o644)
            view = memoryview(data)
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
                written += n
            if os.fstat(self.fd).st_nlink == 0:
                self.stop("the log was deleted while the capture was running (capture directory removed?)")
                return False
        except OSError as e:
            self._cut_partial(written)
            self.stop(write_error(e, self.bytes, self.rank))
            return False
        self.records += records
        self.bytes += len(data)
        return True

    def _cut_partial(self, written: int) -> None:
        """Remove the first `written` bytes of a record whose write failed half-way, when nothing
        was appended after them (by another process writing to the same log)."""
        if not written or self.fd is None:
            return
        try:
            end = os.lseek(self.fd, 0, os.SEEK_CUR)  # O_APPEND: just after our last bytes
            if os.fstat(self.fd).st_size == end and end >= written:
                os.ftruncate(self.fd, end - written)
        except OSError:
            pass

    # -- the status file -------------------------------------------------------------------------

    def _status(self, state: str, reason: str | None = None) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "pid": self.pid,
            "state": state,  # writing | stopped | ended
            "log": os.path.basename(self.path),
            "records": self.records,
            "bytes": self.bytes,
            "time": time.time(),
            "reason": reason,
        }

    def _open_status(self) -> None:
        try:
            try:  # not makedirs: a capture directory removed under the run must stay removed
                os.mkdir(os.path.dirname(self.status_path), 0o755)
            except FileExistsError:
                pass
            # this process's own file: made here, never a planted file or link written through
            fd = os.open(self.status_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644)
        except OSError:
            return  # no status file: the log itself and stderr still tell
        self.status_fd = fd
        if not self._set_status("writing"):
            self._close_status()

    def _set_status(self, state: str, reason: str | None = None) -> bool:
        if self.status_fd is None:
            return False
        data = logformat.encode_status(self._status(state, reason))
        try:
            done = 0
            while done < len(data):  # the same bytes of the file each time: no new space needed
                n = os.pwrite(self.status_fd, data[done:], done)
                if n <= 0:
                    return False
                done += n
        except OSError:
            return False
        return True

    def _close_status(self) -> None:
        if self.status_fd is not None:
            try:
                os.close(self.status_fd)
            except OSError:
                pass
            self.status_fd = None

    # -- lifetime ----------------------------------------------------------------------------------

    def stop(self, reason: str) -> None:
        if self.stopped is None:
            self.stopped = reason
            print(
                f"graphtrain-inspect: rank {self.rank} stopped capturing to {self.path}: {reason}; training goes on",
                file=sys.stderr,
            )
            self._set_status("stopped", reason)
        self.close()

    def end(self) -> None:
        """The process is done: its status says so (unless the log had stopped), then close."""
        if self.stopped is None and self.fd is not None:
            self._set_status("ended")
        self.close()

    def close(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None
        self._close_status()
