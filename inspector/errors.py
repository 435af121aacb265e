"""The core's errors: one line of message each, and the exit status the command gives it.

`inspector/cli/main.py` is the one place that turns them into output: it catches `InspectorError`,
prints `graphtrain-inspect COMMAND: MESSAGE` on one line (never a traceback for bad input) and
exits with the error's `code`. Every class here exits 2 (the input or the arguments); a raise site
may pass another `code`.

The capture's own errors (`capture.shared.logformat.FormatError`, `capture.shared.signing.KeyProblem`, the
launcher's) stay in `capture/`: capture runs inside training workers and may not import the core
(tests/test_layering.py), and inside a worker an instrumentation error is recorded and swallowed,
never turned into an exit status. The core converts them where it meets them, with the context the
message needs (the file, the command).

This module imports nothing of ours, so every stage (read ... cli, and the TUI) may import it.
"""

from __future__ import annotations


class InspectorError(Exception):
    """A one-line reason the core cannot go on, with the exit status a command gives it."""

    code: int = 2

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class CommandError(InspectorError):
    """A command cannot go on with the arguments it was given (exit 2)."""


class CaptureUnreadable(InspectorError):
    """The input cannot be read at all (no such path, no logs, not a capture): exit 2."""


class BundledError(InspectorError, ValueError):
    """No bundled capture of that name, or its archive is unsafe to unpack: exit 2."""


class NotFound(InspectorError):
    """The pass, rank or occurrence asked for is not in the capture: exit 2."""


class Refused(InspectorError):
    """The capture (or blob) must not be loaded (pickle can run code); the message says why: exit 2."""


class ReplayError(InspectorError):
    """The graph or the pass cannot be loaded for replay: exit 2."""


class CannotReplay(ReplayError):
    """The pass is known but cannot be re-run from what the capture recorded: exit 2."""
