"""The checks' fast paths (rank diffs from undecoded rows, stale symbols from the rows that name
one, results shared by ranks that agree) report exactly what reading every table whole reports,
on real sample captures with each bug switch: the same findings, messages and evidence."""

from __future__ import annotations

import pytest

from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.checks import check_report
from graphtrain_inspect.inspector.checks import row_rank_diff as rowdiff
from graphtrain_inspect.samples.bugs import ALL as ALL_BUGS


def report(path, fast: bool) -> dict:
    saved = rowdiff.ENABLED
    rowdiff.ENABLED = fast
    try:
        return check_report(open_capture(str(path))).to_json()
    finally:
        rowdiff.ENABLED = saved


@pytest.mark.parametrize("bugs, coor", [((), False), (("rank-baked",), False), (("stale-symbol",), False), (tuple(ALL_BUGS), False), (("rank-baked",), True)])
def test_fast_paths_report_what_whole_tables_report(sample_capture, bugs, coor):
    path = sample_capture(*bugs, coor=coor)
    fast, slow = report(path, True), report(path, False)
    assert fast == slow
    if bugs:
        assert fast["findings"], "the bug was found"


def test_fast_paths_are_taken_on_format_2_captures(sample_capture):
    """Guard against a fast path that silently never applies: on a capture with a rank-baked
    constant every rank diff is made from rows, and no table is read whole for a rank diff."""
    from graphtrain_inspect.inspector.checks.tables_and_blame import CheckContext
    from graphtrain_inspect.inspector.read.stages import StageIndex

    cap = open_capture(str(sample_capture("rank-baked")))
    ctx = CheckContext(cap)
    keys = [st.key for st in StageIndex(cap).by_rank[0]]
    diffs = [ctx.rank_diff(k, 0, 1) for k in keys]
    assert diffs and all(d is not None and d.unlisted_same for d in diffs)
    assert any(not d.empty for d in diffs)  # the baked literal shows up
    assert len(cap._tables) == 0  # no node table was parsed whole
