"""The TUI on a capture whose every text field holds Rich and Textual markup (tests/tui_support.py's
MARKUP): it opens (a status reason holding `[/x]` took it down), and every view, title, table,
tree label, filter, notification and command-palette entry shows the text as typed: no style
applied, no tag lost, no action bound. The replay key's echo is shell-quoted and escaped."""

from __future__ import annotations

import dataclasses
import shlex

import pytest

from graphtrain_inspect.capture.shared.terminal_text import escape_controls
from graphtrain_inspect.tui import replay
from graphtrain_inspect.tui.commands import CaptureCommands
from graphtrain_inspect.tui.session import Place
from tests.tui.test_escaping import RAW, screen_text
from tests.tui_support import MARKUP, markup_capture, opened, settle

DIR_NAME = "cap[b]x[red on red]y"  # the capture's folder (no `/`): in the header, the tree, the Problems table


@pytest.fixture(scope="module")
def marked(tmp_path_factory):
    return markup_capture(tmp_path_factory.mktemp("tui-markup") / DIR_NAME)


def _styled_like_markup(app) -> list[str]:
    """Text on screen that a markup tag of MARKUP would have styled: red on red (hidden), a link."""
    out = []
    for strip in app.screen._compositor.render_strips():
        for seg in strip:
            st = seg.style
            if st is not None and not seg.control and seg.text.strip():
                if st.link or (st.color is not None and st.color == st.bgcolor):
                    out.append(seg.text)
    return out


async def test_every_view_shows_markup_as_typed(marked):
    async with opened(marked, size=(320, 50)) as (app, pilot):
        # no notification is markup (the reading problems are counted in the status bar and listed
        # in the Problems view, below, rather than said in a notice at start)
        assert not any(n.markup for n in app._notifications)
        for node in list(app.tree.root.children):
            node.expand()
        await settle(pilot)
        seen = [screen_text(app)]
        for place, view in [
            (Place(0, 0, 0, "out"), "1"),
            (Place(0, 0, 0, "out"), "2"),
            (Place(1, 0, 0, "out"), "3"),
            (Place(0, 0, 0, "out"), "4"),
            (Place(0, 0, 0, "out"), "5"),
            (Place(0, 0, 0, "out"), "6"),
            (Place(0, 0, 0, "out"), "7"),
            (Place(0, 0, 2, None), "1"),
            (Place(0, 0, 2, None), "2"),  # the raised pass: its message
            (Place(0, 0, 3, "out"), "2"),
        ]:
            app.open_place(place)
            await pilot.press(view)
            await settle(pilot)
            seen.append(screen_text(app))
            assert not _styled_like_markup(app), (place, view, _styled_like_markup(app))
        await pilot.press("4", "enter")  # a finding's detail: its node, message and source file
        await settle(pilot)
        seen.append(screen_text(app))
        everything = "\n".join(seen)
        assert not RAW.findall(everything)
        for key in ("pass", "pass2", "raise", "reason", "error", "node", "device"):
            assert MARKUP[key] in everything, (key, MARKUP[key])
        assert "[@click=app.quit]click[/] \\x1b]0;t\\x07" in everything  # markup and an escape at once
        assert "[red on red]hidden[/red on red] [link=file:///etc/passwd]passwd[/link] [/x]" in everything
        assert MARKUP["file"] in everything  # the finding's source line
        assert f"{DIR_NAME}/status/rank_1.1001.json" in everything and f"▼ {DIR_NAME}  finished" in everything
        # titles, status lines, the tree, tables and the findings' filters: what the widgets hold
        app.open_place(Place(0, 0, 1, "out"))
        await pilot.press("1")
        await settle(pilot)
        assert f"#1 {MARKUP['pass2']}" in str(app.query_one("#code-title").content)
        assert MARKUP["pass2"] in str(app.query_one("#status").content)
        assert any(MARKUP["pass"] in str(n.label) for n in app.tree.nodes_by_key.values())
        options = app.findings_view.query_one("#filter-pass")._options  # (prompt, value)
        assert any(str(prompt) == v and "[" in v for prompt, v in options if isinstance(v, str)), options


async def test_findings_and_the_palette_show_brackets(marked):
    async with opened(marked, size=(200, 50)) as (app, pilot):
        # the sample's own message (README): `coordinate[dp]` lost its `[dp]` as a style
        f = dataclasses.replace(
            app.findings[0], message="a literal equal to the compiling rank's coordinate[dp] [red on red]x[/]"
        )
        app.findings_view.set_findings([f])
        await pilot.press("4")
        await settle(pilot)
        assert "the compiling rank's coordinate[dp] [red on red]x[/]" in screen_text(app)
        provider = CaptureCommands(app.screen)
        await provider.startup()
        found = {}
        for query in ("coordinate", "shard", "click"):
            async for hit in provider.search(query):
                found[hit.text] = hit
        for key in ("pass", "pass2", "pass3"):
            assert any(t.endswith(MARKUP[key]) for t in found), (key, list(found))
        for text, hit in found.items():  # every character kept, nothing read as a tag
            assert hit.match_display.plain == escape_controls(text)
        async for hit in provider.discover():
            assert hit.display.plain == escape_controls(hit.text)


async def test_replay_argv_and_echo(marked, capsys, monkeypatch):
    ran: list[list[str]] = []
    async with opened(marked, replay_runner=lambda argv: ran.append(argv) or 0) as (app, pilot):
        app.open_place(Place(0, 0, 3, "out"))
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
    assert ran and ran[0][ran[0].index("--pass") + 1] == MARKUP["pass3"]  # one argument, exact
    monkeypatch.setattr(replay.subprocess, "call", lambda argv: 0)
    assert replay.run_in_terminal(ran[0]) == 0
    echo = capsys.readouterr().out
    assert not RAW.findall(echo)  # the OSC sequence in the pass name never reaches the terminal
    assert echo == escape_controls("$ " + shlex.join(ran[0])) + "\n"
    assert shlex.split(echo.removeprefix("$ "))[ran[0].index("--pass") + 1] == escape_controls(MARKUP["pass3"])
