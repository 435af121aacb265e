"""A check that raises is contained: the report says "not run: <check> raised <error>"
and holds every other check's findings as they are without it; `check` prints no traceback."""

from __future__ import annotations

import pytest

from graphtrain_inspect.inspector.checks import CHECKS, check_modules, check_report
from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.tui_support import small_capture


@pytest.fixture(scope="module")
def cap_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("contained") / "cap"
    small_capture(d)
    return d


def _findings(report) -> list[dict]:
    return [f.to_json() for f in report.findings]


@pytest.mark.parametrize("broken", ["rank-baked-constant", "incomplete-capture"])
def test_a_raising_check_is_reported_and_the_others_stand(cap_dir, monkeypatch, broken):
    with open_capture(str(cap_dir)) as cap:
        whole = check_report(cap)
    assert whole.findings, "the small capture has findings (its rank-baked bug)"
    others = [k for k in CHECKS if k != broken]
    with open_capture(str(cap_dir)) as cap:
        expected = _findings(check_report(cap, others))

    def explode(ctx):
        raise ValueError("no such node\nsecond line")

    monkeypatch.setattr(check_modules()[broken], "run", explode)
    with open_capture(str(cap_dir)) as cap:
        report = check_report(cap)
    assert _findings(report) == expected
    raised = [n for n in report.not_run if n.check == broken]
    assert len(raised) == 1 and raised[0].reason == "raised ValueError: no such node", raised[0].reason
    from graphtrain_inspect.capture.shared.terminal_text import Style
    from graphtrain_inspect.inspector.cli.check import render

    text = "\n".join(render(report, Style(False), 200, 0))
    assert f"not run: {broken} raised ValueError: no such node" in text, text
    assert "second line" not in text
