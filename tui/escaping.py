"""The TUI's one layer of capture.terminal_text: a line filter over every rendered line.

Every widget's lines (the tree, the code, diff and output-code views, the findings and tables,
titles and status lines) pass through the app's line filters before they reach the terminal, so
escaping there covers all of them, including widgets added later, and leaves the app's own
styling (which is not text) alone. Rich counts a control character as zero cells wide, so its
escaped form (`\\x1b`, four cells) would widen the line: the line is cut back to the width it was
laid out with (only lines holding control characters, which no capture of real training has).
"""

from __future__ import annotations

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

from graphtrain_inspect.capture.terminal_text import escape_controls


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
