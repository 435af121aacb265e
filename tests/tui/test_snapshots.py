"""SVG snapshots of the TUI on the deterministic small capture (textual is pinned exactly in
pyproject.toml, so the rendering is stable). Update with `pytest --snapshot-update` after a
deliberate change, and look at the SVGs."""

from __future__ import annotations

from tests.tui_support import settle
from graphtrain_inspect.tui.app import InspectApp
from graphtrain_inspect.tui.session import Place

SIZE = (130, 30)


def _prepare(place: Place | None = None, view: str | None = None, keys: tuple[str, ...] = ()):
    async def run_before(pilot) -> None:
        await settle(pilot)
        app = pilot.app
        app.sub_title = "small"  # the path differs from machine to machine
        if place is not None:
            app.open_place(place, view=view)
            await settle(pilot)
        if keys:
            await pilot.press(*keys)
            await settle(pilot)
        app.clear_notifications()  # toasts expire on a timer: keep them out of the picture
        await pilot.pause()

    return run_before


def test_snapshot_code_view(snap_compare, tui_small_capture):
    assert snap_compare(InspectApp(str(tui_small_capture)), terminal_size=SIZE, run_before=_prepare())


def test_snapshot_pass_diff_side_by_side(snap_compare, tui_small_capture):
    app = InspectApp(str(tui_small_capture))
    assert snap_compare(app, terminal_size=SIZE, run_before=_prepare(Place(0, 0, 1, "out"), "pass-diff", ("s",)))


def test_snapshot_findings(snap_compare, tui_small_capture):
    app = InspectApp(str(tui_small_capture))
    assert snap_compare(app, terminal_size=SIZE, run_before=_prepare(keys=("4",)))


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
