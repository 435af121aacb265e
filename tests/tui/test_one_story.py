"""Every count on screen is what the Findings tab lists under the same filter, and the findings a
count leaves out are named with the keys that show them (never a status bar saying 4
findings over a tab that lists none). A rank that recorded nothing is on screen too."""

from __future__ import annotations

import json

from textual.widgets import Label, TabbedContent

from graphtrain_inspect.tui.commands import CaptureCommands
from tests.capture_utils import run_cli
from tests.tui_support import opened, settle

SAMPLE = "h200x2-fsdp2-compile-rank-literal"  # per-rank compiles: its rank literals are info


def _status(app) -> str:
    return str(app.query_one("#status", Label).render())


def _tab(app) -> str:
    return str(app.query_one(TabbedContent).get_tab("findings").label)


def _check_json(path, *flags) -> list:
    r = run_cli("check", str(path), "--json", "-j", "1", *flags)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)["findings"]


async def test_counts_agree_and_i_and_s_show_what_they_leave_out(bundled_capture):
    path = bundled_capture(SAMPLE)
    per_rank, shared = _check_json(path), _check_json(path, "--shared-graph")
    info = sum(f["severity"] == "info" for f in per_rank)
    assert info and info == len(per_rank)  # the sample's story: nothing but info per rank
    async with opened(path, size=(120, 40)) as (app, pilot):
        assert _tab(app) == "Findings"
        assert f"· 0 findings ({info} info not shown: i shows them, s grades as shared graph)" in _status(app)
        fv = app.findings_view
        assert f"{info} info findings not shown (i shows them, s grades as shared graph)" in str(
            fv.query_one("#findings-status", Label).render()
        )
        app.show_view("findings")
        fv.table.focus()
        await pilot.press("i")
        await settle(pilot)
        assert _tab(app) == f"Findings ({info})" and len(fv.roots) == info
        assert f"· {info} findings ·" in _status(app) and "not shown" not in _status(app)
        await pilot.press("s")
        await settle(pilot)
        assert app.shared_graph and fv.shared_graph
        assert _tab(app) == f"Findings ({len(shared)})" and len(fv.roots) == len(shared)
        assert f"· {len(shared)} findings" in _status(app)
        await pilot.press("i")  # info hidden again: the status counts what the tab lists
        await settle(pilot)
        shown = sum(f["severity"] != "info" for f in shared)
        assert _tab(app) == f"Findings ({shown})" and f"· {shown} finding" in _status(app)


async def test_the_palette_has_both_switches(bundled_capture):
    async with opened(bundled_capture(SAMPLE), size=(120, 40)) as (app, pilot):
        entries = {text: cb for text, cb, _ in CaptureCommands(app.screen)._entries()}
        assert "findings: show info findings" in entries
        entries["findings: grade as a shared graph (--shared-graph)"]()
        await settle(pilot)
        assert app.shared_graph
        texts = [text for text, _, _ in CaptureCommands(app.screen)._entries()]
        assert "findings: grade per rank (each rank traced its own)" in texts


async def test_a_rank_that_recorded_nothing_is_on_screen(tmp_path):
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    from tests.small_captures import CaptureWriter

    gm = make_fx(lambda x: (x * 2).relu().sum())(torch.randn(4))
    w = CaptureWriter(tmp_path / "cap", world_size=2)
    r0 = w.rank(0)
    r0.apply("drop_relu", gm, gm)
    r0.end()
    w.finish()  # rank 1 of 2 wrote no log, as under --coor
    async with opened(tmp_path / "cap", size=(120, 40)) as (app, pilot):
        assert "1 of 2 ranks" in str(app.tree.root.label)
        problems = [p for p in app.session.problems() if p[1] == "1"]
        assert len(problems) == 1 and "rank 1 of world size 2 recorded nothing" in problems[0][2]
        assert str(app.query_one(TabbedContent).get_tab("problems").label) == "Problems (1)"


async def test_enter_on_a_finding_brings_its_literal_into_view(bundled_capture):
    """At 120x40 the baked `0)` of `select.int(view, 0, 0)` must not be past the right edge."""
    async with opened(bundled_capture("h200x2-coor-rank-baked"), size=(120, 40)) as (app, pilot):
        f = next(f for f in app.findings_view.shown if f.node == "select")
        assert app.jump_to_finding(f)
        await settle(pilot)
        cv = app.code_view
        line = cv.lines[cv.cursor]
        assert line.lstrip().startswith("select: ")
        end = line.rindex(")", 0, line.find(";  ") if ";  " in line else len(line)) + 1
        visible = cv.scrollable_content_region.width - cv.gutter_width()
        assert end > visible  # the literal would be past the edge unscrolled
        x = int(cv.scroll_offset.x)
        assert x < end <= x + visible, (x, end, visible)


async def test_the_root_counts_findings_on_no_pass_too(compile_events_trace):
    """On torch's logs the root said 3 findings and the tab 4: a failed compile is on no pass."""
    async with opened(compile_events_trace, size=(120, 40)) as (app, pilot):
        n = len(app.findings_view.shown)
        assert any(f.kind == "compile-failure" for f in app.findings_view.shown)
        assert _tab(app) == f"Findings ({n})"
        assert f"· {n} findings" in str(app.tree.root.label)
        assert f"· {n} findings" in _status(app)
