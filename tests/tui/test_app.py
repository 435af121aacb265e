"""The TUI driven with Textual's pilot on a small deterministic capture: each feature, asserted on
widget state (what the tree, views and tables hold), not only that nothing crashed."""

from __future__ import annotations

import shutil

import pytest
from textual.widgets import Select, TabbedContent

from graphtrain_inspect.tui.app import InspectApp
from graphtrain_inspect.tui.screens.help import HelpScreen
from graphtrain_inspect.tui.screens.prompt import PromptScreen
from graphtrain_inspect.tui.session import Place
from graphtrain_inspect.tui.widgets.capture_tree import RankData
from tests.tui_support import log_path, opened, record_starts, settle, small_capture


def labels(tree) -> list[str]:
    return [str(n.label) for n in tree.nodes_by_key.values()]


def node_label(app, place: Place) -> str:
    return str(app.tree.node_for(place).label)


async def test_opens_with_tree_code_and_first_pass_selected(tui_small_capture):
    async with opened(tui_small_capture) as (app, pilot):
        tree = app.tree
        assert "small" in str(tree.root.label) and "2 ranks" in str(tree.root.label)
        assert {k for k in tree.nodes_by_key if k[0] == "rank"} == {("rank", 0), ("rank", 1)}
        assert isinstance(tree.rank_node(0).data, RankData)
        # passes in order with node count, delta and time
        assert node_label(app, Place(0, 0, 0)).startswith("#0 remove_dead_code  6 -1  1ms")
        assert "7 +1" in node_label(app, Place(0, 0, 1))
        assert "±0" in node_label(app, Place(0, 0, 2))
        assert node_label(app, Place(0, 0)).startswith("trace  7")
        # the first pass is selected and its graph is in the code view, highlighted line by line
        assert app.place == Place(0, 0, 0, "out")
        code = app.code_view
        assert code.lines[0].startswith("class no_dead")
        assert any("aten.relu.default" in line for line in code.lines)
        assert code.index is not None and code.index.find("relu") is not None
        title = str(app.query_one("#code-title").content)
        assert "#0 remove_dead_code" in title and "rank 0" in title
        assert app.first_tree_painted is not None and app.load_seconds is not None


@pytest.mark.parametrize("shared", [False, True])
async def test_shared_graph_runs_the_checks_under_that_policy(shared):
    # 2 H200s, per-rank compiles: each rank's own cuda:<rank> literal is right per rank (info) and
    # wrong in a graph compiled once and loaded by every rank (tui --shared-graph: errors)
    from graphtrain_inspect.inspector.read import bundled

    async with opened(bundled.path_of("h200x2-device-literal"), shared_graph=shared) as (app, pilot):
        errors = {(f.kind, f.severity) for f in app.findings if f.severity in ("error", "warning")}
        assert errors == ({("device-baked", "error")} if shared else set())
        assert any(f.kind == "device-baked" for f in app.findings)


async def test_findings_badge_the_pass_that_introduced_them(tui_small_capture):
    async with opened(tui_small_capture) as (app, pilot):
        assert len(app.findings) == 1
        f = app.findings[0]
        assert f.kind == "rank-baked-constant" and f.introduced_by == "shard_rows"
        for r in (0, 1):
            assert node_label(app, Place(r, 0, 1)).endswith("●1")
            assert "●" not in node_label(app, Place(r, 0, 0))
        assert "1 finding" in str(app.tree.root.label)
        assert str(app.query_one(TabbedContent).get_tab("findings").label) == "Findings (1)"


async def test_tree_is_collapsible_and_keyboard_driven(tui_small_capture):
    async with opened(tui_small_capture) as (app, pilot):
        tree = app.tree
        r1 = tree.rank_node(1)
        assert not r1.is_expanded
        tree.focus()
        tree.move_cursor(r1)
        await pilot.press("space")
        assert r1.is_expanded
        # down into rank 1's graph, its trace, then its first pass: the views follow the cursor
        await pilot.press("down", "down", "down")
        await settle(pilot)
        assert app.place == Place(1, 0, 0, "out")
        assert app.code_view.graph_key[0] == 1
        await pilot.press("up")
        await settle(pilot)
        assert app.place == Place(1, 0)  # the traced graph
        assert app.code_view.lines[0].startswith("class traced")
        tree.move_cursor(r1)
        await pilot.press("space")
        assert not r1.is_expanded
        # the mouse: a click on a pass selects it
        node = tree.node_for(Place(0, 0, 1))
        await pilot.click("#tree", offset=(12, node.line - int(tree.scroll_offset.y)))
        await settle(pilot)
        assert app.place == Place(0, 0, 1, "out")


async def test_pass_diff_unified_and_side_by_side(tui_small_capture):
    async with opened(tui_small_capture) as (app, pilot):
        app.open_place(Place(0, 0, 1, "out"), view="pass-diff")
        await settle(pilot)
        view = app.pass_diff_view
        assert app.active_view == "pass-diff" and view.mode == "unified"
        kinds = [r.kind for r in view.rows]
        assert "del" in kinds and "add" in kinds
        added = [r for r in view.rows if r.kind == "add"]
        assert any("aten.select.int(relu, 0, 0)" in r.b_text for r in added)
        # changed characters are marked within the changed line
        from graphtrain_inspect.inspector.diff.text_rows import char_marks

        pair = next(r for r in view.rows if r.kind == "add" and r.pair is not None)
        ma, mb = char_marks(pair.pair, pair.b_text)
        assert mb and all(0 <= s < e <= len(pair.b_text) for s, e in mb)
        assert "#1 shard_rows on rank 0" in str(app.query_one("#pass-diff-title").content)
        await pilot.press("s")
        assert view.mode == "split" and app.rank_diff_view.mode == "split"
        assert any(r.kind == "change" for r in view.rows)
        change = next(i for i, r in enumerate(view.rows) if r.kind == "change")
        assert " | " in view.row_plain(change)
        await pilot.press("s")
        assert view.mode == "unified"
        # the traced graph has no pass to diff: the view says so
        app.open_place(Place(0, 0))
        await settle(pilot)
        assert view.rows == [] and "traced graph has no pass" in view.message_text


async def test_rank_diff_against_a_chosen_base_rank(tui_small_capture):
    async with opened(tui_small_capture) as (app, pilot):
        app.open_place(Place(0, 0, 1, "out"), view="rank-diff")
        await settle(pilot)
        view = app.rank_diff_view
        # rank 0 selected and rank 0 the base: rank 1 is compared against it
        assert view.a_label.startswith("rank 0") and view.b_label.startswith("rank 1")
        assert any(r.kind == "del" and "select.int(relu, 0, 0)" in r.a_text for r in view.rows)
        assert any(r.kind == "add" and "select.int(relu, 0, 1)" in r.b_text for r in view.rows)
        assert "rank 1: differs" in str(app.query_one("#rank-diff-status").content)
        await pilot.press("b")
        await settle(pilot)
        assert app.base_rank == 1
        assert view.a_label.startswith("rank 1") and view.b_label.startswith("rank 0")
        # before the bug the ranks agree after normalization
        app.open_place(Place(0, 0, 0, "out"))
        await settle(pilot)
        assert view.rows == [] and view.message_text == "no differences"
        assert "rank 0: agrees" in str(app.query_one("#rank-diff-status").content)


async def test_finding_enter_jumps_to_node_in_pass_diff(tui_small_capture):
    async with opened(tui_small_capture) as (app, pilot):
        await pilot.press("4")
        await settle(pilot)
        fv = app.findings_view
        assert fv.table.row_count == 1 and app.focused is fv.table
        await pilot.press("enter")
        await settle(pilot)
        assert app.active_view == "pass-diff"
        assert app.place == Place(0, 0, 1, "out")
        assert app.tree.cursor_node is app.tree.node_for(Place(0, 0, 1))
        view = app.pass_diff_view
        row = view.rows[view.cursor]
        assert row.b_text is not None and row.b_text.strip().startswith("select:")
        assert view.mark is not None and view.mark.row == view.cursor
        assert app.focused is view


async def test_findings_filters(tui_small_capture):
    async with opened(tui_small_capture) as (app, pilot):
        fv = app.findings_view
        assert fv.table.row_count == 1
        # a floor, as check --severity: the error is at least a warning, and at least an error
        fv.set_filter("severity", "warning")
        assert fv.table.row_count == 1
        fv.set_filter("severity", "error")
        assert fv.table.row_count == 1
        fv.set_filter("severity", Select.NULL)
        fv.set_filter("rank", 1)
        assert fv.table.row_count == 1
        fv.set_filter("pass", "shard_rows")
        fv.set_filter("kind", "rank-baked-constant")
        assert fv.table.row_count == 1
        fv.set_filter("kind", "device-baked")
        assert fv.table.row_count == 0
        fv.set_filter("kind", Select.NULL)
        # `/` searches the table in front too
        await pilot.press("4")
        await settle(pilot)
        await pilot.press("slash", *"aten.select", "enter")
        assert fv.table.query_text == "aten.select" and "aten.select" in fv.table.current_line_text()


async def test_search_and_go_to_node(tui_small_capture):
    async with opened(tui_small_capture) as (app, pilot):
        app.open_place(Place(0, 0, 1, "out"), view="code")
        await settle(pilot)
        code = app.code_view
        code.focus()
        await pilot.press("slash")
        assert app.query_one("#search-bar").display
        await pilot.press(*"relu", "enter")
        assert not app.query_one("#search-bar").display
        first = code.cursor
        assert "relu" in code.lines[first].lower() and code.query_text == "relu"
        await pilot.press("n")
        assert code.cursor != first and "relu" in code.lines[code.cursor].lower()
        await pilot.press("N")
        assert code.cursor == first
        # go to a node by name
        await pilot.press("g")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press(*"sum_1", "enter")
        await pilot.pause()
        assert code.lines[code.cursor].strip().startswith("sum_1:")
        assert code.mark is not None and code.lines[code.mark.row][code.mark.start : code.mark.end] == "sum_1"
        assert app.goto_node("no_such_node") is False


async def test_command_palette_opens_a_pass_by_fuzzy_name(tui_small_capture):
    async with opened(tui_small_capture) as (app, pilot):
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"rank 1 shard")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await settle(pilot)
        assert app.place == Place(1, 0, 1, "out")
        assert app.code_view.graph_key[0] == 1


async def test_help_screen_lists_bindings_with_ids_and_remapped_keys(tui_small_capture):
    ran = []
    app = InspectApp(
        str(tui_small_capture), keymap={"app.replay": "ctrl+r"}, replay_runner=lambda argv: ran.append(argv) or 0
    )
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        rows = {bid: keys for _, keys, _, bid in app.screen.rows}
        assert rows["app.replay"] == "^r" and rows["diff.toggle-mode"] == "s" and rows["app.search"] == "/"
        assert "view.up" in rows and "tree.toggle" in rows
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        app.tree.focus()
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert ran and ran[0][ran[0].index("replay") :][:3] == ["replay", str(tui_small_capture), "--pass"]


async def test_replay_key_runs_the_replay_command_for_the_pass(tui_small_capture):
    ran = []
    app = InspectApp(str(tui_small_capture), replay_runner=lambda argv: ran.append(argv) or 0)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        app.open_place(Place(1, 0, 2, "out"))
        await settle(pilot)
        place_before = app.place
        await pilot.press("r")
        await pilot.pause()
        argv = ran[0]
        i = argv.index("replay")
        assert argv[i:] == ["replay", str(tui_small_capture), "--pass", "noop", "--rank", "1", "--occurrence", "0"]
        assert app.place == place_before  # back where it was
        # the traced graph is not a pass: nothing to replay
        app.open_place(Place(1, 0))
        await settle(pilot)
        await pilot.press("r")
        assert len(ran) == 1


async def test_copy_line_and_hunk_and_export(tui_small_capture, tmp_path):
    async with opened(tui_small_capture) as (app, pilot):
        app.open_place(Place(0, 0, 1, "out"), view="pass-diff")
        await settle(pilot)
        view = app.pass_diff_view
        view.focus()
        i = next(k for k, r in enumerate(view.rows) if r.kind == "add")
        view.set_cursor(i)
        await pilot.press("y")
        assert app.clipboard == view.rows[i].plain("unified") and app.clipboard.startswith("+")
        await pilot.press("Y")
        assert "-" in app.clipboard and "+" in app.clipboard and app.clipboard.count("\n") >= 2
        out = tmp_path / "shard.diff"
        await pilot.press("e")
        assert isinstance(app.screen, PromptScreen)
        inp = app.screen.query_one("#prompt-input")
        assert inp.value.endswith(".diff") and "pass-diff" in inp.value
        inp.value = str(out)
        await pilot.press("enter")
        await pilot.pause()
        text = out.read_text()
        assert text.startswith("--- before shard_rows") and "+        select:" in text
        # a table exports as tab-separated text
        await pilot.press("4")
        await settle(pilot)
        assert app.export_to(str(tmp_path / "f.tsv"))
        rows = (tmp_path / "f.tsv").read_text().splitlines()
        assert rows[0].split("\t")[:2] == ["sev", "node"] and rows[1].startswith("ERROR\tselect\t0,1\t")
        assert "\trank-baked-constant\t" in rows[1]


async def test_other_rank_keys_keep_the_pass(tui_small_capture):
    async with opened(tui_small_capture) as (app, pilot):
        app.open_place(Place(0, 0, 1, "out"))
        await settle(pilot)
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert app.place == Place(1, 0, 1, "out")
        assert "select.int(relu, 0, 1)" in "\n".join(app.code_view.lines)


async def test_symbols_and_devices_views_fill(tui_small_capture):
    async with opened(tui_small_capture) as (app, pilot):
        await pilot.press("6")
        await settle(pilot)
        from graphtrain_inspect.tui.widgets.table_views import DevicesView, SymbolsView

        dv = app.query_one(DevicesView)
        first_cells = [dv.table.row_plain(i).split("\t")[0] for i in range(dv.table.row_count)]
        assert "rank 0" in first_cells and "rank 1" in first_cells
        await pilot.press("5")
        await settle(pilot)
        sv = app.query_one(SymbolsView)
        assert "rank 0" in str(sv.query_one(".tab-title").content)


async def test_unreadable_path_is_a_message_not_a_crash(tmp_path):
    app = InspectApp(str(tmp_path / "nowhere"))
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        assert app.session is None
        assert "no such file or directory" in app.code_view.message_text
        from graphtrain_inspect.tui.widgets.table_views import ProblemsView

        assert app.query_one(ProblemsView).table.row_count == 1
        assert app.is_running


async def test_damaged_capture_shows_file_and_line(tui_small_capture, tmp_path):
    d = tmp_path / "damaged"
    shutil.copytree(tui_small_capture, d)
    log = log_path(d, 1)
    data = log.read_bytes()
    starts = record_starts(data)
    cut = starts[4]
    log.write_bytes(data[:cut] + b"this is not a log line\n" + data[cut:])
    bad_line = data[:cut].count(b"\n") + 1
    # and a graph payload whose checksum no longer matches (rank 0, the traced graph's code)
    log0 = log_path(d, 0)
    d0 = log0.read_bytes()
    i = d0.find(b"\tclass traced")
    log0.write_bytes(d0[: i + 1] + b"klass" + d0[i + 6 :])
    # and rank 1's writer stopped (a failed write) and said so in its status file
    from graphtrain_inspect.capture.shared import logformat

    (d / logformat.STATUS_DIR).mkdir()
    (d / logformat.STATUS_DIR / logformat.status_file_name(1, 4242)).write_bytes(
        logformat.encode_status(
            {"rank": 1, "pid": 4242, "state": "stopped", "reason": "OSError: [Errno 28] No space left on device"}
        )
    )
    app = InspectApp(str(d))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        from graphtrain_inspect.tui.widgets.table_views import ProblemsView

        table = app.query_one(ProblemsView).table
        wheres = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert f"{log}:{bad_line}" in wheres
        stopped = [table.row_plain(i) for i in range(table.row_count) if "rank_1.4242.json" in table.row_plain(i)]
        assert stopped and "No space left on device" in stopped[0]
        assert "Problems (" in str(app.query_one(TabbedContent).get_tab("problems").label)
        # the damaged graph: its views say it cannot be read, and where
        app.open_place(Place(0, 0), view="code")
        await settle(pilot)
        assert app.code_view.lines == []
        assert "unreadable on rank 0" in app.code_view.message_text and str(log0) in app.code_view.message_text
        assert app.is_running


async def test_live_capture_shows_new_records(tui_small_capture, tmp_path):
    d = tmp_path / "live"
    shutil.copytree(tui_small_capture, d)
    full = {}
    for r in (0, 1):
        p = log_path(d, r)
        data = p.read_bytes()
        full[r] = data
        starts = record_starts(data)
        # keep everything up to the second pass record: one finished pass
        kinds = [data[s : data.find(b"\n", s)] for s in starts]
        second = [k for k, line in zip(starts, kinds) if b'"gti_pass"' in line][1]
        p.write_bytes(data[:second])
    m = d / "manifest.json"
    m.write_text(m.read_text().replace('"finished"', '"running"'))
    app = InspectApp(str(d), poll_seconds=0.1)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        assert app.session.outline.live
        # pass #1 has started, not finished; #2 has not started
        assert [(p.seq, p.status) for p in app.session.outline.rank(0).passes] == [(0, "ok"), (1, "incomplete")]
        assert "unfinished" in node_label(app, Place(0, 0, 1))
        assert app.tree.node_for(Place(0, 0, 2)) is None
        assert "live" in str(app.tree.root.label)
        for r in (0, 1):
            log_path(d, r).write_bytes(full[r])
        m.write_text(m.read_text().replace('"running"', '"finished"'))
        for _ in range(60):
            await pilot.pause(0.1)
            if app.session.outline.rank(0) and len(app.session.outline.rank(0).passes) == 3 and app.findings:
                break
        await settle(pilot)
        assert [(p.seq, p.status) for p in app.session.outline.rank(0).passes] == [(0, "ok"), (1, "ok"), (2, "ok")]
        assert app.tree.node_for(Place(0, 0, 2)) is not None
        assert "unfinished" not in node_label(app, Place(0, 0, 1)) and "7 +1" in node_label(app, Place(0, 0, 1))
        assert len(app.findings) == 1  # the checks ran again on what arrived
        assert not app.session.outline.live


async def test_live_capture_that_has_not_written_yet(tui_small_capture, tmp_path):
    d = tmp_path / "started"
    shutil.copytree(tui_small_capture, d)
    logs = {r: log_path(d, r).read_bytes() for r in (0, 1)}
    for r in (0, 1):
        log_path(d, r).unlink()
    m = d / "manifest.json"
    m.write_text(m.read_text().replace('"finished"', '"running"'))
    app = InspectApp(str(d), poll_seconds=0.1)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        assert app.session is not None and app.session.outline.ranks == [] and app.place is None
        assert "no records yet" in app.code_view.message_text
        for r in (0, 1):
            log_path(d, r).write_bytes(logs[r])
        for _ in range(60):
            await pilot.pause(0.1)
            if app.place is not None and app.code_view.lines:
                break
        await settle(pilot)
        assert app.place == Place(0, 0, 0, "out") and app.code_view.lines[0].startswith("class no_dead")


@pytest.mark.parametrize(
    "keymap_text,expect",
    [
        ('"app.replay" = "ctrl+r"\n', {"app.replay": "ctrl+r"}),
        ('[keymap]\n"diff.toggle-mode" = "m"\n', {"diff.toggle-mode": "m"}),
    ],
)
def test_keymap_file(tmp_path, keymap_text, expect):
    from graphtrain_inspect.tui.keymap import load_keymap

    p = tmp_path / "keymap.toml"
    p.write_text(keymap_text)
    assert load_keymap(str(p)) == (expect, [])
    km, problems = load_keymap(str(tmp_path / "missing.toml"))
    assert km == {} and problems


def test_cmd_without_argument_uses_bundled_or_says_how(monkeypatch):
    import argparse

    from graphtrain_inspect.inspector.cli import tui as cmd
    from graphtrain_inspect.inspector.read import bundled

    p = argparse.ArgumentParser()
    cmd.add_arguments(p)
    args = p.parse_args([])
    if bundled.names():
        assert cmd.resolve_path(args) == str(bundled.path_of())
    else:
        with pytest.raises(ValueError, match="name a capture"):
            cmd.resolve_path(args)
    assert cmd.resolve_path(p.parse_args(["/x"])) == "/x"


def test_small_capture_is_deterministic(tmp_path):
    a = small_capture(tmp_path / "a")
    b = small_capture(tmp_path / "b")
    for r in (0, 1):
        da, db = log_path(a, r).read_bytes(), log_path(b, r).read_bytes()
        # graphs and passes are the same bytes; times and the header differ
        ga = [ln for ln in da.split(b"\n") if b"gti_graph" in ln]
        gb = [ln for ln in db.split(b"\n") if b"gti_graph" in ln]
        assert [x.split(b"]", 1)[1] for x in ga] == [x.split(b"]", 1)[1] for x in gb]


def test_help_names_every_view_with_its_key():
    """F1 lists all nine views, each under the key that opens it (9 Compile included)."""
    from graphtrain_inspect.tui.screens.help import intro

    views = [b for b in InspectApp.BINDINGS if (b.id or "").startswith("view.")]
    assert len(views) == 9
    for b in views:
        title = InspectApp.view_of(b.id.removeprefix("view.")).title.split()[0]
        assert f"[b]{b.key} {title}" in intro(InspectApp.VIEWS), (b.key, title)


async def test_the_collector_paused_at_start_is_on_again_once_the_tree_is_painted(tui_small_capture, tmp_path):
    """`graphtrain-inspect tui` starts with the cyclic collector off (inspector/read/collector.py):
    the app turns it on when its first tree is painted, or when the capture cannot be read."""
    import gc

    from graphtrain_inspect.inspector.read import collector

    collector.pause()
    try:
        assert not gc.isenabled()
        async with opened(tui_small_capture) as (app, pilot):
            assert app.first_tree_painted is not None
            assert gc.isenabled()
        collector.pause()
        missing = tmp_path / "empty"
        missing.mkdir()
        app = InspectApp(str(missing))
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            assert "cannot read" in str(app.tree.root.label)
            assert gc.isenabled()
    finally:
        collector.resume()
        gc.enable()
