"""The TUI on a capture whose pass names, exception messages, capture errors and source lines hold
terminal escapes: no raw control character is on the rendered screen, in any view; the escapes
are shown (`\\x1b`)."""

from __future__ import annotations

import re

import pytest

from graphtrain_inspect.tui.session import Place
from tests.tui_support import hostile_capture, opened, settle

# C0 but newline and tab, DEL, C1, the bidi and invisible format controls (capture.shared.terminal_text)
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    return hostile_capture(tmp_path_factory.mktemp("tui-hostile") / "cap")


def screen_text(app) -> str:
    """The screen as the terminal is sent it, less the app's own control segments (cursor moves)."""
    return "\n".join(
        "".join(s.text for s in strip if not s.control) for strip in app.screen._compositor.render_strips()
    )


async def test_no_raw_control_character_on_screen(hostile):
    async with opened(hostile, size=(160, 40)) as (app, pilot):
        for node in list(app.tree.root.children):
            node.expand()
        await settle(pilot)
        seen = []
        for place, view in [
            (Place(0, 0, 1, "out"), "1"),
            (Place(0, 0, 1, "out"), "2"),
            (Place(1, 0, 1, "out"), "3"),
            (Place(0, 0, 1, "out"), "4"),
            (Place(0, 0, 2, None), "7"),
            (Place(0, 0, 0, "out"), "1"),
        ]:
            app.open_place(place)
            await pilot.press(view)
            await settle(pilot)
            text = screen_text(app)
            assert not RAW.findall(text), (place, view, RAW.findall(text), text)
            seen.append(text)
        await pilot.press("4")  # the detail of the finding the last pass made: its pass named whole
        fv = app.findings_view
        fv.table.move_cursor(row=max(i for i, f in enumerate(fv.shown) if f.introduced_by.startswith("bidi")))
        await settle(pilot)
        seen.append(screen_text(app))
        fv.table.move_cursor(row=0)
        await pilot.press("enter")  # the finding's detail, with its source line
        await settle(pilot)
        seen.append(screen_text(app))
        assert not RAW.findall(seen[-1])
        everything = "\n".join(seen)
        assert "remove_dead_code\\x1b[2J\\x1b[31mRED" in everything  # tree, titles
        # BEL and CR shown as the commands show them (Rich and Textual would drop them silently)
        assert "shard\\x1b]0;pwned-title\\x07_rows" in everything
        assert "boom\\x0dFAKE" in everything
        assert "bidi\\u202eexe.txt\\x01" in everything  # the pass named with every escaped character
        assert "# \\x1b[2J\\x1b[31mRED" in everything  # the finding's source line
