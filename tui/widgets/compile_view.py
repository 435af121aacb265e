"""torch.compile's own story in the TUI: every compile of every rank, in the order torch started
them, with its breaks, restarts, recompiles (the guard that failed) and failures (the reason,
fell back to eager or raised), as `ls` lists them. A failed compile is a row of its own, in red.

Enter on a row shows, below the table, the lines of the user's source file around the event's
frame (where the file exists on this machine) and the graphs torch logged for that compile, and
selects the first of them in the tree (1 shows its code). Built from
`inspector.read.compile_events`; no reading here beyond the rows handed in.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Label, Static

from graphtrain_inspect.inspector.read.compile_rows import CompileRow
from graphtrain_inspect.tui.widgets.record_table import RecordTable
from graphtrain_inspect.tui.widgets.view_result import Drawn, ResultContext

KIND_STYLE = {"failure": "bold red", "break": "yellow", "restart": "yellow", "recompile": "cyan", "cache": "dim"}
STATUS_STYLE = {"failed": "bold red", "restarted": "yellow", "empty": "dim", "missing": "dim", "ok": "green"}


def _cut(text: str, n: int = 90) -> str:
    """A table cell: the reason's start (the row's detail below the table has all of it)."""
    return text if len(text) <= n else text[: n - 1] + "…"


class CompileView(Vertical):
    DEFAULT_CSS = """
    CompileView > #compile-title { height: 1; padding: 0 1; color: $text-muted; }
    CompileView #compile-detail { height: auto; max-height: 50%; padding: 0 1; border-top: solid $primary-darken-2; }
    """

    class Chosen(Message):
        """Enter on a row: the app selects the compile's first graph in the tree."""

        def __init__(self, rank: int, compile_id: str) -> None:
            super().__init__()
            self.rank = rank
            self.compile_id = compile_id

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[CompileRow] = []
        self.graphs_of: Any = None  # (rank, compile_id) -> list of (label, text): set by the app
        self.opened_row: int | None = None  # the row Enter (or a finding) opened: its lines stay shown

    def compose(self) -> ComposeResult:
        yield Label("", id="compile-title")
        yield RecordTable(id="compile-table")
        yield Static("", id="compile-detail")

    def on_mount(self) -> None:
        self.table.add_columns("rank", "compile", "event", "where", "reason / guard / time", "function")

    @property
    def table(self) -> RecordTable:
        return self.query_one("#compile-table", RecordTable)

    def show_result(self, rows: list[CompileRow], title: str, ctx: ResultContext) -> Drawn:
        self.set_rows(rows, title)
        return Drawn()

    def set_rows(self, rows: list[CompileRow], title: str) -> None:
        self.rows = rows
        self.opened_row = None
        t = self.table
        t.clear()
        # text from the logs (paths, reasons) is never read as markup: every cell is a Text
        self.query_one("#compile-title", Label).update(Text(title))
        for r in rows:
            style = STATUS_STYLE.get(r.what, "") if r.what in STATUS_STYLE else KIND_STYLE.get(r.what, "")
            event = Text(r.what, style=style)
            label = Text(r.label, style="bold" if r.what in STATUS_STYLE else "")
            t.add_row(
                Text(str(r.rank)),
                label,
                event,
                Text(r.where),
                Text(_cut(r.text), style="red" if r.what == "failed" else ""),
                Text(r.function, style="" if r.what in STATUS_STYLE else "dim"),
            )
        self.show_detail()

    def select(self, rank: int, label: str, what: str | None = None) -> bool:
        """Move the cursor to a row (a finding's compile event: `what` its kind, else the compile's
        own row, the first of its label) and show it."""
        for i, r in enumerate(self.rows):
            if r.rank == rank and r.label == label and (what is None or r.what == what):
                self.opened_row = i
                self.table.move_cursor(row=i)
                self.show_detail(lines=True)
                self.post_message(self.Chosen(r.rank, r.compile_id))
                return True
        return False

    @property
    def current(self) -> CompileRow | None:
        i = self.table.cursor_row
        return self.rows[i] if 0 <= i < len(self.rows) else None

    def detail_text(self, r: CompileRow | None, *, lines: bool = False) -> Text:
        from graphtrain_inspect.inspector.read.source_lines import surrounding_lines

        out = Text()
        if r is None:
            return out
        out.append(f"rank {r.rank} {r.label} {r.what}", style=STATUS_STYLE.get(r.what) or KIND_STYLE.get(r.what, ""))
        out.append(f"  {r.function}  {r.where}\n")
        out.append(r.text)
        body = r.detail.strip()
        if not lines:
            out.append("\nEnter: the source lines, the graphs of this compile and the whole reason", style="dim")
            return out
        around = surrounding_lines(r.frame, context=3) if r.frame else None
        if around is None:
            out.append("\n(no source line)" if not r.frame else "\n(the file is not on this machine)", style="dim")
        else:
            width = len(str(around[-1][0]))
            for n, text in around:
                mark = n == r.frame["line"]  # type: ignore[index]
                out.append(f"\n{'>' if mark else ' '}{n:>{width}} ", style="bold" if mark else "dim")
                out.append(text, style="bold" if mark else "")
        graphs = self.graphs_of(r.rank, r.compile_id) if self.graphs_of else []
        out.append(f"\ngraphs of compile {r.compile_id} on rank {r.rank}: ", style="bold")
        out.append(", ".join(graphs) if graphs else "none (torch logged no graph for it)")
        if graphs:
            out.append("   (the first is selected in the tree: 1 shows its code)", style="dim")
        if body and body != r.text:
            out.append(
                "\n" + "\n".join(body.splitlines()[:20]) + ("\n…" if len(body.splitlines()) > 20 else ""), style="dim"
            )
        return out

    def show_detail(self, *, lines: bool = False) -> None:
        self.query_one("#compile-detail", Static).update(self.detail_text(self.current, lines=lines))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_detail(lines=self.table.cursor_row == self.opened_row)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        r = self.current
        if r is not None:
            self.opened_row = self.table.cursor_row
            self.show_detail(lines=True)
            self.post_message(self.Chosen(r.rank, r.compile_id))
