"""A piece of a command's work made in a forked child while this process makes the rest.

`Beside(fn, *args)` forks and the child makes `fn(*args)`; this process goes on with its own
work, then `.result()` waits for the child's value (made here instead where it could not be).

`diff` of a large graph makes two independent things: the node changes (decoded rows, aligned)
and the text diff of the graph code (decoded code, matched lines); on a 100k-node graph each takes
most of a second, one after the other. A child forked with the capture open (its logs are memory
maps, so both processes read them without sharing a file offset) makes one while this process
makes the other.

The child sends back JSON (orjson), never a pickle: what crosses is lines of text, and nothing a
browsing command reads is unpickled. Where there is no fork (not Linux), or the child fails or
sends what does not read, `result()` makes the value in this process: the output is the same
either way, only the time differs.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any, Callable

import orjson


class Beside:
    def __init__(self, fn: Callable[..., Any], *args: Any, fork: bool = True):
        self._fn, self._args = fn, args
        self._pid: int | None = None
        self._fd = -1
        if not (fork and sys.platform.startswith("linux")):
            return
        r, w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            return
        if pid == 0:  # the child: make the value, write it, leave without running anything else
            os.close(r)
            code = 0
            try:
                data = orjson.dumps(fn(*args))
            except BaseException:  # noqa: BLE001 - the parent makes it again and reports what happens there
                data, code = b"", 1
            try:
                with os.fdopen(w, "wb") as f:
                    f.write(data)
            finally:
                os._exit(code)  # no atexit, no flush of the parent's buffered output
        os.close(w)
        self._pid, self._fd = pid, r

    def cancel(self) -> None:
        """The value is not wanted: a child still making it is ended (SIGKILL: it holds nothing
        of its own to clean up) and reaped."""
        if self._pid is not None:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.close(self._fd)
                os.waitpid(self._pid, 0)
            except OSError:
                pass
            self._pid = None

    def __del__(self) -> None:
        self.cancel()  # dropped unasked (the command failed first): no child left behind

    @property
    def forked(self) -> bool:
        """A child makes the value (until `result` has it)."""
        return self._pid is not None

    def result(self) -> Any:
        if self._pid is None:
            return self._fn(*self._args)
        with os.fdopen(self._fd, "rb") as f:
            data = f.read()
        _, status = os.waitpid(self._pid, 0)
        self._pid = None
        if status == 0 and data:
            try:
                return orjson.loads(data)
            except orjson.JSONDecodeError:
                pass
        return self._fn(*self._args)
