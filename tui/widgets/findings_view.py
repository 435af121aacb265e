"""What `check` finds, as a table filtered by kind, severity, rank and pass; Enter jumps to it.

Below the table, the highlighted finding in full with its source line (the node's innermost
stack frame); `o` shows the lines around it when the file exists on this machine."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Label, Select, Static

from graphtrain_inspect.tui.escaping import plain
from graphtrain_inspect.tui.widgets.record_table import RecordTable

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
NODE_WIDTH = 18  # a node name longer than this loses its middle in the table
RANKS_WIDTH = 10
MESSAGE_WIDTH = 72  # the table's part of the message; the detail pane has all of it
SOURCE_CONTEXT = 4  # lines either side of the source line (`o`): the marked line stays in the pane at 40 rows


def node_name(f) -> str:
    return f"{f.subgraph}:{f.node}" if f.subgraph else (f.node or "-")


def where_line(f) -> str:
    """The finding's node (whole), ranks and passes, under its message in the detail pane."""
    from graphtrain_inspect.capture.shared.rank_ranges import format_ranks

    where = {None: "in the capture itself", "trace": "already in the traced graph"}.get(
        f.introduced_by, f"introduced by {f.introduced_by}"
    )
    if f.pass_ and f.pass_ != f.introduced_by:
        where += f", still present after {f.pass_}"
    ranks = format_ranks(f.ranks) if f.ranks else "-"
    return f"node {node_name(f)} · ranks {ranks} · {where}"


def _with_count(f) -> str:
    """A root cause's message in the table, with how many findings follow from it (listed in the
    detail pane)."""
    n = len(f.consequences or ())
    return f"(+{n} consequence{'s' if n != 1 else ''}) {f.message}" if n else f.message


def _append_consequences(out: Text, f) -> None:
    """The findings that follow from `f`, each with its own severity, kind, node and message."""
    from graphtrain_inspect.inspector.checks.root_causes import consequence_label

    if not f.consequences:
        return
    out.append(f"{len(f.consequences)} consequence(s) of this finding:\n", style="bold")
    for c in f.consequences:
        out.append(f"  {c.severity.upper()} ", style=SEVERITY_STYLE.get(c.severity, ""))
        out.append(f"{consequence_label(c, f.kind)}: {c.message}\n")


def code_caption(f, root: str | None = None) -> str:
    """A generated-code finding's FX node and source line, for the Output code view's title."""
    from graphtrain_inspect.inspector.read.source_lines import source_text

    ev = f.evidence or {}
    parts = []
    if ev.get("kernel"):
        parts.append(f"{ev['kernel']} line {ev.get('line')}")
    if f.node:
        parts.append(
            f"FX node {f.node}"
            + (f" ({ev['source_node']})" if ev.get("source_node") and ev["source_node"] != f.node else "")
        )
    src = source_text(f.source, root)
    if src:
        parts.append(src)
    return " · ".join(parts)


def checks_note(not_run: list, notes: list) -> str:
    """What was not checked and why (`check`'s `not_run` and notes), for the status line."""
    reasons: dict[str, list[str]] = {}
    for n in not_run or []:  # checks skipped for one reason together, as `check` prints them
        if isinstance(n, dict):
            reasons.setdefault(str(n.get("reason")), []).append(str(n.get("check")))
    parts = [f"not run: {', '.join(checks)}: {reason}" for reason, checks in reasons.items()]
    parts += [f"note: {n}" for n in notes or []]
    return " · ".join(parts)


class FindingsView(Vertical):
    DEFAULT_CSS = """
    FindingsView #findings-filters { height: 3; }
    FindingsView #findings-filters Select { width: 1fr; }
    FindingsView #findings-status { width: 100%; height: auto; max-height: 3; color: $text-muted; padding: 0 1; }
    FindingsView #finding-detail { height: auto; max-height: 50%; padding: 0 1; border-top: solid $primary-darken-2; }
    """

    BINDINGS = [
        Binding("o", "show_source", "Source lines around the finding", id="findings.source"),
        Binding("i", "toggle_info", "Show or hide info findings", id="findings.info"),
        Binding("s", "toggle_shared_graph", "Grade as a shared graph, or per rank", id="findings.shared-graph"),
    ]

    class SeverityChanged(Message):
        """The severity filter changed: the tab's count and the tree's badges follow it."""

    class SharedGraphToggled(Message):
        """`s`: run the checks again with the other grading (check --shared-graph or not)."""

    class Chosen(Message):
        """Enter on a finding: the app jumps to it."""

        def __init__(self, finding) -> None:
            super().__init__()
            self.finding = finding

    FILTERS = ("kind", "severity", "rank", "pass")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.findings: list = []
        self.shown: list = []  # the table's rows: each root cause shown, then its consequences
        self.roots: list = []  # the root causes shown (what the tab and status line count)
        self.filters: dict[str, object] = {k: Select.NULL for k in self.FILTERS}
        self.checks_note = ""  # the checks that did not run and the notes, after the counts
        self.shared_graph = False  # how the findings in view were graded (the app's check flag)
        self.source_root: str | None = None  # where the recorded program ran: source paths under it shown relative
        self.sample: str | None = None  # the bundled capture's name: its sources are read from the installed package

    def compose(self) -> ComposeResult:
        with Horizontal(id="findings-filters"):
            for k in self.FILTERS:
                yield Select([], prompt=k, id=f"filter-{k}", allow_blank=True)
        yield Label("running checks…", id="findings-status")
        yield RecordTable(id="findings-table")
        yield Static("", id="finding-detail")

    def on_mount(self) -> None:
        t = self.query_one(RecordTable)
        # what tells the rows apart first (node, ranks, the start of the message), then the rest:
        # at 120 columns the view is ~75 wide and the message must not start off screen
        t.add_columns("sev", "node", "ranks", "message", "kind", "introduced by", "still after")

    @property
    def table(self) -> RecordTable:
        return self.query_one(RecordTable)

    def set_findings(self, findings: list, status: str | None = None, ranks: list[int] | None = None) -> None:
        from graphtrain_inspect.inspector.checks import FINDING_KINDS, SEVERITIES

        self.findings = list(findings)
        options = {
            "kind": list(dict.fromkeys([*FINDING_KINDS, *sorted({f.kind for f in findings})])),
            "severity": list(SEVERITIES),
            "rank": sorted(set(ranks or []) | {r for f in findings for r in f.ranks}),
            "pass": list(dict.fromkeys(f.introduced_by or "?" for f in findings)),
        }
        for k, values in options.items():
            sel = self.query_one(f"#filter-{k}", Select)
            current = sel.value
            with self.prevent(Select.Changed):
                sel.set_options([(plain(v), v) for v in values])
                if current in values:
                    sel.value = current
        self.query_one("#findings-status", Label).update(plain(status or self._status()))
        self.apply_filters()

    @property
    def severity_floor(self) -> str | None:
        """The severity filter as `check --severity` reads it (None: errors and warnings)."""
        v = self.filters["severity"]
        return None if v is Select.NULL else str(v)

    def visible(self, findings: list) -> list:
        """The findings the severity filter lets through, as `check` shows them."""
        from graphtrain_inspect.inspector.checks.severity_filter import at_least

        return at_least(findings, self.severity_floor)

    def _status(self) -> str:
        from graphtrain_inspect.inspector.checks.severity_filter import hidden_info, summary

        head, more = summary(self.visible(self.findings), hidden_info(self.findings, self.severity_floor), self.how())
        parts = (
            [head]
            + ([more] if more else [])
            + (["Enter: go to it"] if self.findings else [])
            + ([self.checks_note] if self.checks_note else [])
        )
        return " · ".join(parts)

    def how(self) -> str:
        """The keys that show what the counts leave out, as every count of hidden findings says it."""
        return "i shows them" + ("" if self.shared_graph else ", s grades as shared graph")

    def action_toggle_info(self) -> None:
        self.set_filter("severity", Select.NULL if self.severity_floor == "info" else "info")

    def action_toggle_shared_graph(self) -> None:
        self.post_message(self.SharedGraphToggled())

    def set_status(self, text: str) -> None:
        self.query_one("#findings-status", Label).update(plain(text))

    def set_filter(self, key: str, value) -> None:
        """Filter by kind, severity, rank or pass (Select.NULL for any)."""
        self.query_one(f"#filter-{key}", Select).value = value
        self.filters[key] = value
        self.apply_filters()
        if key == "severity":
            self.query_one("#findings-status", Label).update(plain(self._status()))
            self.post_message(self.SeverityChanged())

    def on_select_changed(self, event: Select.Changed) -> None:
        key = (event.select.id or "").removeprefix("filter-")
        if key in self.filters:
            self.filters[key] = event.value
            self.apply_filters()
            event.stop()
            if key == "severity":
                self.query_one("#findings-status", Label).update(plain(self._status()))
                self.post_message(self.SeverityChanged())

    def _match(self, f) -> bool:
        v = self.filters
        if v["kind"] is not Select.NULL and f.kind != v["kind"]:
            return False
        if not self.visible([f]):  # at least the severity chosen, errors and warnings without a choice
            return False
        if v["rank"] is not Select.NULL and v["rank"] not in f.ranks:
            return False
        if v["pass"] is not Select.NULL and (f.introduced_by or "?") != v["pass"]:
            return False
        return True

    def apply_filters(self) -> None:
        from graphtrain_inspect.capture.shared.rank_ranges import format_ranks
        from graphtrain_inspect.capture.shared.terminal_text import truncate
        from graphtrain_inspect.tui.widgets.name_abbrev import kept_spans, render

        t = self.table
        t.clear()
        # each root cause, then its consequences under it (Enter on one goes to it, as on any row)
        self.roots = [f for f in self.findings if self._match(f)]
        self.shown = [g for f in self.roots for g in f.with_consequences()]
        under = {id(c) for f in self.shown for c in f.consequences}
        names = [node_name(f) for f in self.shown]
        t.whole = [
            (
                f.severity.upper(),
                node,
                ",".join(map(str, f.ranks)),
                f.message,
                f.kind,
                f.introduced_by or "?",
                f.pass_ or "",
            )
            for f, node in zip(self.shown, names)
        ]
        for i, (f, node) in enumerate(zip(self.shown, names)):
            # long names lose their middle, keeping what tells them from the others shown (the
            # detail pane below has the name whole); a message longer than a line is there too
            t.add_row(
                Text(f.severity.upper(), style=SEVERITY_STYLE.get(f.severity, "")),
                render(node, kept_spans(node, NODE_WIDTH, names)),
                truncate(format_ranks(f.ranks) if f.ranks else "-", RANKS_WIDTH),
                truncate(("↳ " if id(f) in under else "") + _with_count(f), MESSAGE_WIDTH),
                f.kind,
                f.introduced_by or "?",
                f.pass_ or "",
                key=str(i),
            )

    @property
    def current(self):
        t = self.table
        if not self.shown or t.cursor_row >= len(self.shown):
            return None
        return self.shown[t.cursor_row]

    def detail_text(self, f, *, lines: bool = False) -> Text:
        """The finding in full: severity, kind, message, and its source line; with `lines`, the
        lines of the source file around it (or why they cannot be shown)."""
        from graphtrain_inspect.inspector.checks.evidence import evidence_lines
        from graphtrain_inspect.inspector.read.source_lines import source_text, surrounding_lines

        out = Text()
        if f is None:
            return out
        out.append(f"{f.severity.upper()} ", style=SEVERITY_STYLE.get(f.severity, ""))
        out.append(f"{f.kind}: {f.message}\n")
        out.append(where_line(f) + "\n", style="dim")
        for line in evidence_lines(f):
            out.append(f"evidence: {line}\n", style="dim")
        _append_consequences(out, f)
        src = source_text(f.source, self.source_root)
        out.append("source: ", style="dim")
        out.append(src or "unknown (the node has no stack trace)")
        if src and f.source and f.source.get("file") and not lines:
            out.append("   o: lines around it", style="dim")
        if lines:
            around = surrounding_lines(f.source, context=SOURCE_CONTEXT)
            local = self._installed(f) if around is None else None
            if local is not None:  # a bundled sample's file, recorded on another machine
                around = surrounding_lines({**(f.source or {}), "file": local}, context=SOURCE_CONTEXT)
                out.append("\n(read from the installed package", style="dim")
                code = str((f.source or {}).get("code") or "").strip()
                at = dict(around or []).get(f.source["line"]) if f.source else None
                if code and at is not None and at.strip() != code:
                    out.append("; it has changed since the capture: the line differs", style="dim")
                out.append(")", style="dim")
            if around is None:
                out.append(
                    "\n(the file is not on this machine)" if f.source and f.source.get("file") else "", style="dim"
                )
            else:
                width = len(str(around[-1][0]))
                for n, text in around:
                    mark = n == f.source["line"]
                    out.append(f"\n{'>' if mark else ' '}{n:>{width}} ", style="bold" if mark else "dim")
                    out.append(text, style="bold" if mark else "")
        return out

    def _installed(self, f) -> str | None:
        """The finding's source file in the installed package, for a bundled sample."""
        from graphtrain_inspect.inspector.read.bundled import installed_source

        src = f.source or {}
        if not self.sample or not src.get("file"):
            return None
        return installed_source(str(src["file"]), self.source_root)

    def show_detail(self, *, lines: bool = False) -> None:
        self.query_one("#finding-detail", Static).update(self.detail_text(self.current, lines=lines))

    def action_show_source(self) -> None:
        self.show_detail(lines=True)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_detail()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        f = self.current
        if f is not None:
            self.post_message(self.Chosen(f))
