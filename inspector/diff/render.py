"""Terminal output helpers: ANSI colour when writing to a terminal, plain text when piped.

No rich, no textual: plain escape codes, so `ls`, `diff` and `check` start fast and their output
is the same bytes a test or a CI log sees (with `--color never`, or any pipe). Colours are made
as capture.terminal_text's marks, which only the commands' escaping output streams turn into
escape codes (every other control character, from the capture, is shown escaped).
"""

from __future__ import annotations

import os
import sys
from typing import IO

from graphtrain_inspect.capture.terminal_text import sgr

_CODES = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}


def want_color(mode: str = "auto", stream: IO | None = None) -> bool:
    if mode == "always":
        return True
    if mode == "never":
        return False
    if os.environ.get("NO_COLOR"):
        return False
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


class Style:
    def __init__(self, color: bool):
        self.color = color

    def __call__(self, text: str, *styles: str) -> str:
        if not self.color or not styles:
            return text
        codes = ";".join(_CODES[s] for s in styles if s in _CODES)
        # marks, not escapes: the command's output stream makes them real and escapes the rest
        return f"{sgr(codes)}{text}{sgr('0')}" if codes else text


def fmt_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    x = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if x < 1024 or unit == "GB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return f"{n} B"


def truncate(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def add_common_arguments(p) -> None:
    p.add_argument(
        "--source",
        choices=("auto", "capture", "torch"),
        default="auto",
        help="read our capture logs, or torch's TORCH_TRACE logs (a capture's torch_trace/ subdirectory)",
    )
    p.add_argument(
        "--color", choices=("auto", "always", "never"), default="auto", help="colour output (default: when a terminal)"
    )


def print_read_errors(cap, stream: IO | None = None, limit: int = 20) -> None:
    """Reading problems, one line each (file:line: message), on stderr."""
    stream = stream or sys.stderr
    errs = cap.all_errors()
    for e in errs[:limit]:
        print(f"graphtrain-inspect: {e}", file=stream)
    if len(errs) > limit:
        print(f"graphtrain-inspect: ... and {len(errs) - limit} more reading problems", file=stream)
