"""Text from a capture is data: its control characters are shown escaped, never sent to a terminal.

Pass names, exception messages, source lines, graph code, file names: anything a capture holds
was written by the training (or by whoever edited the capture) and may hold terminal escapes
(`ESC [2J` clears the screen, an OSC sequence sets the window title, a CR overwrites a line).
Unicode's bidirectional and invisible format controls are escaped too: a right-to-left override
(U+202E) makes `bidi<RLO>exe.txt` read as `bidi` + `txt.exe` (the Trojan Source trick), a
zero-width space or joiner makes two names that look alike differ. The set (`ESCAPED`): C0 but
newline and tab, DEL, C1, U+200B-U+200F (zero-width space, non-joiner, joiner; LRM, RLM),
U+202A-U+202E (bidi embeddings and overrides), U+2066-U+2069 (bidi isolates), U+FEFF (zero-width
no-break space, BOM). `escape_controls` writes each C0 control character as `\\xNN` (so `\\x1b`,
as Python's repr would), every other one as `\\uNNNN` (what JSON writes, so a `--json` document,
where orjson leaves them raw, stays valid and exact through the same layer). It is the one
function, applied at one layer per kind of output, where text becomes output, not where each
field is formatted:

* every command's stdout and stderr (inspector.cli.main installs `EscapingStream`): `ls`,
  `check`, `diff`, `replay`, `trust`, their error messages and the capture summary;
* the TUI: its text objects (Rich's and Textual's, which would otherwise drop BEL, BS, VT, FF and
  CR silently) and its rendered lines (a Textual line filter), tui/escaping.py;
* SARIF message and snippet text (inspector.cli.sarif), which a code-scanning page shows.

JSON output keeps the characters exact (orjson writes them as `\\u001b`, which is no control
character on the wire). The commands' own colours are the one escape sequence a command writes
on purpose: `sgr` makes them as marks only this process knows (random private-use characters,
made at start-up), which `to_terminal` turns into real SGR sequences after escaping everything
else, so a capture cannot forge one.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from typing import IO, Any, TextIO

# C0 but \n and \t, DEL, C1, and the bidi/invisible format controls (module docstring)
ESCAPED = "\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff"
_CONTROL = re.compile(f"[{ESCAPED}]")
# Unguessable: a capture is written before this process starts.
_MARK = "".join(chr(0xE000 + b * 16 + i) for i, b in enumerate(secrets.token_bytes(4)))
_SGR = re.compile(re.escape(_MARK) + r"([0-9;]*)m")


def _hex(m: re.Match) -> str:
    c = ord(m.group())
    # DEL, C1 and the format controls as JSON writes them escaped: orjson leaves them raw inside
    # strings, and this form keeps a `--json` document valid and its text exact (C0 never reaches
    # here from JSON)
    return f"\\x{c:02x}" if c < 0x7F else f"\\u{c:04x}"


def escape_controls(text: str) -> str:
    """`text` with every character of `ESCAPED` written as `\\xNN` (C0) or `\\uNNNN`."""
    return _CONTROL.sub(_hex, text)


def sgr(codes: str) -> str:
    """A colour change (SGR `codes`, e.g. "1;31") that `to_terminal` sends as the real sequence."""
    return f"{_MARK}{codes}m"


def to_terminal(text: str) -> str:
    """What a terminal may be sent for `text`: control characters escaped, then this process's
    own colour marks made real."""
    text = _CONTROL.sub(_hex, text)
    return _SGR.sub(lambda m: f"\x1b[{m.group(1)}m", text) if _MARK in text else text


class OutputNotWritten(OSError):
    """The stream a command writes to refused a write (a full disk, a file closed under it): the
    command's output is not whole. A reader that went away (BrokenPipeError) is not this: there
    nothing is lost that anyone reads."""


class EscapingStream:
    """A text stream that writes `to_terminal(s)` to the stream it wraps (stdout or stderr)."""

    def __init__(self, stream: TextIO):
        self.wrapped = stream

    def write(self, s: str) -> int:
        try:
            self.wrapped.write(to_terminal(s))
        except BrokenPipeError:
            raise
        except OSError as e:  # told apart from an OSError of reading a capture, which is no output's
            raise OutputNotWritten(e.errno, e.strerror) from e
        return len(s)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding ... as the stream's
        return getattr(self.wrapped, name)


_SAVED: list[tuple[TextIO, TextIO]] = []


def install() -> None:
    """Escape everything this process prints from now on (stdout and stderr)."""
    if not _SAVED:
        _SAVED.append((sys.stdout, sys.stderr))
        sys.stdout = EscapingStream(sys.stdout)
        sys.stderr = EscapingStream(sys.stderr)


def uninstall() -> None:
    """Back to the raw streams (a REPL the user types into, which prints what they ask for)."""
    if _SAVED:
        sys.stdout, sys.stderr = _SAVED.pop()


# -- the commands' own styles: colour when writing to a terminal, plain text when piped ---------
# Plain escape codes, no rich: `ls`, `diff` and `check` start fast and their output is the same
# bytes a test or a CI log sees (with `--color never`, or any pipe). Colours are made as `sgr`
# marks, which only the escaping output streams turn into escape codes.

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
