"""The views on the right, declared once: one row per view, in the order of the tabs and keys.

The app derives everything about a view from its row: the tab (`compose`), the key that opens it
and its line in F1's key list (`InspectApp.BINDINGS`), its line in F1's introduction, its entry in
the command palette, the widget keys act on (`view_widget`), and how it is filled (`refresh_view`:
the guard, then the job in a worker thread, then the widget's `show_result`).

Adding a view is a row here and a widget with `show_result(payload, extra, ctx) -> Drawn`
(`widgets/view_result.py`): the job returns `(payload, extra)` and runs in a worker thread, so it
reads the capture only through the session (whose methods take its lock). No textual in the
jobs and guards: they see the session and the place, never the app.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from textual.widget import Widget

from graphtrain_inspect.tui.session import CaptureSession, Place
from graphtrain_inspect.tui.widgets.code_view import CodeView
from graphtrain_inspect.tui.widgets.compile_view import CompileView
from graphtrain_inspect.tui.widgets.diff_view import DiffView
from graphtrain_inspect.tui.widgets.findings_view import FindingsView
from graphtrain_inspect.tui.widgets.output_code_view import OutputCodeView
from graphtrain_inspect.tui.widgets.table_views import DevicesView, ProblemsView, SymbolsView

# (session, place, base rank of the rank diff) -> (payload, extra), in a worker thread
Job = Callable[[CaptureSession, Place, int], tuple[Any, Any]]


@dataclass(frozen=True)
class Skip:
    """What a view shows when its guard says the job does not apply: a line in the view (its
    `clear`) and, when given, the view's title."""

    message: str
    title: str | None = None


@dataclass(frozen=True)
class View:
    """One view. Its widgets get ids from `id`: `#<id>-view`, and `#<id>-title` / `#<id>-status`
    for the lines above it when `title_line` / `status_line`."""

    id: str  # the tab's id, and the name in `show_view('<id>')` and the binding id `view.<id>`
    key: str  # the key that opens it
    tab: str  # the tab's label, and the view's name in F1's introduction
    title: str  # its name in the palette ("view: <title>"), "loading <title>…" and errors
    help: str  # F1's line: what it shows
    widget: Callable[..., Widget]  # the widget's class (or a partial with its arguments), built with id=
    job: Job | None = None  # None: filled by the app as results arrive (the findings, the problems)
    guard: Callable[[CaptureSession, Place], Skip | None] | None = None  # checked before the job, on the UI thread
    whole_capture: bool = False  # of the whole capture: selecting another place leaves it be
    title_line: bool = False
    status_line: bool = False
    inner: str | None = None  # the widget's attribute that keys act on (search, copy, focus): a table
    short_tab: str | None = None  # the tab's label when the tab bar is too narrow for every tab whole
    key_help: str | None = None  # the key's description in F1 when it says more than `title`

    @property
    def binding_description(self) -> str:
        return self.key_help or self.title


def _traced_graph_has_no_pass(session: CaptureSession, place: Place) -> Skip | None:
    if place.seq is not None:
        return None
    return Skip(
        "the traced graph has no pass: select a pass to see what it changed",
        f"{place.label(session.outline)}: traced graph",
    )


def _one_rank(session: CaptureSession, place: Place) -> Skip | None:
    return Skip("one rank only: nothing to compare") if len(session.cap.ranks) < 2 else None


VIEWS: tuple[View, ...] = (
    View(
        id="code",
        key="1",
        tab="Code",
        title="Code",
        help="the graph after the selected pass (or the traced graph)",
        widget=CodeView,
        job=lambda s, place, base: (s.graph_text(place), None),
        title_line=True,
    ),
    View(
        id="pass-diff",
        key="2",
        tab="Pass diff",
        title="Pass diff",
        help="what the pass changed, before against after",
        widget=DiffView,
        job=lambda s, place, base: (s.pass_diff(place), None),
        guard=_traced_graph_has_no_pass,
        title_line=True,
        short_tab="Pass Δ",
    ),
    View(
        id="rank-diff",
        key="3",
        tab="Rank diff",
        title="Rank diff",
        help="the graph on another rank against a base rank, normalized as in `diff`",
        widget=partial(DiffView, across_ranks=True),
        job=lambda s, place, base: s.rank_diff(place, base),
        guard=_one_rank,
        title_line=True,
        status_line=True,
        short_tab="Rank Δ",
    ),
    View(
        id="findings",
        key="4",
        tab="Findings",
        title="Findings",
        help="what `check` finds; Enter: the node, with its rank and pass selected",
        widget=FindingsView,
        whole_capture=True,
        inner="table",
    ),
    View(
        id="symbols",
        key="5",
        tab="Symbols",
        title="Symbols",
        help="unbacked symbols of the graph: who binds, who uses them, stale ones",
        widget=SymbolsView,
        job=lambda s, place, base: (s.symbols(place), None),
        inner="table",
        short_tab="Syms",
    ),
    View(
        id="devices",
        key="6",
        tab="Devices",
        title="Devices",
        help="each rank's own device and the devices baked into the graph",
        widget=DevicesView,
        job=lambda s, place, base: (s.devices(place), None),
        inner="table",
        short_tab="Devs",
    ),
    View(
        id="problems",
        key="7",
        tab="Problems",
        title="Problems",
        help="what could not be read, as file:line: message",
        widget=ProblemsView,
        whole_capture=True,
        inner="table",
    ),
    View(
        id="output-code",
        key="8",
        tab="Output code",
        title="Output code",
        help="the code Inductor generated; i: from a node to its kernel, I: back",
        widget=OutputCodeView,
        job=lambda s, place, base: s.output_code(place),
        title_line=True,
        short_tab="Output",
        key_help="Output code (Inductor)",
    ),
    View(
        id="compile",
        key="9",
        tab="Compile",
        title="Compile events",
        help="torch.compile's events per rank (breaks, recompiles) and where ranks part",
        widget=CompileView,
        # read from the whole capture: the app runs it again once the capture is all indexed
        job=lambda s, place, base: s.compile_rows(),
        whole_capture=True,
        inner="table",
        short_tab="Comp",
        key_help="Compile events (torch.compile)",
    ),
)
