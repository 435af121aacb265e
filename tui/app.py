"""The graphtrain-inspect browser: a tree of ranks, graphs and passes; code, diffs, findings.

Everything that reads the capture runs in thread workers (`@work(thread=True, exclusive=True,
group=...)`) and reports back with the messages in `graphtrain_inspect.tui.messages`; the UI thread only lays out
what arrived. A view is filled when it is shown, for the place selected in the tree. The views
are declared in `graphtrain_inspect.tui.views`: their tabs, keys and jobs here come from that table.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Header, Input, Label, ProgressBar, TabbedContent, TabPane, Tree

from graphtrain_inspect.inspector.read.outline import finding_target
from graphtrain_inspect.inspector.read.progressive import ProgressiveLoader
from graphtrain_inspect.tui import escaping
from graphtrain_inspect.tui.capture_loading import CaptureLoading
from graphtrain_inspect.tui.commands import CaptureCommands
from graphtrain_inspect.tui.compile_actions import COMPILE_FINDING_KINDS, COMPILE_FINDING_ROWS, CompileActions
from graphtrain_inspect.tui.escaping import ESCAPE_CONTROLS, plain
from graphtrain_inspect.tui.messages import Progress, ViewReady
from graphtrain_inspect.tui.screens.help import HelpScreen
from graphtrain_inspect.tui.screens.prompt import PromptScreen
from graphtrain_inspect.tui.session import CaptureSession, Place
from graphtrain_inspect.tui.torch_node_counts import TorchNodeCounts
from graphtrain_inspect.tui.view_actions import ViewActions
from graphtrain_inspect.tui.views import VIEWS, View
from graphtrain_inspect.tui.widgets.capture_tree import CaptureTree, RankData, plural
from graphtrain_inspect.tui.widgets.code_view import CodeView
from graphtrain_inspect.tui.widgets.compile_view import CompileView
from graphtrain_inspect.tui.widgets.diff_view import DiffView
from graphtrain_inspect.tui.widgets.findings_view import FindingsView, code_caption
from graphtrain_inspect.tui.widgets.line_view import LineView
from graphtrain_inspect.tui.widgets.output_code_view import OutputCodeView
from graphtrain_inspect.tui.widgets.table_views import NodeChosen
from graphtrain_inspect.tui.widgets.view_result import ResultContext

# The app's keys; each view's key (tui/views.py) is added where `None` stands, so F1 lists them there.
KEYS: list[Binding | None] = [
    Binding("q", "quit", "Quit", id="app.quit"),
    Binding("question_mark,f1", "help", "Help", id="app.help"),
    Binding("slash", "search", "Search", id="app.search"),
    Binding("n", "search_next(1)", "Next match of the search", show=False, id="app.search-next"),
    Binding("N", "search_next(-1)", "Previous match of the search", show=False, id="app.search-previous"),
    Binding("g", "goto_node_prompt", "Go to node", id="app.goto-node"),
    Binding("s", "toggle_diff_mode", "Split/unified", id="diff.toggle-mode"),
    Binding("z", "expand_folds", "Diff: open every folded stretch", show=False, id="diff.expand-all"),
    Binding("b", "cycle_base_rank", "Rank diff: take the next rank as base", show=False, id="rankdiff.base-rank"),
    Binding(
        "left_square_bracket",
        "other_rank(-1)",
        "The same pass on the previous rank",
        show=False,
        id="app.rank-previous",
    ),
    Binding("right_square_bracket", "other_rank(1)", "The same pass on the next rank", show=False, id="app.rank-next"),
    Binding("y", "copy_line", "Copy the line (or table row)", show=False, id="app.copy-line"),
    Binding("Y", "copy_hunk", "Copy the diff hunk around the cursor", show=False, id="app.copy-hunk"),
    Binding("e", "export", "Export", id="app.export"),
    Binding("r", "replay", "Replay pass", id="app.replay"),
    Binding("t", "focus_tree", "Focus the tree", show=False, id="app.focus-tree"),
    Binding("w", "tree_width", "Tree: narrow, hide, restore", show=False, id="app.tree-width"),
    Binding("v", "focus_view", "Focus the view on the right", show=False, id="app.focus-view"),
    Binding("R", "reload", "Read new records now", show=False, id="app.reload"),
    Binding("c", "run_checks", "Run the checks (large captures)", show=False, id="app.run-checks"),
    None,
    Binding("i", "goto_kernel", "Code view: the Inductor kernel computing the node", show=False, id="app.goto-kernel"),
    Binding("I", "goto_fx_node", "Output code: the FX node the kernel computes", show=False, id="app.goto-fx-node"),
]


def sample_label(path: str) -> str | None:
    """`--sample NAME` for a bundled capture (not its place in the cache), None for any other."""
    from graphtrain_inspect.inspector.read.bundled import sample_of

    name = sample_of(path)
    return f"--sample {name}" if name else None


def bindings(views: tuple[View, ...]) -> list[Binding]:
    """The app's keys with a key per view, in the order F1 lists them."""
    per_view = [
        Binding(v.key, f"show_view('{v.id}')", v.binding_description, show=False, id=f"view.{v.id}") for v in views
    ]
    return [b for k in KEYS for b in ([k] if k is not None else per_view)]


class InspectApp(CaptureLoading, ViewActions, CompileActions, TorchNodeCounts, App[int]):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # whole: Textual reads a relative one beside a subclass
    TITLE = "graphtrain-inspect"
    COMMANDS = App.COMMANDS | {CaptureCommands}

    AUTO_CHECK_BYTES = 256 << 20  # larger captures are checked when asked (key c)
    FIRST_STEP_BYTES = 4 << 20
    STEP_BYTES = 32 << 20  # indexed per log between two looks at the clock
    SNAPSHOT_SECONDS = 0.4  # a large capture's tree grows after 0.4 s of indexing, then 0.8 s, 1.6 s ...

    VIEWS = VIEWS  # the views, declared in tui/views.py: everything below about a view comes from its row
    BINDINGS = bindings(VIEWS)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # an app with a table of its own gets its keys from it (before Textual merges the bindings)
        if "VIEWS" in cls.__dict__ and "BINDINGS" not in cls.__dict__:
            cls.BINDINGS = bindings(cls.VIEWS)
        super().__init_subclass__(**kwargs)

    @classmethod
    def view_of(cls, view: str) -> View:
        return next(v for v in cls.VIEWS if v.id == view)

    def __init__(
        self,
        path: str,
        *,
        source: str = "auto",
        keymap: dict[str, str] | None = None,
        keymap_problems: list[str] | None = None,
        poll_seconds: float = 1.0,
        replay_runner=None,
        label: str | None = None,
        shared_graph: bool = False,
    ) -> None:
        escaping.install()  # text from a capture shows its escapes, never loses characters
        super().__init__()
        self.path = str(path)
        self.label = label or sample_label(self.path) or self.path
        self.source = source
        self.shared_graph = (
            shared_graph  # check --shared-graph: the device policy for a graph compiled once, loaded by every rank
        )
        self.user_keymap = dict(keymap or {})
        self.keymap_problems = list(keymap_problems or [])
        self.poll_seconds = poll_seconds
        self.replay_runner = replay_runner  # tests: a callable(argv) -> int instead of a subprocess
        self.session: CaptureSession | None = None
        self.loader: ProgressiveLoader | None = None
        self.capture_lock = threading.RLock()  # the loader and every snapshot share the logs
        self.tree_shown = threading.Event()  # the first tree is on screen
        self.place: Place | None = None
        self.base_rank: int | None = None
        self.findings: list = []
        self.badges: dict = {}
        self.problem_count = 0  # reading problems: counted in the status bar, listed by the Problems view
        self.stale: set[str] = {v.id for v in self.VIEWS}
        self.shown: dict[str, Any] = {}  # view -> key of what it shows
        self.pending_jump: tuple[str, str, str | None, Place | None] | None = None  # (view, node, subgraph, place)
        self.pending_code_line: tuple[int | None, str | None, str] | None = (
            None  # a codegen finding's (line, kernel, caption)
        )
        self.search_query = ""
        self.jobs: dict[str, str] = {}
        self.signature: tuple = ()
        self.checks_dirty = False
        self.load_seconds: float | None = None
        self.first_tree_painted: float | None = None
        self.started = time.perf_counter()
        self.last_replay: list[str] | None = None
        self.kernel_from_node: str | None = None  # the FX node i jumped from: I goes back to it
        self.requests: dict[str, int] = {}
        # a view the user asked to focus while it was loading: Textual refuses focus to a loading
        # widget, so the focus is given when its content arrives
        self.focus_wanted: str | None = None
        self._poll_timer = None
        self.checks_process = None  # the running `check` child, stopped when the app exits

    # -- layout --------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Horizontal(id="main"):
            yield CaptureTree(id="tree")
            with Vertical(id="right"):
                with TabbedContent(id="views", initial=self.VIEWS[0].id):
                    for v in self.VIEWS:
                        with TabPane(v.tab, id=v.id):
                            if v.title_line:
                                yield Label("", id=f"{v.id}-title", classes="view-title")
                            if v.status_line:
                                yield Label("", id=f"{v.id}-status", classes="view-status")
                            yield v.widget(id=f"{v.id}-view")
        with Horizontal(id="search-bar"):
            yield Label("/", id="search-label")
            yield Input(placeholder="search in this view (Enter: next, Esc: close)", id="search-input")
        with Horizontal(id="status-bar"):
            yield Label("", id="status")
            yield ProgressBar(total=None, show_eta=False, show_percentage=False, id="progress")
        yield Footer()

    # -- widgets -----------------------------------------------------------------------------------

    @property
    def tree(self) -> CaptureTree:
        return self.query_one(CaptureTree)

    @property
    def code_view(self) -> CodeView:
        return self.query_one("#code-view", CodeView)

    @property
    def pass_diff_view(self) -> DiffView:
        return self.query_one("#pass-diff-view", DiffView)

    @property
    def rank_diff_view(self) -> DiffView:
        return self.query_one("#rank-diff-view", DiffView)

    @property
    def output_code_view(self) -> OutputCodeView:
        return self.query_one("#output-code-view", OutputCodeView)

    @property
    def findings_view(self) -> FindingsView:
        return self.query_one(FindingsView)

    @property
    def active_view(self) -> str:
        return self.query_one(TabbedContent).active or "code"

    def view_widget(self, view: str | None = None) -> Any:
        """The widget of `view` (the one in front by default) that keys act on."""
        v = self.view_of(view or self.active_view)
        widget = self.query_one(f"#{v.id}-view")
        return getattr(widget, v.inner) if v.inner else widget

    # -- start ---------------------------------------------------------------------------------------

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: Any = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Textual's notification, its message never read as markup: notifications say pass names,
        paths and reading problems (escaping.plain). Widgets' `notify` comes here too."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    def get_line_filters(self):
        # Text from a capture is data: every rendered line shows its control characters escaped.
        return [*super().get_line_filters(), ESCAPE_CONTROLS]

    def on_mount(self) -> None:
        if self.user_keymap:
            self.set_keymap(self.user_keymap)
        for p in self.keymap_problems:
            self.notify(p, title="keymap", severity="warning")
        self.query_one("#search-bar").display = False
        self.title = "graphtrain-inspect"
        self.sub_title = self.label
        self.tree.loading = True
        self.tree.focus()
        self.query_one(CompileView).graphs_of = self.compile_graphs
        self.load_capture()

    def closing(self) -> bool:
        """The app is shutting down: messages from workers that finished late are dropped."""
        return not self.is_running or not self.query("#tree")

    def set_job(self, job: str, text: str | None, fraction: float | None = None) -> None:
        if text is None:
            self.jobs.pop(job, None)
        else:
            self.jobs[job] = text
        status = self.query_one("#status", Label)
        bar = self.query_one("#progress", ProgressBar)
        if self.jobs:
            status.update(plain(" · ".join(self.jobs.values())))
            bar.display = True
            if job == "load" and fraction is not None:
                bar.update(total=100, progress=100 * fraction)
            elif "load" not in self.jobs:
                bar.update(total=None)
        else:
            status.update(plain(self.idle_status()))
            bar.display = False

    def idle_status(self) -> str:
        if self.session is None:
            return ""
        from graphtrain_inspect.inspector.checks.severity_filter import hidden_info

        o = self.session.outline
        fv = self.findings_view
        n = len(fv.visible(self.findings))  # what the Findings tab lists, under the same filter
        hidden = hidden_info(self.findings, fv.severity_floor)
        left_out = f" ({hidden} info not shown: {fv.how()})" if hidden else ""
        live = " · live: watching for new records" if o.live else ""
        place = f" · {self.place.label(o)}" if self.place else ""
        problems = f" · {plural(self.problem_count, 'reading problem')} (key 7)" if self.problem_count else ""
        name = sample_label(self.path) or o.name  # a bundled sample as --sample NAME
        return (
            f"{name}: {plural(len(o.ranks), 'rank')} · {plural(sum(len(r.passes) for r in o.ranks), 'pass')} · "
            f"{plural(n, 'finding')}{left_out}{place}{live}{problems}"
        )

    @on(Progress)
    def on_progress(self, m: Progress) -> None:
        if self.closing():
            return
        self.set_job(m.job, None if m.done else m.text, m.fraction)

    # -- selecting places --------------------------------------------------------------------------

    @on(Tree.NodeHighlighted, "#tree")
    def on_tree_highlighted(self, event: Tree.NodeHighlighted) -> None:
        data = event.node.data
        if isinstance(data, Place):
            self.select_place(data)
        elif isinstance(data, RankData) and self.session is not None:
            r = self.session.outline.rank(data.rank)
            if r and r.pipelines:
                self.select_place(Place(data.rank, r.pipelines[0].index), from_rank=True)

    @on(Tree.NodeSelected, "#tree")
    def on_tree_selected(self, event: Tree.NodeSelected) -> None:
        if isinstance(event.node.data, Place):
            self.select_place(event.node.data)

    def select_place(self, place: Place, *, from_rank: bool = False) -> None:
        if place == self.place and not self.stale:
            return
        changed = place != self.place
        self.place = place
        if changed:
            self.place_changed()
        self.refresh_view()
        self.set_job("idle", None)

    def place_changed(self) -> None:
        """Every view of the place is to be filled again; the views of the whole capture stay."""
        self.stale = {v.id for v in self.VIEWS if not v.whole_capture or v.id in self.stale}

    def open_place(self, place: Place, view: str | None = None) -> None:
        """Select `place` in the tree (and the views follow), optionally showing `view`."""
        if view:
            self.show_view(view)
        if not self.tree.reveal(place):
            self.select_place(place)

    def open_rank(self, rank: int) -> None:
        node = self.tree.rank_node(rank)
        if node is not None:
            node.expand()
            self.tree.move_cursor(node)
            self.tree.focus()

    def action_other_rank(self, step: int) -> None:
        if self.session is None or self.place is None:
            return
        ranks = self.session.cap.ranks
        i = ranks.index(self.place.rank) if self.place.rank in ranks else 0
        for k in range(1, len(ranks)):
            r = ranks[(i + step * k) % len(ranks)]
            other = self.session.same_place_on(self.place, r)
            if other is not None:
                self.open_place(other)
                return
        self.notify("no other rank has this graph", severity="warning")

    # -- views -------------------------------------------------------------------------------------

    def action_show_view(self, view: str) -> None:
        self.show_view(view)
        self.focus_wanted = view
        self.call_after_refresh(self._focus_wanted)

    def _focus_wanted(self) -> None:
        view = self.focus_wanted
        if view is None or view != self.active_view:
            self.focus_wanted = None
            return
        widget = self.view_widget(view)
        if widget.focusable:
            widget.focus()
            self.focus_wanted = None
        # else: still loading; on_view_ready calls this again

    def show_view(self, view: str) -> None:
        self.query_one(TabbedContent).active = view
        self.refresh_view()

    @on(TabbedContent.TabActivated)
    def on_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.refresh_view()

    def refresh_view(self, force: bool = False) -> None:
        view = self.active_view
        if self.session is None or self.place is None:
            return
        if view not in self.stale and not force:
            return
        self.stale.discard(view)
        v = self.view_of(view)
        if v.job is None:
            return  # filled by the app as results come (the checks' findings, the reading problems)
        skip = v.guard(self.session, self.place) if v.guard else None
        if skip is not None:
            self.view_widget(view).clear(skip.message)
            if skip.title is not None:
                self._title(view, skip.title)
            return
        self._load(view, self.place, v.job)

    def _title(self, view: str, text: str) -> None:
        self.query_one(f"#{view}-title", Label).update(plain(text))

    def _load(self, view: str, place: Place, job) -> None:
        widget = self.view_widget(view)
        widget.loading = True
        base = self.base_rank_for(place)
        # exclusive=True marks the older worker cancelled but cannot stop its thread (Textual's
        # thread workers run to the end): its ViewReady still arrives, and may come after this
        # request's `_load`. The counter is what tells on_view_ready to drop it.
        self.requests[view] = request = self.requests.get(view, 0) + 1
        session = self.session
        loading = f"loading {self.view_of(view).title.lower()}…"

        def work() -> None:
            self.post_message(Progress(f"view-{view}", loading))
            try:
                payload, extra = job(session, place, base)
                msg = ViewReady(view, place, payload, extra, request=request)
            except Exception as e:  # noqa: BLE001 - a view's job failing must not take the app down: shown in the view
                msg = ViewReady(view, place, None, error=f"{type(e).__name__}: {e}", request=request)
            self.post_message(msg)
            self.post_message(Progress(f"view-{view}", "", done=True))

        # one worker per view at a time: a newer request cancels the older one
        self.run_worker(work, name=f"view-{view}", group=f"view-{view}", exclusive=True, thread=True)

    def base_rank_for(self, place: Place) -> int:
        """The rank diff's base: the chosen one (b), else the lowest rank."""
        ranks = (self.session.cap.ranks if self.session else None) or [0]
        return self.base_rank if self.base_rank in ranks else ranks[0]  # type: ignore[return-value]

    @on(ViewReady)
    def on_view_ready(self, m: ViewReady) -> None:
        if self.closing():
            return
        widget = self.view_widget(m.view)
        if m.request != self.requests.get(m.view) or m.place != self.place:
            return  # the user moved on; the newer request fills the view
        widget.loading = False
        if self.focus_wanted == m.view:
            self.call_after_refresh(self._focus_wanted)
        outline = self.session.outline if self.session else None
        if m.error:
            self._show_error(m.view, m.error)
            return
        ctx = ResultContext(
            m.place,
            m.place.label(outline),
            self.session,
            lambda what: self._unreadable(m.place, what),
            self.shown.get(m.view),
        )
        drawn = self.query_one(f"#{m.view}-view").show_result(m.payload, m.extra, ctx)
        if drawn.key is not None:
            self.shown[m.view] = drawn.key
        if drawn.status is not None:
            self.query_one(f"#{m.view}-status", Label).update(plain(drawn.status))
        if drawn.title is not None:
            self._title(m.view, drawn.title)
        self._apply_pending_jump(m.view)

    def _unreadable(self, place: Place, what: str) -> str:
        errs = self.session.problems() if self.session else []
        mine = [e for e in errs if e[1] == str(place.rank)]
        tail = f": {mine[-1][0]}: {mine[-1][2]}" if mine else ""
        return f"{what} unreadable on rank {place.rank}{tail}"

    def _show_error(self, view: str, error: str) -> None:
        w = self.view_widget(view)
        if isinstance(w, LineView):
            w.clear(error)  # type: ignore[attr-defined]
        self.notify(error, title=f"{self.view_of(view).title} failed", severity="error")

    # -- jumping to findings and nodes --------------------------------------------------------------

    @on(FindingsView.Chosen)
    def on_finding_chosen(self, m: FindingsView.Chosen) -> None:
        self.jump_to_finding(m.finding)

    def jump_to_finding(self, f) -> bool:
        if self.session is None:
            return False
        if f.kind in COMPILE_FINDING_KINDS:
            label = f.evidence.get("label") or f"[{f.evidence.get('compile_id')}]"
            # rank-divergent-compile: the ranks that have the compile where they part come first
            ranks = [*f.evidence.get("divergent_ranks", []), *sorted(f.ranks)] or [0]
            return self.open_compile_event(ranks, label, COMPILE_FINDING_ROWS[f.kind])
        target = finding_target(f, self.session.index, prefer_rank=self.place.rank if self.place else None)
        if target is None:
            self.notify(
                f"cannot place this finding in the capture ({f.introduced_by}, ranks {f.ranks})", severity="warning"
            )
            return False
        if target.base_rank is not None:
            self.base_rank = target.base_rank
        # the traced graph's place has no role: the same Place the tree's entry holds
        place = Place(
            target.rank,
            target.pipeline if target.pipeline is not None else 0,
            target.seq,
            target.role if target.seq is not None else None,
        )
        if target.view == "output-code":
            self.pending_code_line = (target.line, target.kernel, code_caption(f, self.findings_view.source_root))
            self.pending_jump = (target.view, target.node or target.kernel or "", None, place)
        elif target.node:
            self.pending_jump = (target.view, target.node, target.subgraph, place)
        self.query_one(TabbedContent).active = target.view
        self.place_changed()
        self.place = place
        self.refresh_view(force=True)
        self.tree.reveal(place, select=False)
        return True

    def _apply_pending_jump(self, view: str) -> None:
        if view == "compile":
            self.apply_pending_compile()
        if self.pending_jump is None or self.pending_jump[0] != view:
            return
        _, node, sub, place = self.pending_jump
        if place is not None and place != self.place:
            return
        self.pending_jump = None
        w = self.view_widget(view)
        at, self.pending_code_line = self.pending_code_line, None
        if view == "output-code" and at is not None and at[0] is not None and w.goto_line(at[0] - 1, at[1]):
            # a finding in generated code: its line, with the FX node and source line beside it
            w.focus()
            if at[2]:
                self._title("output-code", f"{at[2]} · {w.code.title}")
            return
        ok = w.goto_node(node, sub) if hasattr(w, "goto_node") else False
        if ok:
            w.focus()
        elif view == "output-code":
            if w.code is not None:  # else the view says that there is no code
                self.notify(f"no kernel in the generated code computes node {node}", severity="warning")
        else:
            self.notify(f"node {node} is not in this view", severity="warning")

    @on(NodeChosen)
    def on_node_chosen(self, m: NodeChosen) -> None:
        if m.rank is not None and self.place is not None and m.rank != self.place.rank and self.session is not None:
            other = self.session.same_place_on(self.place, m.rank)
            if other is not None:
                self.pending_jump = ("code", m.node, m.subgraph, other)
                self.query_one(TabbedContent).active = "code"
                self.open_place(other)
                return
        self.goto_node(m.node, m.subgraph)

    def open_node(self, place: Place, name: str, subgraph: str | None = None) -> None:
        """Open `place` in the code view and go to node `name` there (the palette's nodes of
        graphs not in view)."""
        if place == self.place:
            self.goto_node(name, subgraph)
            return
        self.pending_jump = ("code", name, subgraph, place)
        self.show_view("code")
        self.open_place(place)

    def goto_node(self, name: str, subgraph: str | None = None) -> bool:
        """Go to node `name` in the code or diff view in front (the code view otherwise)."""
        view = self.active_view if self.active_view in ("code", "pass-diff", "rank-diff") else "code"
        if view != self.active_view:
            self.pending_jump = (view, name, subgraph, self.place)
            self.show_view(view)
            if not self.view_widget(view).loading:  # already showing this place: jump now
                self._apply_pending_jump(view)
            return True
        w = self.view_widget(view)
        if w.goto_node(name, subgraph):
            w.focus()
            return True
        self.notify(f"no node {name} in this view", severity="warning")
        return False

    def action_goto_node_prompt(self) -> None:
        names = [n for _, n, _ in self.code_view.index.names()] if self.code_view.index else []

        def done(value: str | None) -> None:
            if value:
                sub = None
                if ":" in value:
                    sub, _, value = value.rpartition(":")
                self.goto_node(value, sub or None)

        self.push_screen(
            PromptScreen(
                "Go to node (name, or subgraph:name)",
                placeholder="a node of the graph in view; → completes",
                suggestions=names[:50000],
                id="goto-prompt",
            ),
            done,
        )

    @on(Input.Submitted, "#search-input")
    def on_search_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.search_query = event.value
        self.query_one("#search-bar").display = False
        w = self.view_widget()
        found = w.find(self.search_query) if self.search_query else None
        w.focus()
        if self.search_query and found is None:
            self.notify(f"'{self.search_query}' not found in this view", severity="warning", timeout=3)

    # -- help, focus --------------------------------------------------------------------------------

    def binding_groups(self) -> list[tuple[str, list[Binding]]]:
        def only(bs):
            return [b for b in bs if isinstance(b, Binding)]

        return [
            (
                "everywhere",
                only(self.BINDINGS)
                + [
                    Binding(
                        "ctrl+p",
                        "command_palette",
                        "Command palette: open a rank, pass or node by name",
                        id="app.command-palette",
                    )
                ],
            ),
            (
                "code and diff views",
                only(LineView.BINDINGS) + [Binding("enter", "", "Open a folded stretch (diff)", id="diff.unfold")],
            ),
            ("tree", only(CaptureTree.BINDINGS)),
            ("findings", only(FindingsView.BINDINGS)),
        ]

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.binding_groups(), self.user_keymap, self.VIEWS))

    def action_focus_tree(self) -> None:
        if self.tree.has_class("-hidden"):
            self.action_tree_width()
        self.tree.focus()

    TREE_WIDTHS = ("", "-narrow", "-hidden")  # `w` cycles: as laid out, narrow, hidden

    def action_tree_width(self) -> None:
        tree = self.tree
        now = next((c for c in self.TREE_WIDTHS[1:] if tree.has_class(c)), "")
        nxt = self.TREE_WIDTHS[(self.TREE_WIDTHS.index(now) + 1) % len(self.TREE_WIDTHS)]
        tree.remove_class(*self.TREE_WIDTHS[1:])
        if nxt:
            tree.add_class(nxt)
        if nxt == "-hidden" and tree.has_focus:
            self.view_widget().focus()
        # after the next refresh the tabs still have the old width: fit them after the layout
        self.call_after_refresh(lambda: self.call_after_refresh(self.fit_tabs))

    def fit_tabs(self) -> None:
        tabbed = self.query_one(TabbedContent)
        tabs = [tabbed.get_tab(p.id) for p in tabbed.query(TabPane) if p.id]
        # the tab names that shorten when the tab bar would not show every tab whole
        short_tabs = {v.id: (v.tab, v.short_tab) for v in self.VIEWS if v.short_tab}
        # each tab is its label and one cell either side; room kept for counts added later
        need = (
            sum(
                len(short_tabs[t.id.removeprefix("--content-tab-")][0])
                if t.id.removeprefix("--content-tab-") in short_tabs
                else len(t.label_text)
                for t in tabs
            )
            + 2 * len(tabs)
            + 6
        )
        # shorten only as many as needed, those that save most first: `Compile` stays whole when
        # `Pass Δ`, `Rank Δ` and `Output` make room
        shorten: set[str] = set()
        for pane_id, (full, brief) in sorted(short_tabs.items(), key=lambda kv: len(kv[1][1]) - len(kv[1][0])):
            if need <= tabbed.size.width:
                break
            shorten.add(pane_id)
            need -= len(full) - len(brief)
        for pane_id, names in short_tabs.items():
            tab = tabbed.get_tab(pane_id)
            want = names[1] if pane_id in shorten else names[0]
            if tab.label_text != want:
                tab.label = want

    def on_resize(self) -> None:
        self.call_after_refresh(self.fit_tabs)

    def action_focus_view(self) -> None:
        self.view_widget().focus()

    def on_unmount(self) -> None:
        proc = self.checks_process
        if proc is not None and proc.poll() is None:
            proc.terminate()
        if self.loader is not None:
            with self.capture_lock:
                self.loader.close()
