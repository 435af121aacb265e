"""Matching two sequences by position: the longest run of pairs in order on both sides (`lis`),
keys that occur once on each side (`unique_pairs`), and a gap between matched places filled by a
sequence match (`match_gap`: difflib, or a compiled LCS for a large gap). Used by the node
alignment (align.py) and the line matcher of text diffs (line_match.py).
"""

from __future__ import annotations

import bisect
import difflib
import itertools
from itertools import compress
from typing import Sequence

from rapidfuzz.distance import LCSseq

DIFFLIB_LIMIT = 250_000  # gap size product above which a compiled LCS replaces difflib


def unique_pairs(
    ka: Sequence[int], kb: Sequence[int], ia: Sequence[int], ib: Sequence[int], nkeys: int
) -> list[tuple[int, int]]:
    """(i, j) for each key id that occurs once in `ka` and once in `kb` (the keys of rows `ia`
    and `ib`), sorted."""
    count_a = [0] * nkeys
    pos_a = [0] * nkeys
    for i, k in zip(ia, ka):
        count_a[k] += 1
        pos_a[k] = i
    count_b = [0] * nkeys
    pos_b = [0] * nkeys
    for j, k in zip(ib, kb):
        count_b[k] += 1
        pos_b[k] = j
    return sorted((pos_a[k], pos_b[k]) for k in range(nkeys) if count_a[k] == 1 and count_b[k] == 1)


def lis(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Longest run of pairs increasing in both coordinates (pairs sorted by the first): the run
    patience sorting finds over them all (`lis_of`), searched only where it must be. Where every
    pair before a place has a smaller second coordinate than every pair after it (a cut), the run
    of the whole is the runs of the parts joined (patience sorting never puts a pair after the cut
    on a pile of a pair before it). Pairs that are in order but for a few drops (two tables that
    differ by moved rows) are cut almost everywhere: the cuts inside each stretch in order between
    drops are a range found by bisection, and only the parts between cuts are searched."""
    js = [j for _, j in pairs]
    n = len(js)
    drops = list(compress(range(1, n), map(int.__ge__, js, js[1:])))  # js[k - 1] >= js[k]
    if not drops:
        return list(pairs)  # all of them (a text or table that kept its order): no search
    if len(drops) * 16 > n:
        return lis_of(pairs)  # out of order throughout: cuts are few
    starts, ends = [0, *drops], [*drops, n]
    # the largest second coordinate before each stretch, the smallest after it
    before = list(itertools.accumulate((js[e - 1] for e in ends[:-1]), max, initial=-1))
    after = list(itertools.accumulate((js[s] for s in reversed(starts[1:])), min, initial=1 << 62))[::-1]
    out: list[tuple[int, int]] = []
    done = 0  # pairs before this place are in `out`
    last_cut = -1  # the last cut so far: after this pair
    for s, e, lo_j, hi_j in zip(starts, ends, before, after):
        if lo_j >= hi_j:
            continue  # no cut in this stretch
        # cut after k (s <= k <= e - 2) where js[k + 1] > lo_j and js[k] < hi_j
        first = max(s, bisect.bisect_right(js, lo_j, s, e) - 1)
        last = min(e - 2, bisect.bisect_left(js, hi_j, s, e) - 1)
        if first > last:
            continue
        if first - last_cut >= 2:  # the part between the cuts holds two pairs or more: searched
            out.extend(pairs[done : last_cut + 1])
            out.extend(lis_of(pairs[last_cut + 1 : first + 1]))
            done = first + 1
        last_cut = last
    if n - 1 - last_cut >= 2:
        out.extend(pairs[done : last_cut + 1])
        out.extend(lis_of(pairs[last_cut + 1 :]))
        done = n
    out.extend(pairs[done:])
    return out


def lis_of(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Longest run of pairs increasing in both coordinates (pairs sorted by the first), by
    patience sorting: of the longest runs, the one that ends at the last pair placed at the end."""
    tails: list[int] = []
    tail_idx: list[int] = []
    prev = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        pos = bisect.bisect_left(tails, j)
        if pos == len(tails):
            tails.append(j)
            tail_idx.append(k)
        else:
            tails[pos] = j
            tail_idx[pos] = k
        prev[k] = tail_idx[pos - 1] if pos > 0 else -1
    out = []
    k = tail_idx[-1] if tail_idx else -1
    while k >= 0:
        out.append(pairs[k])
        k = prev[k]
    out.reverse()
    return out


def match_gap(sa: Sequence, sb: Sequence, ia: list[int], ib: list[int], out: list[tuple[int, int]]) -> None:
    if not ia or not ib:
        return
    if len(ia) * len(ib) <= DIFFLIB_LIMIT:
        sm = difflib.SequenceMatcher(None, [sa[i] for i in ia], [sb[j] for j in ib], autojunk=False)
        for blk in sm.get_matching_blocks():
            for k in range(blk.size):
                out.append((ia[blk.a + k], ib[blk.b + k]))
        return
    # a large gap: a longest common subsequence of the signatures, in compiled code (rapidfuzz's
    # bit-parallel LCS: ~17 ms for a 932 x 2,136 gap where difflib takes seconds)
    xs, ys = [sa[i] for i in ia], [sb[j] for j in ib]
    for mb in LCSseq.editops(xs, ys).as_matching_blocks():
        for k in range(mb.size):
            out.append((ia[mb.a + k], ib[mb.b + k]))
