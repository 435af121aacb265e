"""The TUI's layer of capture.shared.terminal_text: the same escaping as the commands, in two places;
and `plain`, the one way text becomes something the TUI shows.

0. Markup. Textual and Rich read a `str` given to a table cell, a label, a tree node, a select
   option, a notification or a command-palette entry as markup: a status reason holding `[/x]`
   raised (a closing tag with nothing open) and took the app down on open, `[red on red]` hid
   what followed, `[@click=app.quit]` made a click run an action, and the sample's own
   `coordinate[dp]` read as `coordinate`. Every text the TUI shows goes through `plain` (a
   `Text`, which is never parsed), and the widgets that take strings (`RecordTable`,
   `CaptureTree`, the app's `notify`) pass what they are given through it too.

1. Text objects. Rich's `Text` and Textual's `Content` *drop* BEL, BS, VT, FF and CR from the
   text they are made of (`strip_control_codes`), before any filter can see them, so a pass name
   holding `\\x07` would read differently in the TUI (the character silently gone) and on the
   command line (`\\x07`). `install` points both libraries' stripping function at
   `escape_controls`: every text the TUI makes shows the escape instead, measured at its escaped
   width.
2. Rendered lines. Every widget's lines (the tree, the code, diff and output-code views, the
   findings and tables, titles and status lines) pass through the app's line filters before they
   reach the terminal, so escaping there covers what a text object did not (segments made
   directly, other widgets added later) and leaves the app's own styling (which is not text)
   alone. Rich counts a control or format character as zero cells wide, so its escaped form
   (`\\x1b`, four cells) would widen the line: the line is cut back to the width it was laid out
   with (only lines holding such characters, which no capture of real training has).
"""

from __future__ import annotations

import rich.text
import textual.content
from rich.segment import Segment
from rich.text import Text
from textual.color import Color
from textual.filter import LineFilter

from graphtrain_inspect.capture.shared.terminal_text import escape_controls


def plain(text: object) -> Text:
    """`text` as typed: a Rich `Text`, never read as markup (a `Text` is returned as it is)."""
    return text if isinstance(text, Text) else Text(str(text), end="")


def _escape(text: str, *_: object) -> str:
    return escape_controls(text)


def install() -> None:
    """Make Rich's and Textual's text objects escape what they would drop (idempotent)."""
    # Both look the function up as a module global when a text is made: one name each to repoint.
    rich.text.strip_control_codes = _escape  # type: ignore[assignment]
    textual.content._strip_control_codes = _escape  # type: ignore[assignment]


class EscapeControls(LineFilter):
    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        if not any(not control and escape_controls(text) != text for text, _, control in segments):
            return segments
        width = Segment.get_line_length(segments)
        out = [
            Segment(escape_controls(text), style, control) if not control else Segment(text, style, control)
            for text, style, control in segments
        ]
        return Segment.adjust_line_length(out, width)


ESCAPE_CONTROLS = EscapeControls()
