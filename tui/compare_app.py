"""`tui BASE NEW`: two runs compared as `compare BASE NEW` compares them, to browse.

The passes that changed come first (changed, then changed with their input, added, removed,
renamed), then, with `a`, every other pass; the selected pass's output graph in BASE against NEW
is shown node by node on each pair of ranks where it changed; the findings that are new, gone or
changed in grade are listed below. The runs are read, compared and checked in a worker thread, as
is each diff, so the screen answers while a large capture is read.

Text from a capture is data: every text is a `Text` (no markup read from it), and every rendered
line passes the app's escaping filter (tui/escaping.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Footer, Static

from graphtrain_inspect.tui import escaping
from graphtrain_inspect.tui.escaping import ESCAPE_CONTROLS

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.checks.finding_changes import FindingChange
    from graphtrain_inspect.inspector.checks.two_runs import StageChange, TwoRuns

# the order the passes are listed in: what changed first
ORDER = {"changed": 0, "input changed": 1, "added": 2, "removed": 3}
COLOURS = {"changed": "red", "input changed": "yellow", "added": "green", "removed": "red", "same": "dim"}
NODE_LINES = 300  # node changes shown per pair of ranks


class CompareApp(App[int]):
    TITLE = "graphtrain-inspect compare"
    CSS = """
    #runs { height: auto; padding: 0 1; background: $boost; }
    #body { height: 1fr; }
    #stages { width: 55%; }
    #detail-scroll { width: 45%; border-left: solid $primary; padding: 0 1; }
    #findings { height: auto; max-height: 12; padding: 0 1; border-top: solid $primary; }
    """
    BINDINGS = [
        Binding("a", "toggle_all", "All passes", id="compare.all"),
        Binding("q", "quit", "Quit", id="compare.quit"),
    ]

    def __init__(
        self,
        base: str,
        new: str,
        *,
        source: str = "auto",
        shared_graph: bool = False,
        jobs: int = 1,
        labels: tuple[str, str] | None = None,
    ) -> None:
        escaping.install()  # text from a capture shows its escapes, never loses characters
        super().__init__()
        self.base_path, self.new_path = base, new
        self.labels = labels or (base, new)
        self.source, self.shared_graph, self.jobs = source, shared_graph, jobs
        self.runs: TwoRuns | None = None
        self.stages: list[StageChange] = []
        self.changes: list[FindingChange] | None = None
        self.show_all = False
        self.shown: list[StageChange] = []  # the table's rows, in order
        self.detail_lines: list[str] = []  # what the detail pane shows, as text
        self.error: str | None = None
        self._caps: list[Any] = []

    def get_line_filters(self):
        return [*super().get_line_filters(), ESCAPE_CONTROLS]

    def compose(self) -> ComposeResult:
        yield Static(Text(f"reading {self.labels[0]} and {self.labels[1]} ..."), id="runs")
        with Horizontal(id="body"):
            yield DataTable(id="stages", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="detail-scroll"):
                yield Static(Text(""), id="detail")
        yield Static(Text(""), id="findings")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#stages", DataTable)
        table.add_columns("where", "pass", "what")
        self.run_worker(self._load, thread=True, group="load")

    def on_unmount(self) -> None:
        for cap in self._caps:
            cap.close()

    # -- reading ----------------------------------------------------------------------------------

    def _load(self) -> None:
        from graphtrain_inspect.inspector.checks import check_report
        from graphtrain_inspect.inspector.checks.finding_changes import match_findings
        from graphtrain_inspect.inspector.checks.two_runs import TwoRuns
        from graphtrain_inspect.inspector.errors import InspectorError
        from graphtrain_inspect.inspector.read.capture_index import open_capture

        try:
            base = open_capture(self.base_path, source=self.source)
            self._caps.append(base)
            new = open_capture(self.new_path, source=self.source)
            self._caps.append(new)
            runs = TwoRuns(base, new)
            stages = runs.compare()
            found = [check_report(c, shared_graph=self.shared_graph, jobs=self.jobs).findings for c in (base, new)]
            changes = match_findings(found[0], found[1], runs)
        except InspectorError as e:
            self.call_from_thread(self._failed, str(e))
            return
        self.call_from_thread(self._show, runs, stages, changes)

    def _failed(self, message: str) -> None:
        self.error = message
        self.query_one("#runs", Static).update(Text(message, style="red"))

    def _show(self, runs: "TwoRuns", stages: list["StageChange"], changes: list["FindingChange"]) -> None:
        self.runs, self.stages, self.changes = runs, stages, changes
        head = Text()
        head.append(f"base {self.labels[0]} ({len(runs.base.ranks)} ranks)", style="bold")
        head.append("  vs  ")
        head.append(f"new {self.labels[1]} ({len(runs.new.ranks)} ranks)\n", style="bold")
        for text, kind in runs.pairing_lines():
            head.append(text + "\n", style={"note": "dim", "unpaired": "yellow"}.get(kind, ""))
        new_errors = sum(1 for c in changes if c.adds_error())
        counts: dict[str, int] = {}
        for s in stages:
            counts[s.status] = counts.get(s.status, 0) + 1
        head.append(", ".join(f"{n} {k}" for k, n in counts.items()))
        head.append(
            f"  ·  {new_errors} new error(s)" if new_errors else "  ·  nothing new is wrong",
            style="red" if new_errors else "green",
        )
        self.query_one("#runs", Static).update(head)
        self._fill_table()
        self._fill_findings()

    # -- the views ----------------------------------------------------------------------------------

    def _fill_table(self) -> None:
        from graphtrain_inspect.inspector.read.stages import pipeline_label

        runs = self.runs
        if runs is None:
            return
        table = self.query_one("#stages", DataTable)
        table.clear()
        moved = [s for s in self.stages if s.status != "same" or s.renamed]
        moved.sort(key=lambda s: ORDER.get(s.status, 4))
        self.shown = moved + ([s for s in self.stages if s not in moved] if self.show_all else [])
        for s in self.shown:
            colour = COLOURS.get(s.status, "")
            table.add_row(Text(pipeline_label(s.pipeline)), Text(s.label()), Text(runs.describe(s), style=colour))
        if not moved and not self.show_all:
            self.query_one("#detail", Static).update(
                Text("every pass's output is the same on every pair of ranks (a: list them)", style="green")
            )

    def _fill_findings(self) -> None:
        from graphtrain_inspect.capture.shared.rank_ranges import format_ranks

        out = Text()
        changes = self.changes or []
        if not changes:
            out.append("findings: the same in both runs", style="green")
        for c in changes:
            f = c.finding
            grade = f"{c.base.severity} -> {f.severity}" if c.status == "graded" and c.base else f.severity
            ranks = format_ranks(f.ranks) if f.ranks else "-"
            colour = {"error": "red", "warning": "yellow"}.get(f.severity, "blue")
            out.append(f"{c.status.upper():<7} {grade:<16} ", style=colour)
            out.append(f"{f.kind}  {f.node or '-'}  ranks {ranks}  {f.message}\n")
        self.query_one("#findings", Static).update(out)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if 0 <= event.cursor_row < len(self.shown):
            self.run_worker(
                lambda: self._detail(self.shown[event.cursor_row]), thread=True, group="detail", exclusive=True
            )

    def _detail(self, s: "StageChange") -> None:
        from graphtrain_inspect.inspector.checks.two_runs import CHANGED, run_diff

        runs = self.runs
        if runs is None:
            return
        lines = [f"{s.label()}: {runs.describe(s)}"]
        for c in s.ranks:
            if c.status != CHANGED or s.base is None or s.new is None:
                continue
            sb = runs.base_index.across(s.base).get(c.base_rank)
            sn = runs.new_index.across(s.new).get(c.new_rank)
            d = run_diff(runs.base, c.base_rank, sb.gid, runs.new, c.new_rank, sn.gid) if sb and sn else None
            lines.append("")
            lines.append(f"{runs.ranks.label(c.base_rank, c.new_rank)}: base vs new")
            if d is None:
                lines.append("  graph tables unreadable in one of the runs")
                continue
            k = d.counts
            lines.append(f"  nodes: {k['added']} added, {k['removed']} removed, {k['changed']} changed")
            for i, ch in enumerate(d.changes()):
                if i == NODE_LINES:
                    lines.append("  ...")
                    break
                lines.append("  " + ch.summary())
        self.call_from_thread(self._show_detail, lines)

    def _show_detail(self, lines: list[str]) -> None:
        self.detail_lines = lines
        text = Text()
        for line in lines:
            style = {"+": "green", "-": "red", "~": "yellow"}.get(line.strip()[:1], "")
            text.append(line + "\n", style=style)
        self.query_one("#detail", Static).update(text)

    def action_toggle_all(self) -> None:
        self.show_all = not self.show_all
        self._fill_table()
