"""The TUI on a real capture of the sample training (2 CPU ranks, every planted bug): findings of
each kind jump to their node in the right view, folds open, symbols and devices are marked."""

from __future__ import annotations

import pytest

from tests.tui_support import settle
from tui.app import InspectApp
from tui.session import Place
from tui.widgets.table_views import DevicesView, SymbolsView

pytestmark = pytest.mark.slow


def finding(app, kind: str, node: str | None = None):
    return next(f for f in app.findings if f.kind == kind and (node is None or f.node == node))


async def test_sample_capture_findings_jump_symbols_devices(tui_sample_capture):
    app = InspectApp(str(tui_sample_capture))
    async with app.run_test(size=(180, 50)) as pilot:
        await settle(pilot)
        kinds = {f.kind for f in app.findings}
        assert {"rank-baked-constant", "device-baked", "stale-unbacked-symbol", "rank-divergent-graph"} <= kinds

        # a rank-divergent pass: the rank diff, the diverging rank against the base rank, at the node
        f = finding(app, "rank-divergent-graph")
        assert app.jump_to_finding(f)
        await settle(pilot)
        assert app.active_view == "rank-diff" and app.base_rank == 0 and app.place.rank == 1
        view = app.rank_diff_view
        assert view.a_label.startswith("rank 0") and view.b_label.startswith("rank 1")
        row = view.rows[view.cursor]
        assert f.node in (row.b_text or row.a_text or "")
        assert view.mark is not None

        # a stale symbol in a nested subgraph: the pass diff, on the subgraph's placeholder
        f = finding(app, "stale-unbacked-symbol")
        assert f.subgraph and f.node
        assert app.jump_to_finding(f)
        await settle(pilot)
        assert app.active_view == "pass-diff"
        p = app.session.pass_entry(app.place)
        assert p.name == f.introduced_by
        view = app.pass_diff_view
        b_line = view.rows[view.cursor].b_no
        assert b_line is not None and view.b_index.subgraph_at(b_line) == f.subgraph
        assert f.node in view.rows[view.cursor].b_text

        # the same graph's symbols: the stale ones are marked
        await pilot.press("5")
        await settle(pilot)
        sv = app.query_one(SymbolsView)
        stale = [sv.table.row_plain(i) for i in range(sv.table.row_count) if "\tSTALE\t" in sv.table.row_plain(i)]
        assert stale and any(f.evidence["symbol"] in r for r in stale)

        # a device literal that differs by rank, introduced by place_devices: marked on both ranks
        f = finding(app, "device-baked")
        app.jump_to_finding(f)
        await settle(pilot)
        await pilot.press("6")
        await settle(pilot)
        dv = app.query_one(DevicesView)
        rows = [dv.table.row_plain(i) for i in range(dv.table.row_count)]
        marked = [r for r in rows if "✗" in r]
        assert any(r.startswith("0\tliteral") for r in marked) and any(r.startswith("1\tliteral") for r in marked)

        # folds: unchanged stretches are folded; Enter opens one
        app.open_place(Place(0, 0, 0, "out"), view="pass-diff")
        await settle(pilot)
        view = app.pass_diff_view
        folds = [i for i, r in enumerate(view.rows) if r.kind == "fold"]
        assert folds
        n = len(view.rows)
        count = view.rows[folds[0]].count
        view.focus()
        view.set_cursor(folds[0])
        await pilot.press("enter")
        assert len(view.rows) == n - 1 + count
        await pilot.press("z")
        assert not any(r.kind == "fold" for r in view.rows)
        assert len(view.rows) >= len(view.model.b_lines)

        # the code view: a thousand lines, End goes to the last
        await pilot.press("1")
        await settle(pilot)
        code = app.code_view
        assert len(code.lines) > 800
        code.focus()
        await pilot.press("end")
        assert code.cursor == len(code.lines) - 1
        await pilot.press("home")
        assert code.cursor == 0
