"""The TUI at 120x40 (a common terminal) stays true: names are elided, never numbers; a diff's
changed line shows its first change; markers stay when a line scrolls; the tree can be narrowed
or hidden; F1 helps; the palette finds a node in any graph of the rank; the prompts and messages
say what is so. Asserted on what the widgets render, on the small capture and a bundled one."""

from __future__ import annotations

import re

import pytest
from rich.style import Style
from rich.text import Text
from textual.widgets import TabbedContent

from graphtrain_inspect.tui.commands import CaptureCommands
from graphtrain_inspect.tui.screens.help import HelpScreen
from graphtrain_inspect.tui.screens.prompt import PromptScreen
from graphtrain_inspect.tui.session import Place
from graphtrain_inspect.tui.widgets.capture_tree import ELIDE, OPTIONAL, fit_label
from tests.tui_support import opened, settle

NARROW = (120, 40)


def screen_lines(widget) -> list[str]:
    """What a Line API widget draws, row by row."""
    return [widget.render_line(y).text for y in range(widget.scrollable_content_region.height)]


def _label() -> Text:
    """A pass label as the tree builds it: the name may be elided, the time may go."""
    t = Text("#2 ")
    start = len(t)
    t.append("tag_activation_checkpointing")
    t.stylize(ELIDE, start, len(t))
    t.append("  990 +45")
    start = len(t)
    t.append("  30ms")
    t.stylize(OPTIONAL, start, len(t))
    t.append(" ●2")
    return t


def test_fit_label_elides_the_name_and_never_cuts_a_number():
    label = _label()
    for width in range(12, label.cell_len + 1):
        got = fit_label(label.copy(), width).plain
        assert len(got) <= width
        # every number shown is one of the label's numbers, whole
        assert set(re.findall(r"[+-]?\d+\w*", got.split("  ", 1)[-1])) <= {"990", "+45", "30ms", "2"}, (width, got)
    assert fit_label(label.copy(), label.cell_len).plain == label.plain
    assert fit_label(label.copy(), 36).plain == "#2 tag_act…ointing  990 +45  30ms ●2"
    # the name would shrink below 12 characters: the time goes first, and the name gets its room
    assert fit_label(label.copy(), 32).plain == "#2 tag_acti…pointing  990 +45 ●2"
    assert fit_label(label.copy(), 20).plain == "#2 ta…ng  990 +45 ●2"
    # too narrow for every field: whole fields go from the end
    assert fit_label(label.copy(), 16).plain == "#2 ta…ng"


async def test_tree_and_tabs_at_120_columns(bundled_capture):
    async with opened(bundled_capture("h200x2-rank-baked"), size=NARROW) as (app, pilot):
        tree = app.tree
        width = tree.scrollable_content_region.width
        shown = [tree.render_label(n, Style(), Style()).plain for n in tree.nodes_by_key.values()]
        passes = {s.split()[1]: s for s in shown if s.startswith("#")}
        assert passes, shown
        for node in tree.nodes_by_key.values():
            depth, up = 0, node.parent
            while up is not None:
                depth, up = depth + 1, up.parent
            assert tree.render_label(node, Style(), Style()).cell_len <= width - depth * tree.guide_depth
        # the counts and deltas of the outline, each whole
        outline = app.session.outline.rank(0)
        for p in outline.passes:
            label = next(s for s in shown if s.startswith(f"#{p.seq} "))
            n = next(iter(p.after_nodes.values()))
            assert re.search(rf"(?<!\d){n}(?!\d)", label), label
        assert any("…" in s for s in passes.values())  # some names did not fit whole
        # every tab whole in the tab bar (the names shorten)
        tabbed = app.query_one(TabbedContent)
        labels = [t.label_text for t in tabbed.query("ContentTab")]
        assert "Rank Δ" in labels and sum(len(x) + 2 for x in labels) <= tabbed.size.width
        # the tree hidden: the long names come back
        await pilot.press("w", "w")
        await pilot.pause()
        await pilot.pause()
        assert app.tree.display is False
        assert "Rank diff" in [t.label_text for t in tabbed.query("ContentTab")]
        await pilot.press("w")
        await pilot.pause()
        assert app.tree.display


async def test_w_narrows_hides_and_restores_the_tree(tui_small_capture):
    async with opened(tui_small_capture, size=NARROW) as (app, pilot):
        wide = app.tree.size.width
        await pilot.press("w")
        await pilot.pause()
        assert app.tree.outer_size.width == 24 < wide
        await pilot.press("w")
        await pilot.pause()
        assert not app.tree.display and not app.tree.has_focus
        await pilot.press("w")
        await pilot.pause()
        assert app.tree.display and app.tree.size.width == wide


async def test_rank_diff_shows_the_first_change_of_a_long_line(bundled_capture):
    async with opened(bundled_capture("h200x2-rank-baked"), size=NARROW) as (app, pilot):
        app.show_view("rank-diff")
        await settle(pilot)
        view = app.rank_diff_view
        lines = [s for s in screen_lines(view) if "select.int(view, 0, " in s]
        # both versions of the baked select, each with its differing last argument in view
        assert any(s.rstrip().endswith("select.int(view, 0, 0)") for s in lines), screen_lines(view)
        assert any(s.rstrip().endswith("select.int(view, 0, 1)") for s in lines)
        assert all("…" in s for s in lines)  # the middle of the line, elided
        minus = next(s for s in screen_lines(view) if s.rstrip().endswith("select.int(view, 0, 0)"))
        assert minus.split()[1] == "-"  # the marker, in the gutter
        # scrolled sideways: the text is whole (no elision) and the marker stays in the gutter
        view.focus()
        await pilot.press("l", "l")
        await pilot.pause()
        row = next(s for s in screen_lines(view) if re.match(r"\s*\d+\s+-", s))
        assert "…" not in row and re.match(r"\s*\d+\s+- ", row)
        # side by side: a not-equal separator, both changes in view
        await pilot.press("h", "h", "s")
        await pilot.pause()
        split = [s for s in screen_lines(view) if "≠" in s]
        assert any(s.split("≠")[0].rstrip().endswith("0, 0)") and s.rstrip().endswith("0, 1)") for s in split), (
            screen_lines(view)
        )


async def test_f1_opens_help_and_the_views_fit_its_box(tui_small_capture):
    async with opened(tui_small_capture, size=NARROW) as (app, pilot):
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        intro = app.screen.query_one("#help-intro")
        rows = [line for line in intro.render_lines(intro.region.reset_offset)]
        text = [strip.text.rstrip() for strip in rows]
        assert any("8 Output code" in t and "I: back" in t for t in text), text
        assert not any(t.strip() == "I: back" for t in text)
        await pilot.press("f1")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


async def test_palette_finds_a_node_of_another_graph_and_opens_it(tui_small_capture):
    async with opened(tui_small_capture, size=NARROW) as (app, pilot):
        assert app.place == Place(0, 0, 0, "out")
        assert "detach" not in [n for _, n, _ in app.code_view.index.names()]  # removed by pass #0
        provider = CaptureCommands(app.screen)
        await provider.startup()
        entries = {text: (cb, help_text) for text, cb, help_text in provider._entries()}
        cb, where = entries["node detach"]
        assert "traced" in where
        cb()
        await settle(pilot)
        assert app.place == Place(0, 0) and app.active_view == "code"
        mark = app.code_view.mark
        assert mark is not None and "detach" in app.code_view.lines[mark.row]


async def test_prompts_and_messages_say_what_is_so(tmp_path):
    from tests.tui_support import small_capture

    cap = small_capture(tmp_path / "gti-demo")
    async with opened(cap, size=NARROW) as (app, pilot):
        await pilot.press("g")
        await pilot.pause()
        assert isinstance(app.screen, PromptScreen)
        names = {n for _, n, _ in app.code_view.index.names()}
        assert not any(n in app.screen.placeholder.split() for n in names)
        await pilot.press("escape")
        assert app.default_export_name() == "gti-demo-code-r0-p0.py"
        app.open_place(Place(0, 0))
        await settle(pilot)
        app.clear_notifications()
        app.action_replay()
        await pilot.pause()
        assert "traced graph" in [n.message for n in app._notifications][-1]


@pytest.mark.parametrize("name", ["h200x2-codegen-per-rank"])
def test_one_kernel_is_singular(bundled_capture, name):
    from graphtrain_inspect.tui.session import CaptureSession

    session = CaptureSession.open(str(bundled_capture(name)))
    code, _ = session.output_code(Place(0, 0))
    assert code is not None and len(code.kernels) == 1 and " 1 kernel · " in code.title
