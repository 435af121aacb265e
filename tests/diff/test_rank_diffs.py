"""The rank-diff strategies (inspector/diff/rank_diffs.py): one ordered list, each entry a named
way to diff one stage's graph on two ranks; every shortcut says what the decoded tables say, and a
caller (a test here) picks the strategies by argument."""

from __future__ import annotations

import pytest

from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.diff.rank_diffs import (
    STRATEGIES,
    VIEWS,
    RankPair,
    diff_ranks_by,
    only,
    rank_diff_gids,
    without,
)
from graphtrain_inspect.inspector.read.capture_index import open_capture


def _changes(d) -> list:
    return sorted(c.summary() for c in d.only_changes().changes())


def test_the_list_names_each_strategy_once_in_order():
    names = [s.name for s in STRATEGIES]
    assert names == ["identical", "classes", "positional", "anchored", "same-code", "tables"]
    assert all(s.applies and s.makes for s in STRATEGIES)
    assert [s.name for s in VIEWS] == ["anchored", "tables"]
    assert [s.name for s in without("classes", "positional")] == ["identical", "anchored", "same-code", "tables"]
    assert only("tables", "identical") == (STRATEGIES[0], STRATEGIES[-1])  # the list's order, not the call's
    with pytest.raises(ValueError, match="no rank-diff strategy"):
        without("nonesuch")


@pytest.mark.parametrize("name", ["h200x2-rank-divergent", "h200x4-rank-baked", "h200x2-precompile-load"])
def test_each_strategy_says_what_the_tables_say(bundled_capture, name):
    """On captures whose ranks diverge in structure (a pass decided differently), in a baked
    literal, or loaded one graph (the same md5s: `identical`): at every stage, the diff the first
    strategy that applies makes lists the changes the decoded tables list; the checks' diffs and
    the views' are those too."""
    cap = open_capture(str(bundled_capture(name)))
    ctx, tables_only = CheckContext(cap), CheckContext(cap, strategies=only("tables"))
    used: set[str] = set()
    for st in ctx.index.by_rank[0]:
        across = ctx.index.across(st.key)
        for other in sorted(across)[1:]:
            ga, gb = across[0].gid, across[other].gid
            pair = RankPair(cap, 0, ga, ctx._stage_ctx(0, ga), other, gb, ctx._stage_ctx(other, gb))
            by, d = diff_ranks_by(pair, without("classes"))
            _, whole = diff_ranks_by(pair, only("tables"))
            assert by is not None and d is not None and whole is not None
            used.add(by.name)
            want = _changes(whole)
            assert _changes(d) == want, (st.key.label(), other, by.name)
            assert _changes(ctx.rank_diff(st.key, 0, other)) == want
            assert _changes(tables_only.rank_diff(st.key, 0, other)) == want
            assert _changes(rank_diff_gids(cap, 0, ga, other, gb)) == want
    assert used - {"tables"}, "a shortcut answered somewhere"
