"""Structural node alignment of two graphs: which node of one is which node of the other.

Names are useless for this (passes shift name counters, ranks print different group names), so
nodes are compared by what they are:

* `shallow` signature: opcode, target, number of args, kwarg names (placeholders by position,
  get_attr targets without their numbering);
* `local` key: the shallow signature plus the node's normalized literals and the shallow
  signatures of its inputs.

Alignment: common prefix and suffix by local key, then patience anchors (local keys unique on
both sides, longest increasing run), then the gaps between anchors by a sequence match on shallow
signatures (difflib for small gaps, an in-order greedy pairing for huge ones). Every step is
linear or n log n except the gap matching, which only sees what changed.
"""

from __future__ import annotations

import bisect
import difflib
import re
from typing import Any, Callable, Sequence

from inspector.graphmodel import is_ref, row_leaves

_NUM_SUFFIX = re.compile(r"_?\d+$")
_DIFFLIB_LIMIT = 4_000_000  # gap size product above which greedy pairing replaces difflib


def shallow_sig(row: dict[str, Any]) -> tuple:
    op = row.get("op")
    if op == "placeholder":
        return ("placeholder",)
    if op == "output":
        return ("output",)
    target = str(row.get("target"))
    if op in ("get_attr", "call_module"):
        target = _NUM_SUFFIX.sub("", target)
    args = row.get("args") or []
    kwargs = row.get("kwargs") or {}
    return (op, target, len(args), tuple(sorted(kwargs)))


def freeze(v: Any) -> Any:
    """A hashable form of an encoded value."""
    if isinstance(v, list):
        return tuple(freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, freeze(x)) for k, x in v.items()))
    if isinstance(v, float) and v != v:
        return "nan"
    return v


def local_keys(rows: Sequence[dict[str, Any]], sigs: Sequence[tuple], leaf_norm: Callable[[Any, Any], Any] | None = None) -> list[tuple]:
    index = {row["name"]: i for i, row in enumerate(rows)}
    keys = []
    for row, sig in zip(rows, sigs):
        lits = []
        ins = []
        target = row.get("target")
        if row.get("op") == "placeholder":
            lits.append(("target", target))
        for where, leaf in row_leaves(row):
            if is_ref(leaf):
                j = index.get(leaf["n"])
                ins.append((where, sigs[j] if j is not None else None))
            else:
                lits.append((where, freeze(leaf_norm(target, leaf) if leaf_norm else leaf)))
        keys.append((sig, tuple(lits), tuple(ins)))
    return keys


def _lis(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Longest run of pairs increasing in both coordinates (pairs sorted by the first)."""
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


def _unique_pairs(a: Sequence, b: Sequence, lo_a: int, hi_a: int, lo_b: int, hi_b: int) -> list[tuple[int, int]]:
    count_a: dict[Any, int] = {}
    pos_a: dict[Any, int] = {}
    for i in range(lo_a, hi_a):
        k = a[i]
        count_a[k] = count_a.get(k, 0) + 1
        pos_a[k] = i
    count_b: dict[Any, int] = {}
    pos_b: dict[Any, int] = {}
    for j in range(lo_b, hi_b):
        k = b[j]
        count_b[k] = count_b.get(k, 0) + 1
        pos_b[k] = j
    pairs = [(pos_a[k], pos_b[k]) for k, c in count_a.items() if c == 1 and count_b.get(k) == 1]
    pairs.sort()
    return pairs


def _match_gap(sa: Sequence, sb: Sequence, lo_a: int, hi_a: int, lo_b: int, hi_b: int, out: list[tuple[int, int]]) -> None:
    na, nb = hi_a - lo_a, hi_b - lo_b
    if na == 0 or nb == 0:
        return
    if na * nb <= _DIFFLIB_LIMIT:
        sm = difflib.SequenceMatcher(None, list(sa[lo_a:hi_a]), list(sb[lo_b:hi_b]), autojunk=False)
        for blk in sm.get_matching_blocks():
            for k in range(blk.size):
                out.append((lo_a + blk.a + k, lo_b + blk.b + k))
        return
    # Huge gap: pair equal signatures in order, never crossing an earlier pair.
    queues: dict[Any, list[int]] = {}
    for j in range(hi_b - 1, lo_b - 1, -1):
        queues.setdefault(sb[j], []).append(j)
    last_j = lo_b - 1
    for i in range(lo_a, hi_a):
        q = queues.get(sa[i])
        while q and q[-1] <= last_j:
            q.pop()
        if q:
            j = q.pop()
            out.append((i, j))
            last_j = j


def align_sequences(ka: Sequence, kb: Sequence, sa: Sequence, sb: Sequence) -> list[tuple[int, int]]:
    """Matched index pairs (increasing in both) of two sequences: local keys ka/kb, shallow sa/sb."""
    na, nb = len(ka), len(kb)
    pre = 0
    while pre < na and pre < nb and ka[pre] == kb[pre]:
        pre += 1
    suf = 0
    while suf < na - pre and suf < nb - pre and ka[na - 1 - suf] == kb[nb - 1 - suf]:
        suf += 1
    pairs = [(i, i) for i in range(pre)]
    lo_a, hi_a, lo_b, hi_b = pre, na - suf, pre, nb - suf
    if lo_a < hi_a and lo_b < hi_b:
        anchors = _lis(_unique_pairs(ka, kb, lo_a, hi_a, lo_b, hi_b))
        # second level: anchors on shallow signatures unique within each gap
        refined: list[tuple[int, int]] = []
        pa, pb = lo_a, lo_b
        for ia, ib in anchors + [(hi_a, hi_b)]:
            if ia - pa > 0 and ib - pb > 0:
                sub = _lis(_unique_pairs(sa, sb, pa, ia, pb, ib))
                qa, qb = pa, pb
                for xa, xb in sub + [(ia, ib)]:
                    _match_gap(sa, sb, qa, xa, qb, xb, refined)
                    if (xa, xb) != (ia, ib):
                        refined.append((xa, xb))
                    qa, qb = xa + 1, xb + 1
            if (ia, ib) != (hi_a, hi_b):
                refined.append((ia, ib))
            pa, pb = ia + 1, ib + 1
        pairs.extend(refined)
    pairs.extend((na - suf + k, nb - suf + k) for k in range(suf))
    return pairs


def align_rows(
    a_rows: Sequence[dict[str, Any]],
    b_rows: Sequence[dict[str, Any]],
    leaf_norm_a: Callable[[Any, Any], Any] | None = None,
    leaf_norm_b: Callable[[Any, Any], Any] | None = None,
) -> list[tuple[int | None, int | None]]:
    """Both node lists merged in order: (i, j) matched, (i, None) only in a, (None, j) only in b."""
    sa = [shallow_sig(r) for r in a_rows]
    sb = [shallow_sig(r) for r in b_rows]
    ka = local_keys(a_rows, sa, leaf_norm_a)
    kb = local_keys(b_rows, sb, leaf_norm_b)
    pairs = align_sequences(ka, kb, sa, sb)
    out: list[tuple[int | None, int | None]] = []
    i = j = 0
    for pi, pj in pairs:
        while i < pi:
            out.append((i, None))
            i += 1
        while j < pj:
            out.append((None, j))
            j += 1
        out.append((pi, pj))
        i, j = pi + 1, pj + 1
    while i < len(a_rows):
        out.append((i, None))
        i += 1
    while j < len(b_rows):
        out.append((None, j))
        j += 1
    return out
