"""The compile-events view's part of the app (a mixin of `graphtrain_inspect.tui.app.InspectApp`):
filling the view, Enter on an event (the compile's graphs selected in the tree), a compile
finding or a failed compile in the tree opening its row."""

from __future__ import annotations

from textual.widgets import TabbedContent, Tree

from graphtrain_inspect.inspector.read.compile_events import base_compile_id
from graphtrain_inspect.tui.session import Place
from graphtrain_inspect.tui.widgets.capture_tree import CompileData
from graphtrain_inspect.tui.widgets.compile_view import CompileView

# finding kind -> the compile view's row it opens (None: the compile's own row)
COMPILE_FINDING_ROWS = {
    "compile-failure": "failed",
    "graph-break": "break",
    "recompile": "recompile",
    "rank-divergent-compile": None,
}
COMPILE_FINDING_KINDS = frozenset(COMPILE_FINDING_ROWS)


class CompileActions:
    pending_compile: tuple[list[int], str, str | None] | None = (
        None  # (ranks, label, row kind) to show once the view is filled
    )

    def apply_pending_compile(self) -> None:
        """The compile view was just filled: show the event asked for before it was."""
        view = self.query_one(CompileView)
        if self.pending_compile is not None:
            ranks, label, what = self.pending_compile
            self.pending_compile = None
            if any(view.select(r, label, what) for r in ranks):
                view.table.focus()

    def compile_places(self, rank: int, compile_id: str) -> list[Place]:
        """The tree's graphs (pipelines) of one compile on one rank, in order."""
        r = self.session.outline.rank(rank) if self.session else None
        if r is None:
            return []
        return [
            Place(rank, pl.index)
            for pl in r.pipelines
            if pl.compile_id and base_compile_id(pl.compile_id) == compile_id
        ]

    def compile_graphs(self, rank: int, compile_id: str) -> list[str]:
        r = self.session.outline.rank(rank) if self.session else None
        by_index = {pl.index: pl for pl in r.pipelines} if r else {}
        out = []
        for p in self.compile_places(rank, compile_id):
            pl = by_index[p.pipeline]
            out.append(f"graph {pl.index}" + (f" ({pl.traced_nodes} nodes)" if pl.traced_nodes is not None else ""))
        return out

    def open_compile_event(self, ranks: list[int], label: str, what: str | None = None) -> bool:
        """Show the compile view at the row of `label` ([0/1], [0/0_1]) on the first of `ranks`
        that has it (of kind `what`, a break say; None: the compile's own row)."""
        view = self.query_one(CompileView)
        self.query_one(TabbedContent).active = "compile"
        if view.rows and any(view.select(r, label, what) for r in ranks):
            view.table.focus()
            return True
        self.pending_compile = (ranks, label, what)
        self.refresh_view()
        return True

    # handlers go by name (Textual collects @on handlers of the app's own class only)
    def on_compile_view_chosen(self, m: CompileView.Chosen) -> None:
        places = self.compile_places(m.rank, m.compile_id)
        if places:
            self.tree.reveal(places[0])

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        data = event.node.data
        if isinstance(data, CompileData):
            self.open_compile_event([data.rank], data.label, "failed")
