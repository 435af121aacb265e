"""SVG snapshots of the TUI at 120x40 (a common terminal) and 200x50: the tree with the code view,
the pass diff, the rank diff and the findings view, on the deterministic small capture and on the
bundled GPU capture h200x2-rank-baked (textual is pinned exactly in pyproject.toml, so the
rendering is stable; nothing machine-specific is on screen: the sub-title is fixed, toasts are
cleared).

After a deliberate change to what a view shows, regenerate them and look at the SVGs:

    .venv/bin/python -m pytest tests/tui/test_snapshots.py --snapshot-update
"""

from __future__ import annotations

import pytest

from graphtrain_inspect.tui.app import InspectApp
from graphtrain_inspect.tui.session import Place
from tests.tui_support import settle

SIZE = (130, 30)
SIZES = [(120, 40), (200, 50)]


def _prepare(place: Place | None = None, view: str | None = None, keys: tuple[str, ...] = (), sub_title: str = "small"):
    async def run_before(pilot) -> None:
        await settle(pilot)
        app = pilot.app
        app.sub_title = sub_title  # the path differs from machine to machine
        if place is not None:
            app.open_place(place, view=view)
            await settle(pilot)
        elif view is not None:
            app.show_view(view)
            await settle(pilot)
        if keys:
            await pilot.press(*keys)
            await settle(pilot)
        app.clear_notifications()  # toasts expire on a timer: keep them out of the picture
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_tree_and_code(snap_compare, tui_small_capture, size):
    assert snap_compare(InspectApp(str(tui_small_capture)), terminal_size=size, run_before=_prepare())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_pass_diff(snap_compare, tui_small_capture, size):
    app = InspectApp(str(tui_small_capture))
    assert snap_compare(app, terminal_size=size, run_before=_prepare(Place(0, 0, 1, "out"), "pass-diff"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_rank_diff(snap_compare, bundled_capture, size):
    """The baked select of the bundled GPU capture: at 120 columns its changed lines are elided in
    the middle so that the differing argument is in view."""
    # checked as a shared graph: the per-rank traces' rank literals are errors there
    app = InspectApp(str(bundled_capture("h200x2-rank-baked")), shared_graph=True)
    assert snap_compare(app, terminal_size=size, run_before=_prepare(view="rank-diff", sub_title="h200x2-rank-baked"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_findings(snap_compare, tui_small_capture, size):
    app = InspectApp(str(tui_small_capture))
    assert snap_compare(app, terminal_size=size, run_before=_prepare(keys=("4",)))


def test_snapshot_output_code_kernel_of_a_node(snap_compare, bundled_capture):
    """i on relu in the code view: the generated code, on the Triton kernel that computes it."""

    async def run_before(pilot) -> None:
        await settle(pilot)
        app = pilot.app
        app.sub_title = "h200x2-codegen-per-rank"  # the unpacked path differs from machine to machine
        app.code_view.goto_node("relu")
        await pilot.press("i")
        await settle(pilot)
        app.clear_notifications()
        await pilot.pause()

    app = InspectApp(str(bundled_capture("h200x2-codegen-per-rank")))
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
