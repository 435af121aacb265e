"""`check_reports`: the two gradings `report` shows made with one set of rank diffs give what
`check_report` gives under each grading alone (the findings, what could not run, the notes)."""

from __future__ import annotations

import pytest

from graphtrain_inspect.inspector.checks import check_report, check_reports
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.samples.bugs import ALL as ALL_BUGS


def _doc(report) -> dict:
    return {
        "findings": [f.to_json() for f in report.findings],
        "not_run": [n.to_json() for n in report.not_run],
        "notes": report.notes,
        "summary": report.summary(),
    }


@pytest.mark.parametrize("bugs, coor", [(ALL_BUGS, False), (("rank-baked",), True)])
def test_gradings_made_together_are_each_made_alone(sample_capture, bugs, coor):
    path = str(sample_capture(*bugs, coor=coor))
    together = [_doc(r) for r in check_reports(open_capture(path), [False, True])]
    alone = [_doc(check_report(open_capture(path), shared_graph=shared)) for shared in (False, True)]
    assert together == alone
    # per-rank traces: the rank literal is graded an error only when the graph is shared (a
    # compile on one rank is known shared under both gradings)
    assert (together[0] != together[1]) == (not coor)
