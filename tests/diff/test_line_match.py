"""inspector/diff/line_match.py: the text diffs of large graph code, matched by anchors.

Whatever lines it pairs, a text diff must be a diff: every paired line equal, in order on both
sides, and the unified text, applied to a, gives b. The unified text of difflib's own opcodes is
what difflib.unified_diff writes, so texts on either side of the size line read alike. Real
graph code (every pass of the sample with every bug planted, both ranks) is matched by anchors as
a large graph's would be, and the `diff` command's text of such a capture still applies.
"""

from __future__ import annotations

import difflib
import io
import re
from contextlib import redirect_stdout

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtrain_inspect.inspector.cli.main import main as cli_main
from graphtrain_inspect.inspector.diff import graph_diff, line_match
from graphtrain_inspect.inspector.diff.text_rows import DiffModel
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.samples.bugs import ALL as ALL_BUGS

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$")


def applied(a: list[str], diff: list[str]) -> list[str]:
    """b, from a and a unified diff of a to b (context lines checked against a)."""
    out: list[str] = []
    at = 0
    for line in diff[2:]:
        m = _HUNK.match(line)
        if m:
            start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
            assert start >= at
            out.extend(a[at:start])
            at = start
            continue
        tag, text = line[:1], line[1:]
        if tag in (" ", "-"):
            assert a[at] == text, (at, a[at], text)
            at += 1
        if tag in (" ", "+"):
            out.append(text)
    return out + a[at:]


def _check_pairs(a: list[str], b: list[str]) -> None:
    pairs = line_match.matching_pairs(a, b)
    assert all(a[i] == b[j] for i, j in pairs)
    assert all(i1 < i2 and j1 < j2 for (i1, j1), (i2, j2) in zip(pairs, pairs[1:]))


_WORDS = st.lists(st.sampled_from(["x = a", "y = b", "z = c", "return x", "", "    pass"]) | st.text(max_size=6))


@settings(max_examples=300, deadline=None)
@given(_WORDS, _WORDS, st.sampled_from([(4_000, 400_000_000), (0, 400_000_000), (0, 0)]))
def test_anchored_matches_are_a_diff(a, b, limits):
    """Each way a stretch is matched: whole when small, by anchors, and by difflib where it has no
    anchor and is too large for the compiled LCS (the limits lowered to reach them here)."""
    saved = line_match._SMALL_STRETCH, line_match._LCS_AREA
    line_match._SMALL_STRETCH, line_match._LCS_AREA = limits
    try:
        _check_pairs(a, b)
        m = line_match._Anchored(a, b)
        diff = list(line_match.unified_lines(a, b, m.get_grouped_opcodes(2), "a", "b"))
    finally:
        line_match._SMALL_STRETCH, line_match._LCS_AREA = saved
    assert applied(a, diff) == b if diff else a == b


@settings(max_examples=300, deadline=None)
@given(_WORDS, _WORDS, st.integers(0, 4))
def test_unified_lines_write_what_difflib_writes(a, b, n):
    groups = difflib.SequenceMatcher(None, a, b).get_grouped_opcodes(n)
    assert list(line_match.unified_lines(a, b, groups, "a", "b")) == list(
        difflib.unified_diff(a, b, "a", "b", n=n, lineterm="")
    )


@pytest.fixture(scope="module")
def every_bug(sample_capture):
    return sample_capture(*ALL_BUGS)


def test_real_graph_code_matched_by_anchors_is_a_diff(every_bug):
    """Every pass of the sample on both ranks, and each graph against the other rank's: the diff
    by anchors applies, and changes no more lines than difflib's by more than a few."""
    cap = open_capture(str(every_bug))
    pairs = 0
    for rank in cap.ranks:
        for p in cap.passes(rank):
            for role in p.after:
                texts = graph_diff.pass_text_diff(cap, rank, p, role)
                if texts is None:
                    continue
                a, b = texts
                _check_pairs(a, b)
                diff = list(line_match.unified_lines(a, b, line_match._Anchored(a, b).get_grouped_opcodes(3), "a", "b"))
                assert applied(a, diff) == b
                ours = sum(1 for x in diff[2:] if x[:1] in "+-")
                theirs = sum(1 for x in difflib.unified_diff(a, b, lineterm="") if x[:1] in "+-") - 2 * (a != b)
                assert ours <= theirs + 4, (p.name, ours, theirs)
                pairs += 1
    assert pairs > 10


def test_diff_text_of_a_large_graph_applies(every_bug, monkeypatch):
    """`diff --pass P` with every text taken as a large one (matched by anchors): the text it
    prints applies to the pass's input code and gives its output code; the TUI's model of the
    same diff counts what the text shows."""
    monkeypatch.setattr(line_match, "ANCHORED_LINES", 0)
    cap = open_capture(str(every_bug))
    rank = cap.ranks[0]
    p = next(p for p in cap.passes(rank) if p.name == "tag_activation_checkpointing")
    a, b = graph_diff.pass_text_diff(cap, rank, p, "out")
    out = io.StringIO()
    with redirect_stdout(out):
        rc = cli_main(["diff", str(every_bug), "--pass", p.name, "--text", "--color", "never", "--context", "3"])
    assert rc in (0, None)
    text = out.getvalue().splitlines()
    start = next(i for i, x in enumerate(text) if x.startswith("--- "))
    diff = text[start:]
    assert applied(a, diff) == b
    model = DiffModel(a, b)
    assert model.counts == {
        "removed": sum(1 for x in diff[2:] if x.startswith("-")),
        "added": sum(1 for x in diff[2:] if x.startswith("+")),
    }
