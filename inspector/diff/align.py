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
import difflib
import itertools
import re
from dataclasses import dataclass
from itertools import compress, repeat
from operator import add, and_, contains, eq, itemgetter, mul, not_, sub
from typing import Any, Callable, Iterable, Sequence

from rapidfuzz.distance import LCSseq

from graphtrain_inspect.capture.shared.logformat import NodeRow

_NUM_SUFFIX = re.compile(r"_?\d+$")
_DIFFLIB_LIMIT = 250_000  # gap size product above which a compiled LCS replaces difflib


def shallow_sig(row: NodeRow) -> tuple:
    op = row.get("op")
    if op == "placeholder":
        return ("placeholder",)
    if op == "output":
        return ("output",)
    target = str(row.get("target"))
    if op in ("get_attr", "call_module"):
        target = _NUM_SUFFIX.sub("", target)
    args = row.get("args") or ()
    kwargs = row.get("kwargs") or ()
    return (op, target, len(args), tuple(sorted(kwargs)) if kwargs else ())


def freeze(v: Any) -> Any:
    """A hashable form of an encoded value."""
    if isinstance(v, list):
        return tuple(freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, freeze(x)) for k, x in v.items()))
    if isinstance(v, float) and v != v:
        return "nan"
    return v


def same_frozen(x: Any, y: Any) -> bool:
    """`freeze(x) == freeze(y)`, without building either where the two are of one JSON type:
    values that differ (a pass that concretizes shapes changes thousands) are told apart at the
    first part that differs."""
    if x == y:
        return True
    tx = type(x)
    if tx is not type(y):
        return freeze(x) == freeze(y)
    if tx is list:
        return len(x) == len(y) and all(map(same_frozen, x, y))
    if tx is dict:
        return x.keys() == y.keys() and all([same_frozen(v, y[k]) for k, v in x.items()])
    if tx is float:
        return x != x and y != y  # both NaN (freeze: "nan")
    return False


_SIG_IDS: dict[tuple, int] = {}  # shallow signature -> a small int, shared by every Parts
_SIG_COUNTER = itertools.count()
_ARG_PATHS = tuple(f"args[{i}]" for i in range(64))


def sig_id(sig: tuple) -> int:
    sid = _SIG_IDS.get(sig)
    if sid is None:
        sid = _SIG_IDS.setdefault(sig, next(_SIG_COUNTER))
    return sid


# Each row's pieces (see Parts) by the row object's id, with the row itself (so an id is never
# taken for a later object's): rows without a normalized leaf only, whose pieces depend on the row
# alone. Emptied when it holds _ROW_INFO_ROWS rows: bounded whatever the graphs.
_ROW_INFO: dict[int, tuple] = {}
_ROW_INFO_ROWS = 300_000

_NAME = itemgetter("name")
_NO_ROW: dict = {}  # equal to no row (every row has a name)


@dataclass
class _Shared:
    """What one side of a diff takes from the other's Parts before walking its own rows."""

    info: list[Any]  # per row: (sig id, wheres, names, lits, flags), None where still to walk
    ins: list[Any]  # per row: its inputs' row indices (shared rows only)
    dup: set[int]  # rows where two refs share a path
    todo: Iterable[int]  # the rows to walk
    same_as: list[int] | None  # per row: like's row it shares, or -1


class Parts:
    """Per-node pieces of one node list, computed once: signatures, refs, normalized literals.

    `sigs[i]` is the id of row i's shallow signature (equal ids, equal signatures); `wheres[i]`
    and `names[i]` the paths and names of its node references (`refs[i]`: (where, name) pairs),
    `ins[i]` their row indices (`len(rows)` for a name that is no row of this list); `dup` the
    rows where two refs share a path; `lits[i]` its normalized literals.

    With `like` (the Parts of the other side of a diff), a row equal to `like`'s row of the same
    name takes that row's pieces instead of its own walk, where they cannot differ (no dict
    literal, whose keys are rendered by type, and no leaf that either side normalizes);
    `same_as[i]` is then that row's index in `like`, else -1."""

    __slots__ = (
        "rows",
        "sigs",
        "wheres",
        "names",
        "ins",
        "dup",
        "lits",
        "index",
        "names_unique",
        "same_as",
        "_row_names",
        "_info",
        "_flags",
        "_normalized",
        "_calls",
        "_spans",
        "_users",
        "_refs",
    )
    # declared for the type checker, which reads `like`'s before this instance's are made
    _info: list[Any]
    ins: list[Any]
    dup: set[int]

    def __init__(
        self,
        rows: Sequence[NodeRow],
        leaf_norm: Callable[[Any, Any], Any] | None = None,
        like: "Parts | None" = None,
    ):
        self.rows = rows
        n = len(rows)
        self._row_names = row_names = list(map(_NAME, rows))
        self._normalized = leaf_norm is not None
        # every leaf_norm call, (target, leaf, result), and the span of them of each row that has
        # a normalizable leaf (flag 2): what the other side checks before it shares such a row
        self._calls: list[tuple[Any, Any, Any]] = []
        self._spans: dict[int, tuple[int, int]] = {}
        if leaf_norm is not None:
            leaf_norm = _memo_leaf(leaf_norm, self._calls)
        if like is None:
            self.index = index = dict(
                zip(row_names, range(n))
            )  # a name twice: its last row, as the index always had it
            self.names_unique = len(index) == n
            shared = _Shared([None] * n, [], set(), range(n), None)
        else:
            shared = self._share(like, leaf_norm)
            index = self.index
        # per row: (sig id, wheres, names, lits, flags); ins apart (they depend on the side)
        info, ins, todo = shared.info, shared.ins, shared.todo
        self._walk_rows(todo, info, shared.dup, leaf_norm)
        self._info = info
        if info:
            sigs, wheres, names, lits, flags = zip(*info)
        else:
            sigs = wheres = names = lits = flags = ()
        # the walked rows' inputs, by name
        get = index.get
        rep_n = repeat(n)
        if like is None:
            ins = list(map(tuple, map(map, repeat(get), names, repeat(rep_n))))
        else:
            for j in todo:
                ins[j] = tuple(map(get, names[j], rep_n))
        self.sigs: list[int] = list(sigs)
        self.wheres: Sequence[tuple] = wheres
        self.names: Sequence[tuple] = names
        self.lits: Sequence[tuple] = lits
        self._flags: Sequence[int] = flags
        self.ins = ins
        self.dup = shared.dup
        self.same_as = shared.same_as
        self._users: list[list[tuple[int, str]]] | None = None
        self._refs: list[tuple] | None = None

    def _share(self, like: "Parts", leaf_norm: Callable[[Any, Any], Any] | None) -> "_Shared":
        """The pieces this side takes from `like`'s rows (sets index and names_unique): a row
        equal to like's row of the same name shares its pieces unless something forbids it: a
        dict literal always; a normalizable leaf if a side normalizes, unless both do and
        normalize each of its leaves alike. Row by row in C (map)."""
        rows, row_names = self.rows, self._row_names
        n = len(rows)
        xs: Sequence[int]
        block = 1 | 2 if (leaf_norm is not None or like._normalized) else 1
        positional = like._row_names == row_names
        if positional:
            # the same names in the same order (a rank diff): the same index, inputs too
            self.index = index = like.index
            self.names_unique = like.names_unique
            xs = range(n)
            eqs = list(map(eq, like.rows, rows))
            flags_x = like._flags
        else:
            self.index = index = dict(zip(row_names, range(n)))
            self.names_unique = len(index) == n
            ln = len(like.rows)
            xs = list(map(like.index.get, row_names, repeat(ln)))  # ln: no such row
            eqs = list(map(eq, map([*like.rows, _NO_ROW].__getitem__, xs), rows))
            flags_x = list(map([*like._flags, block].__getitem__, xs))
        ok = list(map(and_, eqs, map(not_, map(and_, flags_x, repeat(block)))))
        if leaf_norm is not None and like._normalized:
            l_calls, l_spans = like._calls, like._spans
            for j in compress(range(n), map(and_, eqs, map(eq, flags_x, repeat(2)))):
                span = l_spans.get(xs[j])
                if span is not None and all([leaf_norm(t, v) == r for t, v, r in l_calls[span[0] : span[1]]]):
                    ok[j] = True
        if positional:
            same_as = list(map(sub, map(mul, range(1, n + 1), ok), repeat(1)))  # j, or -1
            info = list(like._info)
            ins = list(like.ins)
        else:
            same_as = list(map(sub, map(mul, map(add, xs, repeat(1)), ok), repeat(1)))  # x, or -1
            info = list(map([*like._info, None].__getitem__, same_as))  # -1: None
            # a shared row's inputs: its inputs in like, each taken to the row of its name here
            # (a2b); a name that is no row of like (ln), looked up here
            a2b = [n] * (ln + 1)
            for j, x in enumerate(xs):  # the last b row of each name, as index has it
                a2b[x] = j
            a2b[ln] = n
            l_ins = [*like.ins, ()]
            ins = list(map(tuple, map(map, repeat(a2b.__getitem__), map(l_ins.__getitem__, same_as))))
            for j in compress(range(n), map(contains, map(l_ins.__getitem__, same_as), repeat(ln))):
                ins[j] = tuple(map(index.get, info[j][2], repeat(n)))
        dup: set[int] = set()
        if like.dup:
            dup.update(j for j, x in enumerate(same_as) if x in like.dup)
        return _Shared(info, ins, dup, list(compress(range(n), map(not_, ok))), same_as)

    def _walk_rows(
        self, todo: Iterable[int], info: list[Any], dup: set[int], leaf_norm: Callable[[Any, Any], Any] | None
    ) -> None:
        """Each row of `todo`'s pieces into `info` (its index in `dup` where two refs share a path):
        from the row pool where the row object was seen before, else walked."""
        rows, calls, spans = self.rows, self._calls, self._spans
        sig_ids = _SIG_IDS
        arg_paths = _ARG_PATHS
        no: tuple = ()
        ph: tuple = ("placeholder",)
        out: tuple = ("output",)
        pool = _ROW_INFO
        if len(pool) > _ROW_INFO_ROWS:
            pool.clear()
        pool_get = pool.get
        for j in todo:
            row = rows[j]
            # a row object seen before (rows are shared between tables by the reader's row pool):
            # its pieces, when no leaf of it is normalized (they then depend on the row alone)
            known = pool_get(id(row))
            if known is not None and known[0] is row:
                info[j] = known[1]
                if known[2]:
                    dup.add(j)
                continue
            c0 = len(calls)
            op = row.get("op")
            target = row.get("target")
            args = row.get("args") or ()
            kw = row.get("kwargs")
            # shallow_sig, inline
            if op == "call_function" and type(target) is str:
                sig: tuple = (op, target, len(args), tuple(sorted(kw)) if kw else ())
            elif op == "placeholder":
                sig = ph
            elif op == "output":
                sig = out
            else:
                tg = target if type(target) is str else str(target)
                if op in ("get_attr", "call_module"):
                    tg = _NUM_SUFFIX.sub("", tg)
                sig = (op, tg, len(args), tuple(sorted(kw)) if kw else ())
            sid = sig_ids.get(sig)
            if sid is None:
                sid = sig_id(sig)
            # refs and literals (_walk, inline for the top-level arguments)
            rf: list = []
            lt: list = []
            fl = 0
            if op == "placeholder":
                lt.append(("target", target))
            simple = True  # every ref is a top-level arg: their paths differ
            if type(args) is list and len(args) <= 64:
                i = -1
                for v in args:
                    i += 1
                    tv = type(v)
                    if tv is dict:
                        if len(v) == 1 and type(v.get("n")) is str:  # a ref (graphmodel.is_ref)
                            rf.append((arg_paths[i], v["n"]))
                            continue
                    elif tv is int or tv is bool or v is None:
                        lt.append((arg_paths[i], v))
                        continue
                    simple = False
                    fl |= _walk(v, arg_paths[i], rf, lt, leaf_norm, target)
            else:
                simple = False
                fl |= _walk(args, "args", rf, lt, leaf_norm, target)
            if kw:
                simple = False
                for k, v in kw.items():
                    fl |= _walk(v, "kwargs." + k, rf, lt, leaf_norm, target)
            if fl & 2:
                spans[j] = (c0, len(calls))
            is_dup = False
            if rf:
                w, nm = zip(*rf)
                info[j] = (sid, w, nm, tuple(lt) if lt else no, fl)
                if not simple and len(w) > 1 and len(set(w)) < len(w):
                    dup.add(j)
                    is_dup = True
            else:
                info[j] = (sid, no, no, tuple(lt) if lt else no, fl)
            if not fl & 2:
                pool[id(row)] = (row, info[j], is_dup)

    @property
    def refs(self) -> list[tuple]:
        """(where, name) of each row's node references."""
        if self._refs is None:
            self._refs = [tuple(zip(w, nm)) for w, nm in zip(self.wheres, self.names)]
        return self._refs

    def key(self, i: int) -> tuple:
        """Row i's local key: signature, literals, input signatures (None: no row)."""
        xs = self.ins[i]
        if not xs:
            return (self.sigs[i], self.lits[i], ())
        sigs = self.sigs
        n = len(sigs)
        return (sigs[i], self.lits[i], tuple([sigs[x] if x != n else None for x in xs]))

    def keys(self, ids: dict[tuple, int], rows: Sequence[int] | None = None) -> list[int]:
        """The local keys of `rows` (default all) as ids from `ids`, which the other side of an
        alignment shares: equal ids, equal keys."""
        sigs = self.sigs
        sx = sigs + [None]  # an input that is not a row: None, as in the key
        sget = sx.__getitem__
        out: list[int] = []
        add = out.append
        get = ids.get
        lits, ins = self.lits, self.ins
        for i in range(len(sigs)) if rows is None else rows:
            xs = ins[i]
            k = (sigs[i], lits[i], tuple(map(sget, xs)) if xs else ())
            kid = get(k)
            if kid is None:
                kid = ids[k] = len(ids)
            add(kid)
        return out

    def users(self) -> list[list[tuple[int, str]]]:
        if self._users is None:
            n = len(self.rows)
            us: list[list[tuple[int, str]]] = [[] for _ in range(n + 1)]
            for i, (wh, xs) in enumerate(zip(self.wheres, self.ins)):
                if xs:
                    for where, j in zip(wh, xs):
                        us[j].append((i, where))
            us.pop()  # refs to names that are not rows
            self._users = us
        return self._users


def _walk(value: Any, path: str, rf: list, lt: list, leaf_norm: Callable[[Any, Any], Any] | None, target: Any) -> int:
    """Leaves of an encoded arg into node refs (rf) and normalized literals (lt), like row_leaves;
    returns what it met: 1 a dict literal, 2 a leaf that a leaf_norm is given (a string or an
    object other than a ref)."""
    t = type(value)
    if t is list:
        fl = 0
        for i, v in enumerate(value):
            tv = type(v)
            if tv is int or tv is bool or v is None:
                lt.append((f"{path}[{i}]", v))
            else:
                fl |= _walk(v, f"{path}[{i}]", rf, lt, leaf_norm, target)
        return fl
    if t is dict:
        if len(value) == 1:
            if type(value.get("n")) is str:  # a ref (graphmodel.is_ref)
                rf.append((path, value["n"]))
                return 0
            if "dict" in value and type(value["dict"]) is list:
                fl = 1
                for kv in value["dict"]:
                    if type(kv) is list and len(kv) == 2:
                        k = kv[0] if type(kv[0]) is str else repr(kv[0])
                        fl |= _walk(kv[1], f"{path}{{{k}}}", rf, lt, leaf_norm, target)
                return fl
        if leaf_norm is not None:
            value = leaf_norm(target, value)
        lt.append((path, freeze(value)))
        return 2
    if t is str:
        if leaf_norm is not None:
            value = leaf_norm(target, value)
        lt.append((path, value))
        return 2
    if t is float and value != value:
        value = "nan"
    lt.append((path, value))
    return 0


def _memo_leaf(leaf_norm: Callable[[Any, Any], Any], calls: list | None = None) -> Callable[[Any, Any], Any]:
    """`leaf_norm` (a pure function of target and leaf) remembered for string leaves; each call
    (target, leaf, result) appended to `calls`."""
    memo: dict[tuple, Any] = {}
    log = calls.append if calls is not None else None

    def leaf(target: Any, value: Any) -> Any:
        if type(value) is str and type(target) is str:
            k = (target, value)
            r = memo.get(k, memo)
            if r is memo:
                r = memo[k] = leaf_norm(target, value)
        else:
            r = leaf_norm(target, value)
        if log is not None:
            log((target, value, r))
        return r

    return leaf


def _unique_pairs(
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


def _lis(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Longest run of pairs increasing in both coordinates (pairs sorted by the first): the run
    patience sorting finds over them all (`_lis_of`), searched only where it must be. Where every
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
        return _lis_of(pairs)  # out of order throughout: cuts are few
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
            out.extend(_lis_of(pairs[last_cut + 1 : first + 1]))
            done = first + 1
        last_cut = last
    if n - 1 - last_cut >= 2:
        out.extend(pairs[done : last_cut + 1])
        out.extend(_lis_of(pairs[last_cut + 1 :]))
        done = n
    out.extend(pairs[done:])
    return out


def _lis_of(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
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


def _match_gap(sa: Sequence, sb: Sequence, ia: list[int], ib: list[int], out: list[tuple[int, int]]) -> None:
    if not ia or not ib:
        return
    if len(ia) * len(ib) <= _DIFFLIB_LIMIT:
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


def align_parts(pa: Parts, pb: Parts) -> dict[int, int]:
    """Matched node indices a -> b (in the order they were matched)."""
    return dict(_align(pa, pb)[2])


def _align(pa: Parts, pb: Parts) -> tuple[list[int], list[int], list[tuple[int, int]]]:
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
    """_align's result where `seeds` are matched beforehand (pairs known by other means: rows
    that are the same bytes on both sides) and every other row is matched as _align matches the
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
    for i, j in _lis(_unique_pairs(ka, kb, mid_a, mid_b, len(ids))):
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
        mono = _lis(list(zip(ii, jj)))
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
        _match_gap(sa, sb, ia, ib, extra)
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
    return _merge_order(mal, mbl, na, nb)


def _merge_order(ma: list[int], mb: list[int], na: int, nb: int) -> list[tuple[int | None, int | None]]:
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
