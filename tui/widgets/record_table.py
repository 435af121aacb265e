"""A DataTable of records that can be searched, copied and exported as tab-separated text."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from graphtrain_inspect.tui.escaping import plain as as_text


def plain(cell: Any) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


class RecordTable(DataTable):
    DEFAULT_CSS = """
    RecordTable { height: 1fr; }
    """

    BINDINGS = [
        Binding("k", "cursor_up", "Up", show=False, id="table.up"),
        Binding("j", "cursor_down", "Down", show=False, id="table.down"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.query_text = ""
        # the rows' cells whole, by row, where the table shows them shortened (a long name without
        # its middle): copying, exporting and searching read these; empty: the cells as shown
        self.whole: list[tuple[str, ...]] = []

    def add_row(self, *cells: Any, **kwargs: Any) -> Any:
        """DataTable's, each cell shown as typed: a `str` cell would be read as markup
        (escaping.plain)."""
        return super().add_row(*map(as_text, cells), **kwargs)

    def row_plain(self, index: int) -> str:
        if not (0 <= index < self.row_count):
            return ""
        if index < len(self.whole):
            return "\t".join(self.whole[index])
        return "\t".join(plain(c) for c in self.get_row_at(index))

    def current_line_text(self) -> str:
        return self.row_plain(self.cursor_row)

    def export_text(self) -> str:
        header = "\t".join(plain(c.label) for c in self.columns.values())
        return "\n".join([header] + [self.row_plain(i) for i in range(self.row_count)]) + "\n"

    def find(self, query: str, *, forward: bool = True) -> int | None:
        self.query_text = query
        n = self.row_count
        if not query or not n:
            return None
        q = query.lower()
        step = 1 if forward else -1
        i = self.cursor_row
        for _ in range(n):
            i = (i + step) % n
            if q in self.row_plain(i).lower():
                self.move_cursor(row=i)
                return i
        return None
