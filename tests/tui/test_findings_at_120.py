"""The Findings view at 120x40, a common terminal: rows whose nodes have long alike names stay told
apart, the message starts on screen, the detail pane has the name whole; nothing covers the
details at the start; a bundled sample is named `--sample NAME` and `o` reads its sources from the
installed package."""

from __future__ import annotations

import argparse

from graphtrain_inspect.inspector.cli.tui import describe
from graphtrain_inspect.tui.app import InspectApp
from tests.tui_support import settle


async def test_long_alike_node_names_stay_apart_and_the_message_shows(bundled_capture):
    path = bundled_capture("h200x2-stale-symbol")  # 12 errors in subgraphs ep_chunk_r<k>_body[1]:a_1
    app = InspectApp(str(path))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.sub_title.startswith("--sample h200x2-stale-symbol")
        await pilot.press("4")
        await settle(pilot)
        fv = app.findings_view
        t = fv.table
        labels = [str(c.label) for c in t.columns.values()]
        assert labels[:4] == ["sev", "node", "ranks", "message"]
        full = [f"{f.subgraph}:{f.node}" if f.subgraph else f.node for f in fv.shown]
        shown = [str(t.get_row_at(i)[1]) for i in range(t.row_count)]
        assert len(set(full)) > 3 and len(set(shown)) == len(set(full))  # as many names as there are
        assert all(len(s) <= 18 for s in shown) and any("…" in s for s in shown)
        # the message starts inside the view: the columns before it leave room for 30 characters
        before = sum(c.get_render_width(t) for c in list(t.columns.values())[:3])
        assert t.size.width - before >= 30
        t.focus()
        t.move_cursor(row=1)
        await settle(pilot)
        detail = str(fv.query_one("#finding-detail").render())
        assert f"node {full[1]} · ranks 0-1" in detail
        status = str(app.query_one("#status").render())
        assert status.startswith("--sample h200x2-stale-symbol: 2 ranks")
        # o: the sample's pass file, recorded on a GPU host, read from the installed package
        await pilot.press("o")
        await settle(pilot)
        detail = str(fv.query_one("#finding-detail").render())
        assert "(read from the installed package" in detail and ">" in detail
        assert "not on this machine" not in detail


async def test_no_notice_covers_the_details_at_the_start(bundled_capture):
    """Rank 1 of the compile-on-one-rank capture logged nothing: a reading problem, counted in the
    Problems tab and the status bar, not a toast over the finding's details."""
    path = bundled_capture("h200x2-coor-rank-baked")
    app = InspectApp(str(path))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        assert list(app._notifications) == []
        assert "1 reading problem (key 7)" in app.idle_status()
        assert "Problems (1)" in str(app.query_one("#views").get_tab("problems").label)
    args = argparse.Namespace(path=None, sample="h200x2-coor-rank-baked")
    assert describe(args, str(path)).startswith("--sample h200x2-coor-rank-baked · 2 x H200: ")
    assert describe(argparse.Namespace(path="/somewhere", sample=None), "/somewhere") == "/somewhere"
