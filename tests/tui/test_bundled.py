"""The TUI on the bundled GPU captures (2 and 4 H200s): each bug class found, and Enter on a
finding lands on its node in the right view with the right rank and pass; folds, symbols,
devices and the rank diff's base rank on real graphs."""

from __future__ import annotations

from graphtrain_inspect.tui.app import InspectApp
from graphtrain_inspect.tui.session import Place
from graphtrain_inspect.tui.widgets.table_views import DevicesView, SymbolsView
from tests.tui_support import settle


def finding(app, kind: str):
    return next(f for f in app.findings if f.kind == kind)


def rows(table) -> list[str]:
    return [table.row_plain(i) for i in range(table.row_count)]


async def test_rank_divergent_pass_opens_the_rank_diff_at_the_node(bundled_capture):
    # the ranks' collectives agree: an error where the graph is shared (info per rank)
    app = InspectApp(str(bundled_capture("h200x2-rank-divergent")), shared_graph=True)
    async with app.run_test(size=(180, 50)) as pilot:
        await settle(pilot)
        f = finding(app, "rank-divergent-graph")
        assert f.introduced_by == "tag_activation_checkpointing"
        await pilot.press("4")
        await settle(pilot)
        fv = app.findings_view
        fv.table.move_cursor(row=fv.shown.index(f))
        await pilot.press("enter")
        await settle(pilot)
        assert app.active_view == "rank-diff" and app.base_rank == 0 and app.place.rank == 1
        assert app.session.pass_entry(app.place).name == "tag_activation_checkpointing"
        view = app.rank_diff_view
        assert view.a_label.startswith("rank 0") and view.b_label.startswith("rank 1")
        row = view.rows[view.cursor]
        assert f.node in (row.b_text or row.a_text or "") and view.mark is not None
        assert "rank 1: differs" in str(app.query_one("#rank-diff-status").content)
        assert app.tree.cursor_node is app.tree.node_for(app.place)


async def test_stale_symbol_in_a_subgraph_and_the_symbols_view(bundled_capture):
    app = InspectApp(str(bundled_capture("h200x2-stale-symbol")))
    async with app.run_test(size=(180, 50)) as pilot:
        await settle(pilot)
        f = finding(app, "stale-unbacked-symbol")
        assert f.subgraph and f.node == "a_1"
        assert "●12" in str(app.tree.node_for(Place(0, 0, 4)).label)  # concretize_symbolic_shapes
        assert app.jump_to_finding(f)
        await settle(pilot)
        assert app.active_view == "pass-diff" and app.session.pass_entry(app.place).name == "concretize_symbolic_shapes"
        view = app.pass_diff_view
        row = view.rows[view.cursor]
        assert row.b_no is not None and view.b_index.subgraph_at(row.b_no) == f.subgraph and "a_1" in row.b_text
        await pilot.press("5")
        await settle(pilot)
        stale = [r for r in rows(app.query_one(SymbolsView).table) if "\tSTALE\t" in r]
        assert any(r.startswith(f.evidence["symbol"] + "\t") for r in stale)
        # Enter on a symbol goes to its node in the code view
        sv = app.query_one(SymbolsView)
        sv.table.focus()
        sv.table.move_cursor(row=0)
        await pilot.press("enter")
        await settle(pilot)
        assert app.active_view == "code" and app.code_view.mark is not None


async def test_device_literals_baked_at_trace_and_the_devices_view(bundled_capture):
    app = InspectApp(str(bundled_capture("h200x2-device-literal")))
    async with app.run_test(size=(180, 50)) as pilot:
        await settle(pilot)
        f = next(f for f in app.findings if f.kind == "device-baked" and f.introduced_by == "trace")
        # info (each rank's own device): no badge unless asked, as `check` shows no info unless asked
        assert f.severity == "info" and "●" not in str(app.tree.node_for(Place(0, 0)).label)
        app.findings_view.set_filter("severity", "info")
        await settle(pilot)
        assert "●" in str(app.tree.node_for(Place(0, 0)).label)  # the traced graph carries the badge
        assert app.jump_to_finding(f)
        await settle(pilot)
        # already in the traced graph: the code view of the trace, on the node
        assert app.active_view == "code" and app.place == Place(0, 0) == app.tree.cursor_node.data
        code = app.code_view
        assert code.lines[code.cursor].strip().startswith(f.node + ":")
        await pilot.press("6")
        await settle(pilot)
        table = rows(app.query_one(DevicesView).table)
        assert table[0].startswith("rank 0\town device\t") and "cuda:0" in table[0]
        marked = [r for r in table if "✗" in r]
        assert marked and all(r.split("\t")[0] in ("0", "1") for r in marked)


async def test_four_ranks_base_rank_folds_and_a_long_graph(bundled_capture):
    app = InspectApp(str(bundled_capture("h200x4-rank-baked")))
    async with app.run_test(size=(180, 50)) as pilot:
        await settle(pilot)
        assert [k[1] for k in app.tree.nodes_by_key if k[0] == "rank"] == [0, 1, 2, 3]
        f = finding(app, "rank-baked-constant")
        assert f.introduced_by == "trace" and f.ranks == [0, 1, 2, 3]
        # the rank diff of the traced graph: rank 1 against base 0, then base 1, 2 ...
        app.open_place(Place(0, 0), view="rank-diff")
        await settle(pilot)
        view = app.rank_diff_view
        assert view.a_label.startswith("rank 0") and view.b_label.startswith("rank 1")
        assert any(r.kind in ("del", "add", "change") for r in view.rows)
        status = str(app.query_one("#rank-diff-status").content)
        assert all(f"rank {r}:" in status for r in (1, 2, 3))
        await pilot.press("b")
        await settle(pilot)
        assert app.base_rank == 1 and view.a_label.startswith("rank 1") and view.b_label.startswith("rank 0")
        # folds in a real pass diff; Enter opens one, z all of them
        app.open_place(Place(0, 0, 0, "out"), view="pass-diff")
        await settle(pilot)
        view = app.pass_diff_view
        folds = [i for i, r in enumerate(view.rows) if r.kind == "fold"]
        assert folds
        n, count = len(view.rows), view.rows[folds[0]].count
        view.focus()
        view.set_cursor(folds[0])
        await pilot.press("enter")
        assert len(view.rows) == n - 1 + count
        # a click on a fold opens it too
        second = next(i for i, r in enumerate(view.rows) if r.kind == "fold")
        n, count = len(view.rows), view.rows[second].count
        view.scroll_to(y=second, animate=False)
        await pilot.pause()
        await pilot.click("#pass-diff-view", offset=(20, second - int(view.scroll_offset.y)))
        assert len(view.rows) == n - 1 + count
        await pilot.press("z")
        assert not any(r.kind == "fold" for r in view.rows)
        # the code view: End and Home on a thousand lines
        await pilot.press("1")
        await settle(pilot)
        code = app.code_view
        assert len(code.lines) > 800
        await pilot.press("end")
        assert code.cursor == len(code.lines) - 1
        await pilot.press("home")
        assert code.cursor == 0


async def test_enter_on_a_generated_code_finding_lands_on_its_kernel_line(bundled_capture):
    # FSDP2 + torch.compile on 2 H200s with a planted rank literal: the Triton kernel's line
    # per-rank compiles: the literal is info there, so the findings are shown as for a shared graph
    app = InspectApp(str(bundled_capture("h200x2-fsdp2-compile-rank-literal")), shared_graph=True)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        # the kernel line is a consequence of the literal: its row is under the literal's
        every = [g for f in app.findings for g in f.with_consequences()]
        f = next(f for f in every if f.layer == "codegen" and f.node == "mul_7" and f.kind == "rank-baked-constant")
        fv = app.findings_view
        await pilot.press("4")
        await settle(pilot)
        fv.table.move_cursor(row=fv.shown.index(f))
        fv.table.focus()
        await pilot.press("enter")
        await settle(pilot)
        assert app.active_view == "output-code"
        view = app.output_code_view
        k = next(k for k in view.code.kernels if k.name == "triton_poi_fused_add_addmm_mul_view_3")
        assert view.cursor == 311 and k.first <= view.cursor <= k.last
        assert view.row_plain(view.cursor).strip() == "tmp6 = tl.full([1], 1.0, tl.float32)"
        assert view.mark is not None and view.mark.row == 311 and app.focused is view
        title = str(app.query_one("#output-code-title").render())
        assert "triton_poi_fused_add_addmm_mul_view_3 line 312" in title and "FX node mul_7 (y_1)" in title
        assert "fsdp2_compile.py:45" in title
