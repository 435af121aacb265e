"""The node-table diff as it was before it was made fast (inspector/align.py and inspector/diff.py at
aee9cda), verbatim: tests/test_diff_speed_equivalence.py holds the fast one to the same results.
Not used by the package."""

from __future__ import annotations

import bisect
import difflib
import re
from collections import deque
from typing import Any, Callable, Sequence

from inspector.diff import META_KEYS, GraphDiff, NodeDiff, SubgraphDiff
from inspector.graphmodel import GraphTables, SubGraph, row_leaves
from inspector.normalize import IDENTITY, GraphNormalizer


def reference_diff_tables(a: GraphTables, b: GraphTables, *, na: GraphNormalizer | None = None, nb: GraphNormalizer | None = None, meta: bool = True, stack: bool = False) -> GraphDiff:
    return _diff_tables(a, b, "a", "b", na or IDENTITY, nb or IDENTITY, meta, stack)


_NUM_SUFFIX = re.compile(r"_?\d+$")
_DIFFLIB_LIMIT = 250_000  # gap size product above which greedy pairing replaces difflib


def shallow_sig(row: dict[str, Any]) -> tuple:
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


class Parts:
    """Per-node pieces of one node list, computed once: signatures, refs, normalized literals."""

    __slots__ = ("rows", "sigs", "refs", "lits", "index", "keys", "_users")

    def __init__(self, rows: Sequence[dict[str, Any]], leaf_norm: Callable[[Any, Any], Any] | None = None):
        self.rows = rows
        self.sigs = [shallow_sig(r) for r in rows]
        self.index = {r["name"]: i for i, r in enumerate(rows)}
        refs: list[tuple] = []
        lits: list[tuple] = []
        for row in rows:
            rf: list = []
            lt: list = []
            target = row.get("target")
            if row.get("op") == "placeholder":
                lt.append(("target", target))
            _split(row.get("args") or (), "args", rf, lt, leaf_norm, target)
            kw = row.get("kwargs")
            if kw:
                for k, v in kw.items():
                    _split(v, "kwargs." + k, rf, lt, leaf_norm, target)
            refs.append(tuple(rf))
            lits.append(tuple(lt))
        self.refs = refs
        self.lits = lits
        idx = self.index
        sigs = self.sigs
        get = idx.get
        self.keys = [(s, l, tuple([sigs[j] if j is not None else None for j in [get(n) for _, n in rf]]) if rf else ()) for s, l, rf in zip(sigs, lits, refs)]
        self._users: list[list[tuple[int, str]]] | None = None

    def users(self) -> list[list[tuple[int, str]]]:
        if self._users is None:
            us: list[list[tuple[int, str]]] = [[] for _ in self.rows]
            idx = self.index
            for i, rf in enumerate(self.refs):
                for where, n in rf:
                    j = idx.get(n)
                    if j is not None:
                        us[j].append((i, where))
            self._users = us
        return self._users


def _split(value: Any, path: str, rf: list, lt: list, leaf_norm: Callable[[Any, Any], Any] | None, target: Any) -> None:
    """Leaves of an encoded arg into node refs (rf) and normalized literals (lt), like row_leaves."""
    t = type(value)
    if t is list:
        for i, v in enumerate(value):
            tv = type(v)
            if tv is int or tv is bool or v is None:
                lt.append((f"{path}[{i}]", v))
            else:
                _split(v, f"{path}[{i}]", rf, lt, leaf_norm, target)
        return
    if t is dict:
        if len(value) == 1:
            if "n" in value:
                rf.append((path, value["n"]))
                return
            if "dict" in value and type(value["dict"]) is list:
                for kv in value["dict"]:
                    if type(kv) is list and len(kv) == 2:
                        k = kv[0] if type(kv[0]) is str else repr(kv[0])
                        _split(kv[1], f"{path}{{{k}}}", rf, lt, leaf_norm, target)
                return
        if leaf_norm is not None:
            value = leaf_norm(target, value)
        lt.append((path, freeze(value)))
        return
    if t is str and leaf_norm is not None:
        value = leaf_norm(target, value)
    elif t is float and value != value:
        value = "nan"
    lt.append((path, value))


def _unique_pairs(a: Sequence, b: Sequence, ia: Sequence[int], ib: Sequence[int]) -> list[tuple[int, int]]:
    count_a: dict[Any, int] = {}
    pos_a: dict[Any, int] = {}
    for i in ia:
        k = a[i]
        count_a[k] = count_a.get(k, 0) + 1
        pos_a[k] = i
    count_b: dict[Any, int] = {}
    pos_b: dict[Any, int] = {}
    for j in ib:
        k = b[j]
        count_b[k] = count_b.get(k, 0) + 1
        pos_b[k] = j
    return sorted((pos_a[k], pos_b[k]) for k, c in count_a.items() if c == 1 and count_b.get(k) == 1)


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


def _match_gap(sa: Sequence, sb: Sequence, ia: list[int], ib: list[int], out: list[tuple[int, int]]) -> None:
    if not ia or not ib:
        return
    if len(ia) * len(ib) <= _DIFFLIB_LIMIT:
        sm = difflib.SequenceMatcher(None, [sa[i] for i in ia], [sb[j] for j in ib], autojunk=False)
        for blk in sm.get_matching_blocks():
            for k in range(blk.size):
                out.append((ia[blk.a + k], ib[blk.b + k]))
        return
    queues: dict[Any, deque[int]] = {}
    for j in ib:
        queues.setdefault(sb[j], deque()).append(j)
    last = -1
    for i in ia:
        q = queues.get(sa[i])
        while q and q[0] <= last:
            q.popleft()
        if q:
            j = q.popleft()
            out.append((i, j))
            last = j


def align_parts(pa: Parts, pb: Parts) -> dict[int, int]:
    """Matched node indices a -> b."""
    na, nb = len(pa.rows), len(pb.rows)
    ka, kb, sa, sb = pa.keys, pb.keys, pa.sigs, pb.sigs
    ma: dict[int, int] = {}
    mb: dict[int, int] = {}
    queue: deque[tuple[int, int]] = deque()

    def match(i: int, j: int) -> None:
        ma[i] = j
        mb[j] = i
        queue.append((i, j))

    pre = 0
    while pre < na and pre < nb and ka[pre] == kb[pre]:
        match(pre, pre)
        pre += 1
    suf = 0
    while suf < na - pre and suf < nb - pre and ka[na - 1 - suf] == kb[nb - 1 - suf]:
        match(na - 1 - suf, nb - 1 - suf)
        suf += 1
    mid_a = range(pre, na - suf)
    mid_b = range(pre, nb - suf)
    if len(mid_a) and len(mid_b):
        for i, j in _lis(_unique_pairs(ka, kb, mid_a, mid_b)):
            match(i, j)
        _propagate(pa, pb, ma, mb, queue, match)
        # gaps between matched nodes, in order on both sides
        anchors = sorted((i, j) for i, j in ma.items())
        mono = _lis(anchors)
        extra: list[tuple[int, int]] = []
        pi, pj = -1, -1
        for i, j in mono + [(na, nb)]:
            ia = [x for x in range(pi + 1, i) if x not in ma]
            ib = [y for y in range(pj + 1, j) if y not in mb]
            _match_gap(sa, sb, ia, ib, extra)
            pi, pj = i, j
        for i, j in extra:
            if i not in ma and j not in mb:
                match(i, j)
        _propagate(pa, pb, ma, mb, queue, match)
    return ma


def _propagate(pa: Parts, pb: Parts, ma: dict[int, int], mb: dict[int, int], queue: deque, match: Callable[[int, int], None]) -> None:
    sa, sb = pa.sigs, pb.sigs
    ia_, ib_ = pa.index, pb.index
    ua, ub = pa.users(), pb.users()
    while queue:
        i, j = queue.popleft()
        # inputs at the same argument position
        rb = dict(pb.refs[j])
        for where, name in pa.refs[i]:
            nb_ = rb.get(where)
            if nb_ is None:
                continue
            x, y = ia_.get(name), ib_.get(nb_)
            if x is not None and y is not None and x not in ma and y not in mb and sa[x] == sb[y]:
                match(x, y)
        # users with the same signature at the same position
        if ua[i] and ub[j]:
            ga: dict[tuple, list[int]] = {}
            for u, where in ua[i]:
                if u not in ma:
                    ga.setdefault((sa[u], where), []).append(u)
            if not ga:
                continue
            gb: dict[tuple, list[int]] = {}
            for u, where in ub[j]:
                if u not in mb:
                    gb.setdefault((sb[u], where), []).append(u)
            for k, xs in ga.items():
                ys = gb.get(k)
                if ys and len(xs) == len(ys):
                    for x, y in zip(xs, ys):
                        if x not in ma and y not in mb:
                            match(x, y)


def merge_order(na: int, nb: int, ma: dict[int, int]) -> list[tuple[int | None, int | None]]:
    """Both node lists merged in b's order: (i, j) matched, (i, None) only in a, (None, j) only in b.
    An a-only node follows the b position of the matched a node before it."""
    mb = {j: i for i, j in ma.items()}
    after: dict[int, list[int]] = {}  # b index (or -1) -> a-only nodes to emit after it
    last_b = -1
    for i in range(na):
        j = ma.get(i)
        if j is None:
            after.setdefault(last_b, []).append(i)
        else:
            last_b = j
    out: list[tuple[int | None, int | None]] = [(i, None) for i in after.get(-1, [])]
    for j in range(nb):
        i = mb.get(j)
        out.append((i, j))
        for x in after.get(j, ()):
            out.append((x, None))
    return out


def _leaf_map(row: dict[str, Any]) -> dict[str, Any]:
    return dict(row_leaves(row))


_MISSING = object()


def compare_rows(
    a: dict[str, Any],
    b: dict[str, Any],
    name_map: dict[str, str],
    na: GraphNormalizer = IDENTITY,
    nb: GraphNormalizer = IDENTITY,
    *,
    meta: bool = True,
    stack: bool = False,
) -> tuple[list[tuple[str, Any, Any]], list[tuple[str, Any, Any]], bool]:
    """Differences of two aligned nodes: (arg changes, meta changes, structural?)."""
    pa, pb = Parts([a], na.leaf), Parts([b], nb.leaf)
    return _compare(0, 0, pa, pb, name_map, na, nb, meta=meta, stack=stack)


def _compare(i: int, j: int, pa: Parts, pb: Parts, name_map: dict[str, str], na: GraphNormalizer, nb: GraphNormalizer, *, meta: bool, stack: bool) -> tuple[list, list, bool]:
    a, b = pa.rows[i], pb.rows[j]
    ra, rb = pa.refs[i], pb.refs[j]
    same_refs = len(ra) == len(rb)
    if same_refs:
        for (w1, n1), (w2, n2) in zip(ra, rb):
            if w1 != w2 or name_map.get(n1) != n2:
                same_refs = False
                break
    if same_refs and pa.lits[i] == pb.lits[j] and (a == b or _same_meta(a, b, stack)):
        return _NONE, _NONE, False
    args: list[tuple[str, Any, Any]] = []
    structural = False
    if a.get("op") != b.get("op"):
        structural = True
        args.append(("op", a.get("op"), b.get("op")))
    if a.get("target") != b.get("target"):
        structural = True
        args.append(("target", a.get("target"), b.get("target")))
    if not same_refs:
        da, db = dict(ra), dict(rb)
        for where in list(da) + [w for w in db if w not in da]:
            x, y = da.get(where), db.get(where)
            if x is None or y is None or name_map.get(x) != y:
                structural = True
                args.append((where, {"n": x} if x is not None else _leaf_or_none(a, where), {"n": y} if y is not None else _leaf_or_none(b, where)))
    la, lb = pa.lits[i], pb.lits[j]
    if la != lb:
        da, db = dict(la), dict(lb)
        da.pop("target", None)
        db.pop("target", None)
        if da != db:
            raw_a, raw_b = _leaf_map(a), _leaf_map(b)
            for where in list(da) + [w for w in db if w not in da]:
                x, y = da.get(where, _MISSING), db.get(where, _MISSING)
                if x == y:
                    continue
                if x is _MISSING or y is _MISSING:
                    if where in dict(ra) or where in dict(rb):
                        continue  # a literal replaced by a node (or back): listed with the refs
                    structural = True
                args.append((where, raw_a.get(where), raw_b.get(where)))
    metas: list[tuple[str, Any, Any]] = []
    if meta:
        for k in META_KEYS:
            va, vb = a.get(k), b.get(k)
            if va == vb:
                continue
            if k in ("val", "attr") and va is not None and vb is not None:
                if freeze(na.val(va)) == freeze(nb.val(vb)):
                    continue
            metas.append((k, va, vb))
        if stack and a.get("stack") != b.get("stack"):
            metas.append(("stack", a.get("stack"), b.get("stack")))
    return args, metas, structural


_NONE: list = []


def _same_meta(a: dict[str, Any], b: dict[str, Any], stack: bool) -> bool:
    for k in META_KEYS:
        if a.get(k) != b.get(k):
            return False
    return not stack or a.get("stack") == b.get("stack")


def _leaf_or_none(row: dict[str, Any], where: str) -> Any:
    return _leaf_map(row).get(where)


def diff_subgraph(
    a: SubGraph | None,
    b: SubGraph | None,
    na: GraphNormalizer = IDENTITY,
    nb: GraphNormalizer = IDENTITY,
    *,
    meta: bool = True,
    stack: bool = False,
) -> SubgraphDiff:
    path = (b or a).path  # type: ignore[union-attr]
    if a is None:
        return SubgraphDiff(path, "added", [NodeDiff("added", path, None, r) for r in b.nodes])  # type: ignore[union-attr]
    if b is None:
        return SubgraphDiff(path, "removed", [NodeDiff("removed", path, r, None) for r in a.nodes])
    pa, pb = Parts(a.nodes, na.leaf if na is not IDENTITY else None), Parts(b.nodes, nb.leaf if nb is not IDENTITY else None)
    ma = align_parts(pa, pb)
    name_map = {a.nodes[i]["name"]: b.nodes[j]["name"] for i, j in ma.items()}
    nodes: list[NodeDiff] = []
    changed = False
    for i, j in merge_order(len(a.nodes), len(b.nodes), ma):
        if j is None:
            nodes.append(NodeDiff("removed", path, a.nodes[i], None))  # type: ignore[index]
            changed = True
        elif i is None:
            nodes.append(NodeDiff("added", path, None, b.nodes[j]))
            changed = True
        else:
            args, metas, structural = _compare(i, j, pa, pb, name_map, na, nb, meta=meta, stack=stack)
            if args or metas or structural:
                changed = True
                nodes.append(NodeDiff("changed", path, a.nodes[i], b.nodes[j], args, metas, structural))
            else:
                nodes.append(NodeDiff("same", path, a.nodes[i], b.nodes[j], _NONE, _NONE, False))
    return SubgraphDiff(path, "changed" if changed else "same", nodes)


def _diff_tables(a: GraphTables, b: GraphTables, a_label: str, b_label: str, na: GraphNormalizer, nb: GraphNormalizer, meta: bool, stack: bool) -> GraphDiff:
    subs: list[SubgraphDiff] = []
    b_paths = {g.path: g for g in b.graphs}
    a_paths = {g.path: g for g in a.graphs}
    a_only = [g for g in a.graphs if g.path not in b_paths]
    b_only = [g for g in b.graphs if g.path not in a_paths]
    renamed: dict[str, SubGraph] = {}
    # subgraphs renamed by a pass (true_graph_0 -> true_graph_1): pair leftovers in order
    for ga, gb in zip(a_only, b_only):
        renamed[ga.path] = gb
    for g in a.graphs:
        other = b_paths.get(g.path) or renamed.get(g.path)
        subs.append(diff_subgraph(g, other, na, nb, meta=meta, stack=stack))
    used = {s.path for s in subs}
    for g in b.graphs:
        if g.path not in used and g not in renamed.values():
            subs.append(diff_subgraph(None, g, na, nb, meta=meta, stack=stack))
    return GraphDiff(a_label, b_label, a.gid, b.gid, subs)
