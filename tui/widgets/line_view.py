"""A scrolling view of many lines that renders only the rows on screen (the Line API).

`LineView` keeps a cursor row, a fixed gutter (line numbers) and a horizontally scrolling body;
subclasses say how many rows there are, their plain text (search, copy) and how one row looks.
Rendered rows are kept in a small LRU cache, so a 50,000-line graph costs what its visible rows
cost. Search (`find`) and the marked node are shared by the code and diff views.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from graphtrain_inspect.tui.highlight import Palette, paint

Layer = list[tuple[int, int, Style]]


def _matches(text: str, query: str, style: Style) -> Layer:
    return [(m.start(), m.end(), style) for m in re.finditer(re.escape(query), text, re.IGNORECASE)]


@dataclass(frozen=True)
class Mark:
    """A range of one row to show marked (the node a jump landed on)."""

    row: int
    start: int
    end: int
    side: str = "body"  # "body": the row's text; "a"/"b": one side of a side-by-side diff


class LineView(ScrollView, can_focus=True):
    """Rows with a cursor. Subclasses implement `row_count`, `row_plain` and `build_row`."""

    DEFAULT_CSS = """
    LineView {
        background: $surface;
        overflow: auto auto;
        &:focus { background-tint: $foreground 3%; }
    }
    """

    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False, id="view.up"),
        Binding("down,j", "cursor(1)", "Down", show=False, id="view.down"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="view.page-up"),
        Binding("pagedown,space", "page(1)", "Page down", show=False, id="view.page-down"),
        Binding("home", "edge(0)", "Top", show=False, id="view.top"),
        Binding("end,G", "edge(1)", "Bottom", show=False, id="view.bottom"),
        Binding("left,h", "hscroll(-8)", "Left", show=False, id="view.left"),
        Binding("right,l", "hscroll(8)", "Right", show=False, id="view.right"),
    ]

    cursor: reactive[int] = reactive(0, repaint=False, init=False)

    class CursorMoved(Message):
        def __init__(self, view: "LineView", row: int) -> None:
            super().__init__()
            self.view = view
            self.row = row

        @property
        def control(self) -> "LineView":
            return self.view

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._cache: LRUCache[tuple, Strip] = LRUCache(512)
        self._reveal: tuple[int, int, int] | None = None  # (row, start, end) to keep in view sideways
        self._version = 0
        self.query_text: str = ""
        self.mark: Mark | None = None
        self.message_text: str | None = None  # shown when there are no rows ("select a pass ...")
        self._palette: Palette | None = None
        self._base: Style | None = None  # the widget's rich style, looked up once per change

    # -- what subclasses provide ------------------------------------------------------------------

    def row_count(self) -> int:
        return 0

    def row_plain(self, index: int) -> str:
        return ""

    def gutter_width(self) -> int:
        return 0

    def body_width(self) -> int:
        """Widest body in cells (for the horizontal scroll range)."""
        return 0

    def build_row(self, index: int, palette: Palette) -> tuple[list[Segment], str, list[Layer]]:
        """(gutter segments, body text, layers of styled ranges over the body) of one row, without
        the cursor; the search matches and the marked node are added on top."""
        return [], self.row_plain(index), []

    # -- state ------------------------------------------------------------------------------------

    @property
    def palette(self) -> Palette:
        if self._palette is None:
            self._palette = Palette.for_app(self.app)
        return self._palette

    def rows_changed(self, *, keep_cursor: bool = False) -> None:
        """Call after the rows changed: resets caches, the scroll range and (unless asked) the cursor."""
        self._version += 1
        self._cache.clear()
        self._palette = None
        self._base = None
        n = self.row_count()
        self.virtual_size = Size(self.gutter_width() + self.body_width() + 1, n)
        if not keep_cursor:
            self.set_cursor(0, scroll=False)
            self.scroll_to(0, 0, animate=False)
        elif self.cursor >= n:
            self.set_cursor(max(0, n - 1))
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._palette = None
        self._base = None
        self._cache.clear()

    def on_focus(self) -> None:
        self._base = None
        self._cache.clear()

    def on_blur(self) -> None:
        self._base = None
        self._cache.clear()

    def set_cursor(self, row: int, *, scroll: bool = True, center: bool = False) -> None:
        n = self.row_count()
        row = max(0, min(row, n - 1)) if n else 0
        old = self.cursor
        self.cursor = row
        if scroll:
            self.scroll_to_row(row, center=center)
        if old != row:
            self.refresh()
        self.post_message(self.CursorMoved(self, row))

    def scroll_to_row(self, row: int, *, center: bool = False) -> None:
        h = max(1, self.scrollable_content_region.height)
        top = int(self.scroll_offset.y)
        if center:
            self.scroll_to(y=max(0, row - h // 3), animate=False)
        elif row < top:
            self.scroll_to(y=row, animate=False)
        elif row >= top + h:
            self.scroll_to(y=row - h + 1, animate=False)

    def reveal_columns(self, row: int, start: int, end: int) -> None:
        """Scroll sideways so that body columns [start, end) of `row` are in view (their end, when
        the span is wider than the view); again when the view's size changes (a view just
        switched to is laid out after the jump) while the cursor stays on `row`."""
        self._reveal = (row, start, end)
        self._apply_reveal()

    def on_resize(self) -> None:
        self._apply_reveal()

    def _apply_reveal(self) -> None:
        if self._reveal is None or self._reveal[0] != self.cursor:
            self._reveal = None
            return
        _, start, end = self._reveal
        visible = self.scrollable_content_region.width - self.gutter_width()
        if visible <= 0:
            return
        x = int(self.scroll_offset.x)
        if start >= x and end <= x + visible:
            return
        want = max(0, end - visible + 1)  # wider than the view: its end (a call's arguments) wins
        self.scroll_to(x=want, animate=False)

    def current_line_text(self) -> str:
        return self.row_plain(self.cursor) if self.row_count() else ""

    # -- search -------------------------------------------------------------------------------------

    def find(self, query: str, *, forward: bool = True, start: int | None = None) -> int | None:
        """Move the cursor to the next row containing `query` (case-insensitive); its index or None."""
        self.query_text = query
        self._cache.clear()
        self.refresh()
        n = self.row_count()
        if not query or not n:
            return None
        q = query.lower()
        first = self.cursor if start is None else start
        step = 1 if forward else -1
        i = first
        for _ in range(n):
            i = (i + step) % n
            if q in self.row_plain(i).lower():
                self.set_cursor(i, center=True)
                return i
        return None

    # -- keys and mouse -------------------------------------------------------------------------------

    def action_cursor(self, delta: int) -> None:
        self.set_cursor(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        h = max(1, self.scrollable_content_region.height - 1)
        self.set_cursor(self.cursor + direction * h)
        self.scroll_to(y=self.scroll_offset.y + direction * h, animate=False)

    def action_edge(self, end: int) -> None:
        self.set_cursor(self.row_count() - 1 if end else 0)

    def action_hscroll(self, delta: int) -> None:
        self._reveal = None  # the user scrolls: a resize no longer brings the span back
        self.scroll_to(x=max(0, self.scroll_offset.x + delta), animate=False)

    def on_click(self, event: events.Click) -> None:
        row = int(self.scroll_offset.y) + event.y
        if 0 <= row < self.row_count():
            self.set_cursor(row, scroll=False)
            if event.chain >= 2 or self.activates_on_click(row):
                self.row_activated(row)

    def row_activated(self, row: int) -> None:
        """Double click or Enter on a row (folds open in the diff view)."""

    def activates_on_click(self, row: int) -> bool:
        """A single click is enough on this row (a fold)."""
        return False

    # -- rendering ------------------------------------------------------------------------------------

    def _row_parts(self, index: int) -> tuple[list[Segment], int, str, list[Layer]]:
        """(gutter segments, gutter width, body text, layers): built once per row and cached."""
        key = (index, self._version, self.query_text, self.mark)
        cached = self._cache.get(key)
        if cached is not None:
            return cached  # type: ignore[return-value]
        pal = self.palette
        base = self._base_style()
        gutter, body, layers = self.build_row(index, pal)
        layers = list(layers)
        if self.query_text:
            layers.append(_matches(body, self.query_text, pal.match))
        if self.mark is not None and self.mark.row == index and self.mark.side == "body":
            layers.append([(self.mark.start, self.mark.end, pal.node)])
        segs = [Segment(seg.text, base + seg.style if seg.style else base) for seg in gutter]
        parts = (segs, sum(cell_len(seg.text) for seg in segs), body, layers)
        self._cache[key] = parts  # type: ignore[assignment]
        return parts

    def _base_style(self) -> Style:
        if self._base is None:
            self._base = self.rich_style
        return self._base

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = int(scroll_y) + y
        width = self.scrollable_content_region.width
        base = self._base_style()
        n = self.row_count()
        if index >= n:
            if n == 0 and y == 1 and self.message_text:
                return Strip([Segment("  " + self.message_text, self.palette.comment)]).crop_extend(0, width, base)
            return Strip.blank(width, base)
        gutter, gw, body, layers = self._row_parts(index)
        want_gw = self.gutter_width()
        bw = max(0, width - want_gw)
        x = int(scroll_x)
        cursor = index == self.cursor
        if cursor:
            cur = Style(bgcolor=self.palette.cursor.bgcolor)
            gutter = [Segment(seg.text, (seg.style or base) + cur + Style(reverse=self.has_focus)) for seg in gutter]
        if gw != want_gw:
            g = Strip(gutter, gw).crop_extend(0, want_gw, base)
            gutter, gw = list(g), want_gw
        if body.isascii():
            # the visible slice only: painted straight into a strip of the right width
            view = body[x : x + bw]
            shifted = [[(a - x, b - x, st) for a, b, st in layer if b > x and a < x + bw] for layer in layers]
            if cursor:
                shifted.append([(0, bw, cur)])
            segs = paint(view, base, shifted)
            if len(view) < bw:
                segs.append(Segment(" " * (bw - len(view)), base + cur if cursor else base))
            return Strip(gutter + segs, gw + bw)
        full = Strip(paint(body, base, layers), cell_len(body)).crop_extend(x, x + bw, base)
        if cursor:
            full = Strip(list(Segment.apply_style(full, None, cur)), full.cell_length)
        return Strip(gutter + list(full), gw + bw)
