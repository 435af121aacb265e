"""Which characters of a name to keep when it must shrink, so that rows stay told apart.

Cutting the middle of every name alike made `decompose_map_to_while_loop` and
`decompose_scan_to_while_loop` both `decompo…le_loop`: two rows read as one. Here the part that tells a name
from its most alike sibling (what lies between their common start and common end) is kept whole
where it fits, with as much of the shared start and end around it as the width allows; only a
name with no alike sibling, or whose differing part is itself too long, loses its middle.
"""

from __future__ import annotations

from typing import Iterable

Spans = list[tuple[int, int]]  # [start, end) ranges of the name kept, an ellipsis between two


def _common(a: str, b: str) -> tuple[int, int]:
    """(common prefix, common suffix) lengths of a and b, not overlapping in either."""
    limit = min(len(a), len(b))
    pre = 0
    while pre < limit and a[pre] == b[pre]:
        pre += 1
    suf = 0
    while suf < limit - pre and a[-1 - suf] == b[-1 - suf]:
        suf += 1
    # shared only as whole words: the `e` of eliminate_ and efficient_ tells nothing apart
    if 0 < pre < len(a) and a[pre - 1] != "_":
        pre = a.rfind("_", 0, pre) + 1  # back to just after the last `_` (0 when none)
    if suf and a[len(a) - suf] != "_":
        cut = a.find("_", len(a) - suf)  # on to the next `_` (none: nothing shared)
        suf = len(a) - cut if cut >= 0 else 0
    return pre, suf


def distinguishing(name: str, others: Iterable[str]) -> tuple[int, int]:
    """(start, end) of the part of `name` that tells it from its most alike other name: the
    whole name when none shares a start or an end with it."""
    best = (0, 0)
    for o in others:
        if o != name:
            c = _common(name, o)
            if sum(c) > sum(best):
                best = c
    return best[0], len(name) - best[1]


def _middle(n: int, keep: int) -> Spans:
    chars = keep - 1  # one cell for the ellipsis
    head = (chars + 1) // 2
    return [(0, head), (n - (chars - head), n)]


def kept_spans(name: str, keep: int, others: Iterable[str] = ()) -> Spans:
    """The spans of `name` to show in `keep` cells (ellipses included)."""
    n = len(name)
    if keep >= n:
        return [(0, n)]
    if keep < 3:
        return [(0, max(keep - 1, 0))]  # and the ellipsis
    a, b = distinguishing(name, others)
    if (a, b) == (0, n):
        return _middle(n, keep)
    d = b - a
    best: tuple | None = None  # (starts, shown, balance, p): s follows
    for p in range(a, -1, -1):
        for s in range(n - b, -1, -1):
            if 0 < s < min(n - b, 3) or 0 < p < min(a, 3):
                continue  # a lone letter of a shared part (`…s`) says nothing
            cost = p + (p < a) + d + (s < n - b) + s
            if cost <= keep:
                # a few letters of the shared start first (`dec…triton…`, not `…triton…`)
                score = (p >= min(a, 3), p + s, -abs(p - s), p)
                if best is None or score > best:
                    best = score
                break  # a smaller s only shows less
    if best is None:  # the differing part alone is too long: its middle goes, the shared parts
        # too but for a few letters of the start
        for pre in (min(a, 3), 0):
            inner = keep - pre - (pre < a) - (b < n)
            if inner >= 3:
                head, tail = _middle(d, inner)
                return _merge([(0, pre), (a + head[0], a + head[1]), (a + tail[0], a + tail[1])])
        return _middle(n, keep)
    _, shown, _, p = best
    return _merge([(0, p), (a, b), (n - (shown - p), n)])


def _merge(spans: Spans) -> Spans:
    out: Spans = []
    for st, en in spans:
        if out and out[-1][1] == st:
            out[-1] = (out[-1][0], en)
        elif en > st:
            out.append((st, en))
    return out


def render(name: str, spans: Spans, ellipsis: str = "…") -> str:
    """The name as `kept_spans` keeps it (for tests and plain text)."""
    parts, pos = [], 0
    for st, en in spans:
        if st > pos:
            parts.append(ellipsis)
        parts.append(name[st:en])
        pos = en
    if pos < len(name):
        parts.append(ellipsis)
    return "".join(parts)
