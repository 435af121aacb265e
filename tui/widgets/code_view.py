"""The selected graph's code, syntax-highlighted line by line, with line numbers and a cursor."""

from __future__ import annotations

from rich.segment import Segment

from graphtrain_inspect.inspector.read.code_locate import CodeIndex
from graphtrain_inspect.tui.highlight import Palette, token_spans
from graphtrain_inspect.tui.widgets.line_view import LineView, Mark
from graphtrain_inspect.tui.widgets.view_result import Drawn, ResultContext


class CodeView(LineView):
    """Shows one graph's readable code. `show(lines, title)` replaces it; `goto_node` jumps."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines: list[str] = []
        self.index: CodeIndex | None = None
        self.title = ""
        self.graph_key: tuple | None = None  # (rank, gid) shown
        self._width = 0
        self._gutter = 0
        self.message_text = "select a graph or a pass in the tree"

    def show(
        self,
        lines: list[str],
        index: CodeIndex | None,
        *,
        title: str = "",
        key: tuple | None = None,
        keep_place: bool = False,
    ) -> None:
        place = (self.cursor, self.scroll_offset) if keep_place and key == self.graph_key else None
        self.lines = lines
        self.index = index
        self.title = title
        self.graph_key = key
        self.mark = None
        self._width = max(map(len, lines), default=0)
        self._gutter = len(str(len(lines))) + 2
        self.rows_changed(keep_cursor=place is not None)
        if place is not None:
            self.set_cursor(place[0], scroll=False)
            self.scroll_to(place[1].x, place[1].y, animate=False)

    def show_result(self, gt, extra, ctx: ResultContext) -> Drawn:
        """A graph's text (tui.session.GraphText), or None: it could not be read."""
        if gt is None:
            self.clear(ctx.unreadable("graph code"))
            return Drawn(title=ctx.label)
        key = (gt.rank, gt.gid)
        self.show(gt.lines, gt.index, title=gt.title, key=key, keep_place=ctx.shown == key)
        return Drawn(title=gt.title, key=key)

    def clear(self, message: str) -> None:
        self.lines = []
        self.index = None
        self.graph_key = None
        self.mark = None
        self.message_text = message
        self.rows_changed()

    def row_count(self) -> int:
        return len(self.lines)

    def row_plain(self, index: int) -> str:
        return self.lines[index] if 0 <= index < len(self.lines) else ""

    def gutter_width(self) -> int:
        return self._gutter

    def body_width(self) -> int:
        return self._width

    def build_row(self, index: int, palette: Palette):
        line = self.lines[index]
        gutter = [Segment(f"{index + 1:>{self._gutter - 2}}  ", palette.gutter)]
        return gutter, line, [[(s, e, palette.token(k)) for s, e, k in token_spans(line)]]

    def goto_node(self, name: str, subgraph: str | None = None) -> bool:
        """Put the cursor on the line defining node `name` and mark the name; False if not found."""
        if self.index is None:
            return False
        loc = self.index.find(name, subgraph)
        if loc is None:
            return False
        self.mark = Mark(loc.line, loc.start, loc.end)
        self._cache.clear()
        self.set_cursor(loc.line, center=True)
        # the node's arguments (where a baked literal sits) end its call: bring them into view,
        # after the layout (a view just switched to has no width yet)
        line = self.lines[loc.line] if 0 <= loc.line < len(self.lines) else ""
        tail = line.find(";  ")
        end = line.rfind(")", 0, tail if tail > 0 else len(line)) + 1 or len(line)
        self.call_after_refresh(self.reveal_columns, loc.line, loc.start, max(end, loc.end))
        self.refresh()
        return True

    def node_at_cursor(self) -> str | None:
        return self.index.node_at(self.cursor) if self.index is not None else None
