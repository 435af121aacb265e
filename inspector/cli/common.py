"""What every command shares: its one-line failure and opening the capture it was given."""

from __future__ import annotations

from typing import Any


class CommandError(Exception):
    """A command cannot go on: `main` prints `graphtrain-inspect COMMAND: MESSAGE` on one line and
    exits with `code` (2: the input or the arguments). Never a traceback for bad input."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def open_or_fail(directory: str, source: str) -> Any:
    """The capture (or TORCH_TRACE logs) at `directory`, or the reader's one-line reason why not."""
    from graphtrain_inspect.inspector.read.capture_index import CaptureUnreadable, open_capture

    try:
        return open_capture(directory, source=source)
    except CaptureUnreadable as e:
        raise CommandError(str(e)) from None
