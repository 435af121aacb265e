"""The pieces of each node row that alignment and node comparison read (`Parts`): its shallow
signature (opcode, target, number of args, kwarg names; placeholders by position, get_attr targets
without their numbering), its normalized literals, its inputs as row indices and where in its args
each sits; and the local key built from them (the shallow signature, the literals and the inputs'
signatures). Rows equal to the other side's row of the same name share their pieces
(`Parts(like=)`): the work is per row and in Python, so what does not change the result is skipped.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from itertools import compress, repeat
from operator import add, and_, contains, eq, itemgetter, mul, not_, sub
from typing import Any, Callable, Iterable, Sequence

from graphtrain_inspect.capture.shared.logformat import NodeRow

_NUM_SUFFIX = re.compile(r"_?\d+$")


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
            rf, lt, fl, simple = _refs_and_literals(op, target, args, kw, leaf_norm)
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


def _refs_and_literals(
    op: Any, target: Any, args: Any, kw: Any, leaf_norm: Callable[[Any, Any], Any] | None
) -> tuple[list, list, int, bool]:
    """A row's refs (path, name) and literals (path, value), its flags (`_walk`'s), and whether
    every ref is a top-level arg (their paths then differ): `_walk`, inline for the top-level
    arguments, which are mostly refs and small ints."""
    rf: list = []
    lt: list = []
    fl = 0
    if op == "placeholder":
        lt.append(("target", target))
    simple = True
    if type(args) is list and len(args) <= 64:
        arg_paths = _ARG_PATHS
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
    return rf, lt, fl, simple


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
