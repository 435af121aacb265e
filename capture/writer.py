"""Appends whole records to one rank's log; a failing disk stops the capture, never the training."""

from __future__ import annotations

import os
import sys
from typing import Any

from capture import logformat


class RankLog:
    """One rank's log file, opened at the first record, written record by record.

    Each record goes out in one write on an O_APPEND descriptor with no userspace buffer, so a
    rank killed at any moment leaves all earlier records intact. After the first failed write
    the log stops (a half-written capture is worse than a short one) and says why on stderr.
    """

    def __init__(self, directory: str, rank: int):
        self.path = os.path.join(directory, logformat.log_file_name(rank))
        self.rank = rank
        self.pid = os.getpid()
        self.fd: int | None = None
        self.records = 0
        self.bytes = 0
        self.stopped: str | None = None

    def write(self, kind: str, payload: Any, *, meta: dict | None = None, compile_id: dict | None = None) -> bool:
        if self.stopped is not None:
            return False
        data = logformat.encode_record(kind, payload, rank=self.rank, meta=meta, compile_id=compile_id, pid=self.pid)
        try:
            if self.fd is None:
                self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            view = memoryview(data)
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
        except OSError as e:
            self.stop(f"{type(e).__name__}: {e}")
            return False
        self.records += 1
        self.bytes += len(data)
        return True

    def stop(self, reason: str) -> None:
        if self.stopped is None:
            self.stopped = reason
            print(f"graphtrain-inspect: rank {self.rank} stopped capturing to {self.path}: {reason}; training goes on", file=sys.stderr)
        self.close()

    def close(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None
