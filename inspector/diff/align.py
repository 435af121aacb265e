"""Structural node alignment of two graphs: which node of one is which node of the other.

Names are useless for this (passes shift name counters, ranks print different group names), so
nodes are compared by what they are:

* `shallow` signature: opcode, target, number of args, kwarg names (placeholders by position,
  get_attr targets without their numbering);
* `local` key: the shallow signature plus the node's normalized literals and the shallow
  signatures of its inputs.

Alignment, every step linear or n log n in the graph size:
1. common prefix and suffix by local key;
2. anchors: local keys that occur once on each side;
3. propagation along edges from every matched pair: inputs at the same argument position, and
   users with the same signature at the same position, when unmatched and alike;
4. gaps between matched nodes (in order): a sequence match on shallow signatures (difflib for
   small gaps; for large ones a longest common subsequence by rapidfuzz, in C++, where an
   in-order greedy pairing used to stand, which left matches out).

The work is per row and in Python, so what does not change the result is skipped: a row equal to
the other side's row of the same name shares its pieces (`Parts(like=)`), the prefix and suffix
scans compare such rows without building keys, keys are built for the middle rows only, and
propagation passes over pairs with no unmatched neighbour. tests/diff/test_graph_diff_properties.py
holds the result to what is known by construction (changed literals, inserted and deleted nodes,
shifted names) and to a quadratic LCS reference.
"""

from __future__ import annotations

import bisect
from itertools import compress
from operator import itemgetter, not_
from typing import Any, Callable, Iterable, Sequence

from graphtrain_inspect.capture.shared.logformat import NodeRow
from graphtrain_inspect.inspector.diff.row_parts import Parts
from graphtrain_inspect.inspector.diff.sequence_match import lis, match_gap, unique_pairs


def align_parts(pa: Parts, pb: Parts) -> dict[int, int]:
    """Matched node indices a -> b (in the order they were matched)."""
    return dict(align_indices(pa, pb)[2])


def align_indices(pa: Parts, pb: Parts) -> tuple[list[int], list[int], list[tuple[int, int]]]:
    """(ma, mb, pairs): ma[i] the b row matched with a's row i, else -1 (ma[len(a)] == -1: a ref
    to no row); mb alike; the matched pairs in the order they were matched."""
    na, nb = len(pa.rows), len(pb.rows)
    ma = [-1] * (na + 1)
    mb = [-1] * (nb + 1)
    order: list[tuple[int, int]] = []  # matched pairs, in order
    same = _same_key(pa, pb, ma)
    # the scans, with same()'s commonest case inline: rows that share their pieces, whose inputs
    # are matched with each other's
    same_as = pb.same_as if pb.same_as is not None else [-1] * nb
    ins_a, ins_b = pa.ins, pb.ins
    mget = ma.__getitem__
    add = order.append

    pre = 0
    lim = min(na, nb)
    while pre < lim:
        if same_as[pre] == pre:
            xs = ins_a[pre]
            if not xs or tuple(map(mget, xs)) == ins_b[pre] or same(pre, pre):
                ma[pre] = mb[pre] = pre
                add((pre, pre))
                pre += 1
                continue
            break
        if not same(pre, pre):
            break
        ma[pre] = mb[pre] = pre
        add((pre, pre))
        pre += 1
    # from the end, inputs are not matched yet: they have the same signatures where they share
    # their pieces too
    twin = [*same_as, -1].__getitem__
    i, j = na - 1, nb - 1
    while (
        i >= pre
        and j >= pre
        and (same_as[j] == i and (not ins_a[i] or tuple(map(twin, ins_b[j])) == ins_a[i]) or same(i, j))
    ):
        ma[i] = j
        mb[j] = i
        add((i, j))
        i -= 1
        j -= 1
    suf = na - 1 - i
    if pre < na - suf and pre < nb - suf:
        _align_middle(pa, pb, ma, mb, order, range(pre, na - suf), range(pre, nb - suf))
    return ma, mb, order


def align_seeded(
    pa: Parts, pb: Parts, seeds: Iterable[tuple[int, int]]
) -> tuple[list[int], list[int], list[tuple[int, int]]]:
    """align_indices's result where `seeds` are matched beforehand (pairs known by other means: rows
    that are the same bytes on both sides) and every other row is matched as align_indices matches the
    rows between its common prefix and suffix."""
    na, nb = len(pa.rows), len(pb.rows)
    ma = [-1] * (na + 1)
    mb = [-1] * (nb + 1)
    order: list[tuple[int, int]] = []
    for i, j in seeds:
        ma[i] = j
        mb[j] = i
        order.append((i, j))
    mid_a = [i for i in range(na) if ma[i] < 0]
    mid_b = [j for j in range(nb) if mb[j] < 0]
    if mid_a and mid_b:
        _align_middle(pa, pb, ma, mb, order, mid_a, mid_b)
    return ma, mb, order


def _align_middle(
    pa: Parts,
    pb: Parts,
    ma: list[int],
    mb: list[int],
    order: list[tuple[int, int]],
    mid_a: Sequence[int],
    mid_b: Sequence[int],
) -> None:
    """Match the unmatched rows `mid_a` with `mid_b` (in order): anchors of unique local keys,
    propagation along edges from every matched pair, then the gaps between matched rows."""
    na, nb = len(pa.rows), len(pb.rows)
    sa, sb = pa.sigs, pb.sigs
    ins_a = pa.ins
    mget = ma.__getitem__
    add = order.append
    ids: dict[tuple, int] = {}
    ka, kb = pa.keys(ids, mid_a), pb.keys(ids, mid_b)
    for i, j in lis(unique_pairs(ka, kb, mid_a, mid_b, len(ids))):
        ma[i] = j
        mb[j] = i
        add((i, j))
    # every row that propagation can still match is in the middle and unmatched now (U):
    # only the users among U matter to it, and only the pairs of a row next to one in U
    u_a = [i for i in mid_a if ma[i] < 0]
    ua = _users_of(pa, u_a)
    ub = _users_of(pb, [j for j in mid_b if mb[j] < 0])
    in_u = set(u_a)
    near = set(ua)
    near.update(compress(range(na), map(not_, map(in_u.isdisjoint, ins_a))))
    queue = list(compress(order, map(near.__contains__, map(_FIRST, order))))
    _propagate(pa, pb, ma, mb, order, queue, near, ua, ub)
    # gaps between matched nodes, in order on both sides: those with an unmatched a row
    ii = list(compress(range(na), map((-1).__lt__, ma[:na])))  # matched a rows, in order
    jj = list(map(mget, ii))
    if not _increasing(jj):
        mono = lis(list(zip(ii, jj)))
        ii, jj = [i for i, _ in mono], [j for _, j in mono]
    ii.append(na)
    jj.append(nb)
    extra: list[tuple[int, int]] = []
    gaps: dict[int, list[int]] = {}
    for x in mid_a:
        if ma[x] < 0:
            k = bisect.bisect_left(ii, x)
            if k in gaps:
                gaps[k].append(x)
            else:
                gaps[k] = [x]
    for k, ia in gaps.items():
        pj = jj[k - 1] if k else -1
        ib = [y for y in range(pj + 1, jj[k]) if mb[y] < 0]
        match_gap(sa, sb, ia, ib, extra)
    queue = []
    for i, j in extra:
        if ma[i] < 0 and mb[j] < 0:
            ma[i] = j
            mb[j] = i
            add((i, j))
            if i in near:
                queue.append((i, j))
    _propagate(pa, pb, ma, mb, order, queue, near, ua, ub)


_FIRST = itemgetter(0)


def _same_key(pa: Parts, pb: Parts, ma: list[int]) -> Callable[[int, int], bool]:
    """key(a's row i) == key(b's row j), for the prefix and suffix scans. Rows that share their
    pieces (same_as) have the same signature and literals; their inputs then have the same
    signatures if each is matched with the other's (a matched pair has equal keys), else they
    are compared."""
    same_as = pb.same_as
    ins_a, ins_b = pa.ins, pb.ins
    sxa, sxb = pa.sigs + [None], pb.sigs + [None]  # an input that is no row: None, as in the key
    mget, sag, sbg = ma.__getitem__, sxa.__getitem__, sxb.__getitem__
    key_a, key_b = pa.key, pb.key

    def same(i: int, j: int) -> bool:
        if same_as is not None and same_as[j] == i:
            xs = ins_a[i]
            if not xs:
                return True
            ys = ins_b[j]
            return tuple(map(mget, xs)) == ys or tuple(map(sag, xs)) == tuple(map(sbg, ys))
        return key_a(i) == key_b(j)

    return same


def _increasing(xs: list[int]) -> bool:
    return all(map(int.__lt__, xs, xs[1:]))


def _users_of(p: Parts, rows: list[int]) -> dict[int, list[tuple[int, str]]]:
    """For each row, its users among `rows` as (user, where), in users() order."""
    us: dict[int, list[tuple[int, str]]] = {}
    wheres, ins = p.wheres, p.ins
    for u in rows:
        xs = ins[u]
        if xs:
            for where, x in zip(wheres[u], xs):
                if x in us:
                    us[x].append((u, where))
                else:
                    us[x] = [(u, where)]
    return us


def _propagate(
    pa: Parts,
    pb: Parts,
    ma: list[int],
    mb: list[int],
    order: list[tuple[int, int]],
    queue: list[tuple[int, int]],
    near: set[int],
    ua: dict[int, list[tuple[int, str]]],
    ub: dict[int, list[tuple[int, str]]],
) -> None:
    """Match along edges from each pair of `queue` in turn (pairs it matches are appended to
    `order` and followed in turn). Only rows that may still be unmatched can be matched: `ua`,
    `ub` are users() among them (_users_of), `near` the a rows next to one; a pair of another row
    matches nothing, and `queue` leaves it out."""
    sa, sb = pa.sigs, pb.sigs
    ins_a, ins_b = pa.ins, pb.ins
    wh_a, wh_b = pa.wheres, pb.wheres
    dup_a = pa.dup
    na, nb = len(pa.rows), len(pb.rows)
    mget = ma.__getitem__
    append = order.append
    for i, j in queue:  # pairs appended on the way are visited too
        # inputs at the same argument position
        xs = ins_a[i]
        if xs and min(map(mget, xs)) < 0:
            ys = ins_b[j]
            if ys:
                if wh_a[i] == wh_b[j] and i not in dup_a:
                    pairs: Iterable[tuple[Any, Any]] = zip(xs, ys)
                else:
                    rb = dict(zip(wh_b[j], ys))
                    pairs = [(x, rb.get(where, nb)) for where, x in zip(wh_a[i], xs)]
                for x, y in pairs:
                    if ma[x] < 0 and mb[y] < 0 and x != na and y != nb and sa[x] == sb[y]:
                        ma[x] = y
                        mb[y] = x
                        append((x, y))
                        if x in near:
                            queue.append((x, y))
        # users with the same signature at the same position
        us_a = ua.get(i)
        if us_a:
            us_b = ub.get(j)
            if not us_b:
                continue
            if len(us_a) == 1 and len(us_b) == 1:
                (u, w1), (v, w2) = us_a[0], us_b[0]
                if ma[u] < 0 and mb[v] < 0 and sa[u] == sb[v] and w1 == w2:
                    ma[u] = v
                    mb[v] = u
                    append((u, v))
                    if u in near:
                        queue.append((u, v))
                continue
            ga: dict[tuple, list[int]] = {}
            for u, where in us_a:
                if ma[u] < 0:
                    ga.setdefault((sa[u], where), []).append(u)
            if not ga:
                continue
            gb: dict[tuple, list[int]] = {}
            for u, where in us_b:
                if mb[u] < 0:
                    gb.setdefault((sb[u], where), []).append(u)
            for k, xs2 in ga.items():
                ys2 = gb.get(k)
                if ys2 and len(xs2) == len(ys2):
                    for x, y in zip(xs2, ys2):
                        if ma[x] < 0 and mb[y] < 0:
                            ma[x] = y
                            mb[y] = x
                            append((x, y))
                            if x in near:
                                queue.append((x, y))


def merge_order(na: int, nb: int, ma: dict[int, int]) -> list[tuple[int | None, int | None]]:
    """Both node lists merged in b's order: (i, j) matched, (i, None) only in a, (None, j) only in b.
    An a-only node follows the b position of the matched a node before it."""
    mal = [-1] * na
    mbl = [-1] * nb
    for i, j in ma.items():
        mal[i] = j
        mbl[j] = i
    return merge_order_lists(mal, mbl, na, nb)


def merge_order_lists(ma: list[int], mb: list[int], na: int, nb: int) -> list[tuple[int | None, int | None]]:
    """merge_order from match lists (-1: unmatched)."""
    after: dict[int, list[int]] = {}  # b index (or -1) -> a-only nodes to emit after it
    last_b = -1
    for i in range(na):
        j = ma[i]
        if j < 0:
            if last_b in after:
                after[last_b].append(i)
            else:
                after[last_b] = [i]
        else:
            last_b = j
    out: list[tuple[int | None, int | None]] = [(i, None) for i in after.get(-1, ())]
    if not after:
        out.extend([(i if i >= 0 else None, j) for j, i in enumerate(mb[:nb])])
        return out
    get = after.get
    for j in range(nb):
        i = mb[j]
        out.append((i if i >= 0 else None, j))
        xs = get(j)
        if xs:
            out.extend([(x, None) for x in xs])
    return out


def align_rows(
    a_rows: Sequence[NodeRow],
    b_rows: Sequence[NodeRow],
    leaf_norm_a: Callable[[Any, Any], Any] | None = None,
    leaf_norm_b: Callable[[Any, Any], Any] | None = None,
) -> list[tuple[int | None, int | None]]:
    """Both node lists merged in order: (i, j) matched, (i, None) only in a, (None, j) only in b."""
    pa, pb = Parts(a_rows, leaf_norm_a), Parts(b_rows, leaf_norm_b)
    return merge_order(len(a_rows), len(b_rows), align_parts(pa, pb))
