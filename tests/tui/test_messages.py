"""Progress messages coalesce: of the progress a job posted while the UI thread was busy, only the
latest is drawn. Run through Textual's own message pump."""

from __future__ import annotations

from textual import on
from textual.app import App

from graphtrain_inspect.tui.messages import Progress


class _Recorder(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.drawn: list[tuple[str, str]] = []

    @on(Progress)
    def on_progress(self, m: Progress) -> None:
        self.drawn.append((m.job, m.text))


async def test_only_the_latest_pending_progress_of_a_job_is_handled():
    app = _Recorder()
    async with app.run_test() as pilot:
        # posted back to back, as a worker thread does while the UI thread is busy
        for i in range(5):
            app.post_message(Progress("view-code", f"step {i}"))
        app.post_message(Progress("load", "indexing"))
        app.post_message(Progress("view-code", "", done=True))
        await pilot.pause()
    assert app.drawn == [("view-code", "step 4"), ("load", "indexing"), ("view-code", "")]


def test_progress_of_another_job_is_not_replaced():
    a, b = Progress("load", "x"), Progress("checks", "y")
    assert a.can_replace(Progress("load", "z")) and not a.can_replace(b)
