"""What the user does to the view in front: search, go to a node, switch diff modes and ranks,
copy, export, replay. A mixin of `graphtrain_inspect.tui.app.InspectApp` (its bindings name these actions)."""

from __future__ import annotations

import os
from pathlib import Path

from textual.app import SuspendNotSupported
from textual.widgets import Input, Label

from graphtrain_inspect.tui.escaping import plain
from graphtrain_inspect.tui.replay import replay_argv, run_captured, run_in_terminal
from graphtrain_inspect.tui.screens.prompt import PromptScreen
from graphtrain_inspect.tui.widgets.code_view import CodeView
from graphtrain_inspect.tui.widgets.diff_view import DiffView
from graphtrain_inspect.tui.widgets.record_table import RecordTable


class ViewActions:
    """Mixin: the actions bound to keys in `InspectApp.BINDINGS` that act on the view in front."""

    # -- search ------------------------------------------------------------------------------------

    def action_search(self) -> None:
        bar = self.query_one("#search-bar")
        bar.display = True
        inp = self.query_one("#search-input", Input)
        inp.value = self.search_query
        self.screen.set_focus(inp)  # at once: keys typed right after / must reach the field

    def on_key(self, event) -> None:
        if event.key == "escape" and self.query_one("#search-bar").display:
            self.query_one("#search-bar").display = False
            self.view_widget().focus()
            event.stop()

    def action_search_next(self, direction: int) -> None:
        if not self.search_query:
            self.action_search()
            return
        w = self.view_widget()
        if w.find(self.search_query, forward=direction > 0) is None:
            self.notify(f"'{self.search_query}' not found in this view", severity="warning", timeout=3)

    # -- diff modes, ranks ---------------------------------------------------------------------------

    def action_toggle_diff_mode(self) -> None:
        views = [self.pass_diff_view, self.rank_diff_view]
        mode = "split" if views[0].mode == "unified" else "unified"
        for v in views:
            v.set_mode(mode)
        for name in ("pass-diff", "rank-diff"):
            label = self.query_one(f"#{name}-title", Label)
            text = str(label.content)
            if text.endswith(" · unified") or text.endswith(" · split"):
                label.update(plain(text.rsplit(" · ", 1)[0] + f" · {mode}"))
        self.notify(f"diffs: {'side by side' if mode == 'split' else 'unified'}", timeout=2)

    def action_expand_folds(self) -> None:
        w = self.view_widget()
        if isinstance(w, DiffView):
            w.expand_all()

    def action_cycle_base_rank(self) -> None:
        if self.session is None or self.place is None:
            return
        ranks = self.session.cap.ranks
        cur = self.base_rank_for(self.place)
        self.base_rank = ranks[(ranks.index(cur) + 1) % len(ranks)] if cur in ranks else ranks[0]
        self.notify(f"rank diff: base rank {self.base_rank}", timeout=2)
        self.stale.add("rank-diff")
        if self.active_view != "rank-diff":
            self.show_view("rank-diff")
        else:
            self.refresh_view()

    # -- FX node <-> Inductor kernel --------------------------------------------------------------

    def action_goto_kernel(self) -> None:
        """From the node under the code view's cursor to the kernel that computes it."""
        if self.active_view != "code" or self.place is None:
            self.notify("i: put the cursor on a node in the code view", severity="warning", timeout=3)
            return
        node = self.code_view.node_at_cursor()
        if node is None:
            self.notify("no node defined on this line", severity="warning", timeout=3)
            return
        self.kernel_from_node = node  # I comes back to it
        self.pending_jump = ("output-code", node, None, self.place)
        self.show_view("output-code")
        if not self.output_code_view.loading:  # already showing this pipeline's code: jump now
            self._apply_pending_jump("output-code")

    def action_goto_fx_node(self) -> None:
        """From the kernel under the output code's cursor back to an FX node it computes, in the
        post-grad graph the code was generated from: the node i came from, else its first node."""
        w = self.output_code_view
        code = w.code
        k = w.kernel_at_cursor() if self.active_view == "output-code" else None
        nodes = code.origins.get(k.name, []) if k is not None and code is not None else []
        if not nodes:
            what = (
                f"kernel {k.name} has no recorded FX nodes"
                if k is not None
                else "I: put the cursor on a kernel in the output code view"
            )
            self.notify(what, severity="warning", timeout=3)
            return
        node = self.kernel_from_node if self.kernel_from_node in nodes else nodes[0]
        target = code.graph or self.place
        self.pending_jump = ("code", node, None, target)
        if target != self.place:
            self.query_one("#views").active = "code"
            self.open_place(target)
            return
        self.show_view("code")
        if not self.code_view.loading:
            self._apply_pending_jump("code")

    # -- copy, export, replay --------------------------------------------------------------------------

    def action_copy_line(self) -> None:
        text = self.view_widget().current_line_text()
        self.copy_to_clipboard(text)
        self.notify("copied the line" if text else "nothing to copy", timeout=2)

    def action_copy_hunk(self) -> None:
        w = self.view_widget()
        text = w.hunk_text() if isinstance(w, DiffView) else w.current_line_text()
        self.copy_to_clipboard(text)
        n = text.count("\n")
        self.notify(f"copied {n} line{'s' if n != 1 else ''}" if text else "nothing to copy", timeout=2)

    def export_text(self) -> tuple[str, str]:
        """(text, file suffix) of what the view in front shows."""
        view = self.active_view
        w = self.view_widget(view)
        if isinstance(w, DiffView):
            return w.export_text(), ".diff"
        if isinstance(w, CodeView):
            return "\n".join(w.lines) + "\n", ".py"
        if isinstance(w, RecordTable):
            return w.export_text(), ".tsv"
        return "", ".txt"

    def default_export_name(self) -> str:
        view = self.active_view
        _, suffix = self.export_text()
        name = Path(self.path).name or "capture"
        # a capture named gti-... (capture --out gti-demo, the default gti-capture-<time>) keeps one prefix
        parts = [name if name.startswith("gti") else f"gti-{name}", view]
        if self.place is not None and view not in ("findings", "problems"):
            parts.append(f"r{self.place.rank}")
            parts.append(f"p{self.place.seq}" if self.place.seq is not None else f"g{self.place.pipeline}")
        return "-".join(parts) + suffix

    def action_export(self) -> None:
        def done(value: str | None) -> None:
            if value:
                self.export_to(value)

        self.push_screen(
            PromptScreen(
                f"Export the {self.view_of(self.active_view).title.lower()} view to a file",
                value=self.default_export_name(),
                id="export-prompt",
            ),
            done,
        )

    def export_to(self, path: str) -> str | None:
        text, _ = self.export_text()
        if not text:
            self.notify("nothing to export in this view", severity="warning")
            return None
        target = os.path.abspath(os.path.expanduser(path))
        try:
            with open(target, "w") as f:
                f.write(text)
        except OSError as e:
            self.notify(f"{target}: {e.strerror or e}", title="export failed", severity="error")
            return None
        self.notify(f"wrote {text.count(chr(10))} lines to {target}", title="exported", timeout=4)
        return target

    def action_replay(self) -> None:
        if self.place is not None and self.place.seq is None:
            self.notify(
                "the traced graph is the input of the passes, not a pass: select a pass (#N) to replay",
                severity="warning",
            )
            return
        if self.session is None or self.place is None:
            loading = "load" in getattr(self, "jobs", {})
            self.notify(
                "the capture is still being read: r replays the selected pass once it is open"
                if loading
                else "select a pass in the tree to replay",
                severity="warning",
            )
            return
        p = self.session.pass_entry(self.place)
        if p is None:
            return
        argv = replay_argv(self.session.path, p.name, p.rank, p.occurrence)
        self.last_replay = argv
        if self.replay_runner is not None:
            rc = self.replay_runner(argv)
            msg = ""
        else:
            try:
                with self.suspend():
                    rc = run_in_terminal(argv)
                msg = ""
            except SuspendNotSupported:  # no terminal to hand over (headless, web): run it in the background
                rc, msg = run_captured(argv)
        sev = "information" if rc == 0 else "warning"
        self.notify(
            f"replay of #{p.seq} {p.name} on rank {p.rank} exited with {rc}" + (f": {msg}" if msg else ""), severity=sev
        )
        self.refresh()
