"""The views are declared once (tui/views.py): the app's tabs, keys, palette entries and F1 lines
are made from the table, and a new view is one row and one widget."""

from __future__ import annotations

from textual.widgets import Label, Static, TabbedContent, TabPane

from graphtrain_inspect.tui.app import InspectApp
from graphtrain_inspect.tui.commands import CaptureCommands
from graphtrain_inspect.tui.screens.help import HelpScreen
from graphtrain_inspect.tui.session import CaptureSession, Place
from graphtrain_inspect.tui.views import VIEWS, Skip, View
from graphtrain_inspect.tui.widgets.view_result import Drawn, ResultContext
from tests.tui_support import settle


def palette_views(app) -> list[str]:
    return [text for text, _, _ in CaptureCommands(app.screen)._entries() if text.startswith("view: ")]


async def help_screen(app, pilot) -> HelpScreen:
    await pilot.press("f1")
    await pilot.pause()
    assert isinstance(app.screen, HelpScreen)
    return app.screen


def intro_text(screen: HelpScreen) -> str:
    return str(screen.query_one("#help-intro", Static).content)


async def test_every_row_is_a_tab_a_key_a_palette_entry_and_an_f1_line(tui_small_capture):
    """Each view of the table, and nothing besides: written apart, a tab, key, palette entry or
    help line would be one more (or one less) than the table's rows."""
    app = InspectApp(str(tui_small_capture))
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        ids = [v.id for v in VIEWS]
        assert [p.id for p in app.query(TabPane)] == ids
        keyed = [b for b in InspectApp.BINDINGS if (b.id or "").startswith("view.")]
        assert [(b.key, b.id) for b in keyed] == [(str(n), f"view.{i}") for n, i in enumerate(ids, 1)]
        assert palette_views(app) == [f"view: {v.title}" for v in VIEWS]
        tabbed = app.query_one(TabbedContent)
        for v in VIEWS:
            assert tabbed.get_tab(v.id).label_text in (v.tab, v.short_tab) or v.id in ("findings", "problems")
            await pilot.press(v.key)
            await settle(pilot)
            assert app.active_view == v.id, v
        screen = await help_screen(app, pilot)
        lines = [ln for ln in intro_text(screen).splitlines() if ln.startswith("  [b]")]
        assert [ln.split("[/b]")[0].removeprefix("  [b]") for ln in lines] == [f"{v.key} {v.tab}" for v in VIEWS]
        assert [ln.split("[/b]")[1].strip() for ln in lines] == [v.help for v in VIEWS]
        keys = {bid: does for _, _, does, bid in screen.rows}
        assert all(keys[f"view.{v.id}"] == (v.key_help or v.title) for v in VIEWS)


class Ranks(Static):
    """A toy view: which ranks have the place, from a job in a worker thread."""

    def show_result(self, payload: list[int], extra: str, ctx: ResultContext) -> Drawn:
        self.update(f"ranks {payload} · {extra}")
        return Drawn(title=f"{ctx.label} · toy")

    def clear(self, message: str) -> None:
        self.update(message)


def ranks_job(session: CaptureSession, place: Place, base: int) -> tuple[list[int], str]:
    return [r for r in session.cap.ranks if session.same_place_on(place, r) is not None], place.label(session.outline)


TOY = View(
    id="toy",
    key="0",
    tab="Toy",
    title="Toy ranks",
    help="the ranks that have the selected graph",
    widget=Ranks,
    job=ranks_job,
    guard=lambda session, place: Skip("a pass, please", "traced") if place.seq is None else None,
    title_line=True,
)


class ToyApp(InspectApp):
    VIEWS = (*VIEWS, TOY)


async def test_a_new_view_is_one_row_and_one_widget(tui_small_capture):
    """A row added to a copy of the table and its widget: the app has its tab and key, fills it
    off the UI thread, applies its guard, and lists it in the palette and in F1."""
    app = ToyApp(str(tui_small_capture))
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        assert app.query_one(TabbedContent).get_tab("toy").label_text == "Toy"
        assert app.place == Place(0, 0, 0, "out")
        await pilot.press("0")
        await settle(pilot)
        assert app.active_view == "toy"
        assert str(app.query_one("#toy-view", Ranks).content) == "ranks [0, 1] · rank 0 · #0 remove_dead_code"
        assert str(app.query_one("#toy-title", Label).content) == "rank 0 · #0 remove_dead_code · toy"
        app.open_place(Place(1, 0))  # the traced graph: the guard says why there is nothing
        await settle(pilot)
        assert str(app.query_one("#toy-view", Ranks).content) == "a pass, please"
        assert str(app.query_one("#toy-title", Label).content) == "traced"
        assert palette_views(app)[-1] == "view: Toy ranks"
        await pilot.press("1")
        await settle(pilot)
        dict((t, cb) for t, cb, _ in CaptureCommands(app.screen)._entries())["view: Toy ranks"]()
        await settle(pilot)
        assert app.active_view == "toy"
        screen = await help_screen(app, pilot)
        assert "  [b]0 Toy[/b]          the ranks that have the selected graph" in intro_text(screen).splitlines()
        assert ("0", "Toy ranks", "view.toy") in {row[1:] for row in screen.rows}
    # the app's own table is untouched by the subclass's
    assert "toy" not in {v.id for v in InspectApp.VIEWS}
    assert all(b.id != "view.toy" for b in InspectApp.BINDINGS)
