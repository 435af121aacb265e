"""Symbols, devices and reading problems of the selected graph, each a titled table.

Enter on a symbol or a device row jumps to its node in the code view (`NodeChosen`).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Label

from graphtrain_inspect.inspector.checks.symbol_rows import SymbolRow
from graphtrain_inspect.inspector.read.device_rows import DeviceRow
from graphtrain_inspect.tui.escaping import plain
from graphtrain_inspect.tui.widgets.record_table import RecordTable
from graphtrain_inspect.tui.widgets.view_result import Drawn, ResultContext


def _few(items: list[str], n: int = 3) -> str:
    if len(items) <= n:
        return ", ".join(items)
    return ", ".join(items[:n]) + f" +{len(items) - n}"


class NodeChosen(Message):
    def __init__(self, rank: int | None, node: str, subgraph: str | None) -> None:
        super().__init__()
        self.rank = rank
        self.node = node
        self.subgraph = subgraph


class TableTab(Vertical):
    DEFAULT_CSS = """
    TableTab > .tab-title { height: 1; padding: 0 1; color: $text-muted; }
    """

    COLUMNS: tuple[str, ...] = ()

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.targets: list[tuple[int | None, str, str | None] | None] = []

    def compose(self) -> ComposeResult:
        yield Label("", classes="tab-title")
        yield RecordTable()

    def on_mount(self) -> None:
        self.table.add_columns(*self.COLUMNS)

    @property
    def table(self) -> RecordTable:
        return self.query_one(RecordTable)

    def set_title(self, text: str) -> None:
        self.query_one(".tab-title", Label).update(plain(text))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        i = event.cursor_row
        if 0 <= i < len(self.targets) and self.targets[i] is not None:
            rank, node, sub = self.targets[i]  # type: ignore[misc]
            self.post_message(NodeChosen(rank, node, sub))


class SymbolsView(TableTab):
    COLUMNS = ("symbol", "status", "bound by", "inputs", "used by", "uses", "range", "note")

    def show_result(self, rows: list[SymbolRow], extra, ctx: ResultContext) -> Drawn:
        self.set_rows(rows, ctx.label)
        return Drawn()

    def set_rows(self, rows: list[SymbolRow], title: str) -> None:
        t = self.table
        t.clear()
        self.targets = []
        stale = sum(1 for r in rows if r.stale)
        self.set_title(f"{title} · {len(rows)} symbols" + (f" · {stale} stale" if stale else ""))
        for r in rows:
            status = (
                Text("STALE", style="bold red")
                if r.stale
                else (Text("unknown", style="yellow") if r.known is False else Text("ok", style="green"))
            )
            name = Text(r.symbol, style="bold" if r.unbacked else "dim")
            note = r.stale or (f"= {r.replacement}" if r.replacement else ("" if r.unbacked else "backed"))
            t.add_row(name, status, _few(r.bound_by), _few(r.inputs), _few(r.used_by), str(r.uses), r.range, note)
            self.targets.append((None, r.first_node[1], r.first_node[0] or None) if r.first_node else None)


class DevicesView(TableTab):
    COLUMNS = ("rank", "kind", "node", "device", "mismatch", "where", "detail")

    def show_result(self, rows: list[DeviceRow], extra, ctx: ResultContext) -> Drawn:
        self.set_rows(rows, ctx.label + " on every rank")
        return Drawn()

    def set_rows(self, rows: list[DeviceRow], title: str) -> None:
        t = self.table
        t.clear()
        self.targets = []
        bad = sum(1 for r in rows if r.mismatch)
        self.set_title(f"{title} · {bad} mismatch{'es' if bad != 1 else ''}" if bad else f"{title} · no mismatches")
        for r in rows:
            mm = Text("✗ " + r.mismatch, style="bold red") if r.mismatch else Text("")
            if r.kind == "rank":
                t.add_row(
                    Text(f"rank {r.rank}", style="bold"),
                    Text("own device", style="bold"),
                    "",
                    Text(r.device or "?", style="bold"),
                    mm,
                    "",
                    r.detail,
                )
                self.targets.append(None)
                continue
            node = f"{r.subgraph}:{r.node}" if r.subgraph else (r.node or "")
            t.add_row(
                str(r.rank),
                r.kind,
                node,
                Text(r.device or "", style="red" if r.mismatch else ""),
                mm,
                r.where or "",
                r.detail,
            )
            self.targets.append((r.rank, r.node, r.subgraph) if r.node else None)


class ProblemsView(TableTab):
    COLUMNS = ("where", "rank", "problem")

    def set_rows(self, rows: list[tuple[str, str, str]]) -> None:
        t = self.table
        t.clear()
        self.targets = []
        self.set_title(
            f"{len(rows)} reading problem{'s' if len(rows) != 1 else ''} (file:line: message)"
            if rows
            else "no reading problems"
        )
        for where, rank, msg in rows:
            t.add_row(where, rank, Text(msg, style="yellow"))
            self.targets.append(None)
