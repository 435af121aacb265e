"""Which lines of two texts match, for the text diffs of graph code (`diff`'s unified and side by
side text, the TUI's diff views, the report's excerpts).

    m = line_matcher(a_lines, b_lines)      # a difflib.SequenceMatcher
    m.get_opcodes(); m.get_grouped_opcodes(3)
    unified_diff(a_lines, b_lines, "a", "b", n=3)

Texts of up to `ANCHORED_LINES` lines together are matched by difflib, as before. difflib finds
each matching block by scanning its whole range again, so on the code of a 100k-node graph that a
pass retagged in a third of its lines it took 3.7 s of a 4.8 s `diff` (VM; 15,491 scans). Larger
texts are matched the way the anchored graph diffs pair rows (diff/anchored.py): the common head
and tail, then the lines that occur once on each side paired where they keep their order (the
longest increasing run), then each stretch between two such pairs alone, recursively; a stretch
with no such line, or small, is matched by `sequence_match.match_gap` (difflib, or a compiled LCS when
large). The result is a valid line diff (every matched line equal, in order on both sides), not
always difflib's: difflib prefers the longest matching block, this the lines that are unique on
both sides (what `git diff --patience` prefers), which reads better where many lines repeat.
"""

from __future__ import annotations

import difflib
from collections import Counter
from typing import Iterable, Iterator, Sequence

from graphtrain_inspect.inspector.diff.sequence_match import lis, match_gap

ANCHORED_LINES = 20_000  # both texts' lines together above which they are matched by anchors
_SMALL_STRETCH = 4_000  # a stretch's lines-times-lines at or below which it is matched whole
_LCS_AREA = 400_000_000  # above it, a stretch without anchors is not given to the compiled LCS (~50 MB)


def line_matcher(a: Sequence[str], b: Sequence[str], *, autojunk: bool = False) -> difflib.SequenceMatcher:
    """A SequenceMatcher over the two line lists: difflib's own (with `autojunk`) for texts of up
    to ANCHORED_LINES lines together, else one whose matching blocks are found by anchors."""
    if len(a) + len(b) <= ANCHORED_LINES:
        return difflib.SequenceMatcher(None, a, b, autojunk=autojunk)
    return _Anchored(a, b)


class _Anchored(difflib.SequenceMatcher):
    """difflib's opcodes and grouped opcodes over matching blocks found by anchors."""

    def __init__(self, a: Sequence[str], b: Sequence[str]):
        # set up empty: difflib would index every line of b for its own search, which is not run
        super().__init__(None, (), (), autojunk=False)
        self.a, self.b = a, b
        self._blocks: list[difflib.Match] | None = None

    def get_matching_blocks(self) -> list[difflib.Match]:
        if self._blocks is None:
            self._blocks = _blocks(matching_pairs(self.a, self.b), len(self.a), len(self.b))
        return self._blocks


def matching_pairs(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int]]:
    """(i, j) of every matched line, a[i] == b[j], increasing on both sides."""
    out: list[tuple[int, int]] = []
    todo = [(0, len(a), 0, len(b))]
    while todo:
        alo, ahi, blo, bhi = todo.pop()
        while alo < ahi and blo < bhi and a[alo] == b[blo]:
            out.append((alo, blo))
            alo += 1
            blo += 1
        while alo < ahi and blo < bhi and a[ahi - 1] == b[bhi - 1]:
            ahi -= 1
            bhi -= 1
            out.append((ahi, bhi))
        if alo == ahi or blo == bhi:
            continue
        area = (ahi - alo) * (bhi - blo)
        anchors = _unique_in_order(a, b, alo, ahi, blo, bhi) if area > _SMALL_STRETCH else []
        if not anchors and area > _LCS_AREA:
            # no line unique to both sides in a stretch too large for the compiled LCS's table
            # (its bits grow with the product): difflib's own search, junk heuristic on
            sm = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=True)
            out.extend((alo + m.a + k, blo + m.b + k) for m in sm.get_matching_blocks() for k in range(m.size))
            continue
        if not anchors:
            match_gap(a, b, list(range(alo, ahi)), list(range(blo, bhi)), out)
            continue
        i0, j0 = alo, blo
        for i, j in anchors:
            if i > i0 and j > j0:  # a stretch with lines on both sides (most are none)
                todo.append((i0, i, j0, j))
            out.append((i, j))
            i0, j0 = i + 1, j + 1
        todo.append((i0, ahi, j0, bhi))
    out.sort()
    return out


def _unique_in_order(
    a: Sequence[str], b: Sequence[str], alo: int, ahi: int, blo: int, bhi: int
) -> list[tuple[int, int]]:
    """The lines of a[alo:ahi] and b[blo:bhi] that occur once in each, paired, the longest run of
    them in order on both sides."""
    ca, cb = Counter(a[alo:ahi]), Counter(b[blo:bhi])
    at_b = {line: j for j, line in enumerate(b[blo:bhi], blo) if cb[line] == 1}
    pairs = [(i, at_b[line]) for i, line in enumerate(a[alo:ahi], alo) if ca[line] == 1 and line in at_b]
    return lis(pairs)


def _blocks(pairs: list[tuple[int, int]], la: int, lb: int) -> list[difflib.Match]:
    """Matched lines as difflib's matching blocks: runs of consecutive pairs, then (la, lb, 0)."""
    out: list[difflib.Match] = []
    start = None
    size = 0
    for i, j in pairs:
        if start is not None and i == start[0] + size and j == start[1] + size:
            size += 1
            continue
        if start is not None:
            out.append(difflib.Match(start[0], start[1], size))
        start, size = (i, j), 1
    if start is not None:
        out.append(difflib.Match(start[0], start[1], size))
    out.append(difflib.Match(la, lb, 0))
    return out


def unified_diff(a: Sequence[str], b: Sequence[str], a_label: str = "a", b_label: str = "b", n: int = 3) -> list[str]:
    """`difflib.unified_diff(a, b, a_label, b_label, n=n, lineterm="")`, its lines matched by
    `line_matcher` (difflib's own for texts of up to ANCHORED_LINES lines, with the junk heuristic
    on as difflib.unified_diff has it)."""
    return list(unified_lines(a, b, line_matcher(a, b, autojunk=True).get_grouped_opcodes(n), a_label, b_label))


def unified_lines(
    a: Sequence[str],
    b: Sequence[str],
    groups: Iterable[list[tuple[str, int, int, int, int]]],
    a_label: str,
    b_label: str,
) -> Iterator[str]:
    """The lines of a unified diff of these grouped opcodes, as difflib.unified_diff writes them
    (no dates, no line ends)."""
    started = False
    for group in groups:
        if not started:
            started = True
            yield f"--- {a_label}"
            yield f"+++ {b_label}"
        first, last = group[0], group[-1]
        yield f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for line in a[i1:i2]:
                    yield " " + line
                continue
            if tag in ("replace", "delete"):
                for line in a[i1:i2]:
                    yield "-" + line
            if tag in ("replace", "insert"):
                for line in b[j1:j2]:
                    yield "+" + line


def _range(start: int, stop: int) -> str:
    """A hunk's range as unified diffs write it: first line (1-based) and length, the length left
    out when 1, the line before when empty."""
    length = stop - start
    if length == 1:
        return f"{start + 1}"
    return f"{start if not length else start + 1},{length}"
