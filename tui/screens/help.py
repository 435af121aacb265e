"""The help screen (`?`): what each view shows and every key, with the binding ids to remap."""

from __future__ import annotations

from typing import Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from graphtrain_inspect.tui.views import View

INTRO_HEAD = """[b]graphtrain-inspect tui[/b]: browse a capture of graph passes on every rank.

The tree on the left lists the run, each rank, each traced graph and the passes applied to it in order, with node \
counts, node deltas, wall times and a red badge with the number of findings a pass introduced. Selecting an entry \
shows it in the views on the right:
"""
INTRO_TAIL = """F1 or ? opens this help; w narrows, hides and restores the tree.

Keys can be remapped by binding id in ~/.config/graphtrain-inspect/keymap.toml (or --keymap FILE), one line per \
binding:  "app.replay" = "ctrl+r"
"""


def intro(views: Sequence[View]) -> str:
    """The help's introduction: the tree, then a line per view (its key, its tab, what it shows)."""
    names = [f"{v.key} {v.tab}" for v in views]
    width = max(map(len, names), default=0) + 2
    lines = [f"  [b]{name}[/b]{' ' * (width - len(name))}{v.help}" for name, v in zip(names, views)]
    return "\n".join([INTRO_HEAD, *lines, "", INTRO_TAIL])


def binding_rows(
    groups: list[tuple[str, list[Binding]]], keymap: dict[str, str], display=None
) -> list[tuple[str, str, str, str]]:
    """(group, keys as remapped and shown, what it does, binding id) for every binding;
    `display(binding)` formats one key (the app's `get_key_display`)."""
    out = []
    for title, bindings in groups:
        for b in bindings:
            keys = keymap.get(b.id, b.key) if b.id else b.key
            if display is not None:
                keys = " ".join(display(Binding(k.strip(), b.action)) for k in keys.split(",") if k.strip())
            out.append((title, keys, b.description or b.action, b.id or ""))
    return out


def bindings_table(rows: list[tuple[str, str, str, str]]) -> Table:
    t = Table(box=None, expand=True, padding=(0, 2))
    t.add_column("key", style="bold")
    t.add_column("does")
    t.add_column("id", style="dim")
    group = None
    for title, keys, does, bid in rows:
        if title != group:
            group = title
            t.add_row(Text(title, style="bold underline"), "", "")
        t.add_row(keys, does, bid)
    return t


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 100; height: 90%; border: thick $primary; background: $surface; padding: 1 2; }
    """

    BINDINGS = [Binding("escape,q,question_mark,f1", "close", "Close", id="help.close")]

    def __init__(self, groups: list[tuple[str, list[Binding]]], keymap: dict[str, str], views: Sequence[View]) -> None:
        super().__init__(id="help")
        self.groups = groups
        self.keymap = keymap
        self.views = views
        self.rows: list[tuple[str, str, str, str]] = binding_rows(groups, keymap)

    def on_mount(self) -> None:
        self.rows = binding_rows(self.groups, self.keymap, self.app.get_key_display)
        self.query_one("#help-keys", Static).update(bindings_table(self.rows))

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(intro(self.views), id="help-intro")
            yield Static(bindings_table(self.rows), id="help-keys")

    def action_close(self) -> None:
        self.dismiss(None)
