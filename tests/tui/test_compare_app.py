"""`tui BASE NEW` driven with Textual's pilot: the passes that changed first, the selected pass's
node changes between the runs, the findings that changed, capture text escaped."""

from __future__ import annotations

import pytest

from graphtrain_inspect.tui.compare_app import CompareApp
from tests.cli.test_compare import _run


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("tui-runs")
    return _run(d / "clean", baked=False), _run(d / "edited", baked=True, renamed=True, extra=True)


async def _settled(pilot) -> None:
    app = pilot.app
    for _ in range(100):
        await app.workers.wait_for_complete()
        await pilot.pause()
        if not any(w.is_running for w in app.workers) and (app.runs is not None or app.error):
            await pilot.pause()
            return
    raise AssertionError("the app did not settle")


async def test_changed_passes_first_with_their_node_changes(two_runs):
    app = CompareApp(*two_runs)
    async with app.run_test(size=(160, 40)) as pilot:
        await _settled(pilot)
        labels = [s.label() for s in app.shown]
        assert labels == ["shard_rows", "noop -> tidy", "extra_pass"], labels
        table = app.query_one("#stages")
        assert "changed on rank 1" in str(table.get_row_at(0)[2])
        await _settled(pilot)  # the first row's diff, made as it was highlighted
        assert any("~ select: args[2]: 0 -> 1" in line for line in app.detail_lines), app.detail_lines
        findings = str(app.query_one("#findings").render())
        assert "NEW" in findings and "rank-baked-constant" in findings
        assert "1 new error" in str(app.query_one("#runs").render())
        await pilot.press("a")  # every pass: the same ones after
        assert [s.label() for s in app.shown][3:] == ["trace", "remove_dead_code"]


async def test_unreadable_run_says_so(two_runs, tmp_path):
    app = CompareApp(two_runs[0], str(tmp_path / "nothing"))
    async with app.run_test(size=(120, 30)) as pilot:
        await _settled(pilot)
        assert app.error and "nothing" in app.error
