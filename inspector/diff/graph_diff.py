"""Graph diffs: a pass's before and after graph, or the same graph across ranks.

    d = diff_tables(before_tables, after_tables)        # GraphDiff, nodes aligned structurally
    d.counts                                            # {"added": 2, "removed": 1, "changed": 3}
    for sub in d.subgraphs: for n in sub.nodes: n.status, n.name, n.args, n.meta

    pass_diffs(cap, rank, pass_rec)                     # one GraphDiff per output role
    text_diff(code_a, code_b)                           # unified diff lines of normalized code

Node diffs compare args and kwargs leaf by leaf (node references through the alignment, literals
after rank normalization) and metadata (value: dtype, shape, stride, device; unbacked bindings;
backward flag; recompute tag; constant descriptions). Stack traces are ignored unless asked. What a
diff is made of and the node comparison are in node_diff.py; diffs of tables with row digests and
refs are made by anchored.py, which pass_diffs tries first. Which way two ranks' graphs are
diffed is chosen in rank_diffs.py.
"""

from __future__ import annotations

import re
from itertools import compress, repeat
from operator import and_, eq, not_
from typing import TYPE_CHECKING, Iterator

from graphtrain_inspect.capture.shared.logformat import NodeRow
from graphtrain_inspect.inspector.diff.align import align_indices, merge_order_lists
from graphtrain_inspect.inspector.diff.anchored import anchored_pass_diff
from graphtrain_inspect.inspector.diff.line_match import line_matcher, unified_diff
from graphtrain_inspect.inspector.diff.node_diff import (
    NO_CHANGES,
    GraphDiff,
    NodeDiff,
    SubgraphDiff,
    compare_parts,
    same_meta,
)
from graphtrain_inspect.inspector.diff.normalize import IDENTITY, GraphNormalizer, RankContext, is_collective_target
from graphtrain_inspect.inspector.diff.row_parts import Parts
from graphtrain_inspect.inspector.read.collector import no_gc
from graphtrain_inspect.inspector.read.graphmodel import GraphTables, SubGraph

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.read.capture_reader import Capture
    from graphtrain_inspect.inspector.read.capture_records import PassRecord


def diff_subgraph(
    a: SubGraph | None,
    b: SubGraph | None,
    na: GraphNormalizer = IDENTITY,
    nb: GraphNormalizer = IDENTITY,
    *,
    meta: bool = True,
    stack: bool = False,
) -> SubgraphDiff:
    path = (b or a).path  # type: ignore[union-attr]  # the caller passes at least one of a and b
    if a is None:
        return SubgraphDiff(path, "added", [NodeDiff("added", path, None, r) for r in b.nodes])  # type: ignore[union-attr]  # a is None, so b is not (see above)
    if b is None:
        return SubgraphDiff(path, "removed", [NodeDiff("removed", path, r, None) for r in a.nodes])
    rows_a, rows_b = a.nodes, b.nodes
    pa = Parts(rows_a, na.leaf if na is not IDENTITY else None)
    pb = Parts(rows_b, nb.leaf if nb is not IDENTITY else None, like=pa)
    ma, mb, pairs = align_indices(pa, pb)
    if not (pa.names_unique and pb.names_unique):
        return _diff_rows(path, pa, pb, ma, mb, pairs, na, nb, meta, stack)
    # With unique names, compare_parts's name_map.get(n) == m (a's ref n, b's ref m) is ma[row of n] ==
    # row of m, refs to no row included (ma[len(a)] is -1; a ref to no row of b is len(b)).
    n_b = len(rows_b)
    lits_a, lits_b, ins_a, ins_b, wh_a, wh_b = pa.lits, pb.lits, pa.ins, pb.ins, pa.wheres, pb.wheres
    mget = ma.__getitem__
    mbl = mb[:n_b]  # the a row of each b row, or -1
    # b rows sharing the pieces of their matched a row (same_as) whose inputs are matched with
    # its inputs: compare_parts's first test holds, "same" (computed for all rows, kept for those)
    same_as = pb.same_as if pb.same_as is not None else [-1] * n_b
    fast = _shared_and_matched(same_as, mbl, ma, ins_a, ins_b)
    nodes_b = list(
        map(
            NodeDiff,
            repeat("same"),
            repeat(path),
            map(rows_a.__getitem__, mbl),
            rows_b,
            repeat(NO_CHANGES),
            repeat(NO_CHANGES),
            repeat(False),
        )
    )
    changed = False
    for j in compress(range(n_b), map(not_, fast)):
        i = mbl[j]
        rb = rows_b[j]
        if i < 0:
            nodes_b[j] = NodeDiff("added", path, None, rb)
            changed = True
            continue
        ra = rows_a[i]
        xs = ins_a[i]
        if (
            same_as[j] != i
            and lits_a[i] == lits_b[j]
            and (not xs and not ins_b[j] or wh_a[i] == wh_b[j] and tuple(map(mget, xs)) == ins_b[j])
            and (ra == rb or same_meta(ra, rb, stack))
        ):
            continue  # compare_parts's first test, on indices: "same"
        # the names compare_parts looks up: a's refs
        nm = {}
        for n, x in zip(pa.names[i], xs):
            y = ma[x]
            if y >= 0:
                nm[n] = rows_b[y]["name"]
        args, metas, structural = compare_parts(i, j, pa, pb, nm, na, nb, meta=meta, stack=stack)
        if args or metas or structural:
            changed = True
            nodes_b[j] = NodeDiff("changed", path, ra, rb, args, metas, structural)
    nodes = _with_removed(path, rows_a, ma, nodes_b)
    return SubgraphDiff(path, "changed" if changed or nodes is not nodes_b else "same", nodes)


def _shared_and_matched(
    same_as: list[int], mbl: list[int], ma: list[int], ins_a: list[tuple], ins_b: list[tuple]
) -> list[bool]:
    """Per b row: it shares the pieces of its matched a row (`same_as`) and its inputs are matched
    with that row's inputs, so compare_parts' first test holds ("same"); computed for all rows in
    C (map over the columns), kept for those."""
    mget = ma.__getitem__
    ins_of = [*ins_a, ()].__getitem__  # -1: none
    return list(
        map(
            and_,
            map(and_, map(eq, same_as, mbl), map((-1).__lt__, mbl)),
            map(eq, map(tuple, map(map, repeat(mget), map(ins_of, mbl))), ins_b),
        )
    )


def _with_removed(path: str, rows_a: list, ma: list[int], nodes_b: list[NodeDiff]) -> list[NodeDiff]:
    """`nodes_b` (itself where no a row is unmatched) with the a rows matched with none: each after
    the b row of the matched a row before it (merge_order)."""
    n_a = len(rows_a)
    after: dict[int, list[NodeDiff]] = {}
    for i in compress(range(n_a), map((-1).__eq__, ma[:n_a])):
        k = i - 1
        while k >= 0 and ma[k] < 0:
            k -= 1
        last_b = ma[k] if k >= 0 else -1
        node = NodeDiff("removed", path, rows_a[i], None)
        if last_b in after:
            after[last_b].append(node)
        else:
            after[last_b] = [node]
    if not after:
        return nodes_b
    nodes = after.pop(-1, [])
    prev = 0
    for j in sorted(after):
        nodes.extend(nodes_b[prev : j + 1])
        nodes.extend(after[j])
        prev = j + 1
    nodes.extend(nodes_b[prev:])
    return nodes


def _diff_rows(
    path: str,
    pa: Parts,
    pb: Parts,
    ma: list[int],
    mb: list[int],
    pairs: list[tuple[int, int]],
    na: GraphNormalizer,
    nb: GraphNormalizer,
    meta: bool,
    stack: bool,
) -> SubgraphDiff:
    """diff_subgraph's nodes, pair by pair, as they always were: for a side with a name twice."""
    rows_a, rows_b = pa.rows, pb.rows
    name_map = {rows_a[i]["name"]: rows_b[j]["name"] for i, j in pairs}
    nodes: list[NodeDiff] = []
    changed = False
    for i, j in merge_order_lists(ma, mb, len(rows_a), len(rows_b)):
        if j is None:
            nodes.append(NodeDiff("removed", path, rows_a[i], None))  # type: ignore[index]  # i is None only with j, never here
            changed = True
        elif i is None:
            nodes.append(NodeDiff("added", path, None, rows_b[j]))
            changed = True
        else:
            args, metas, structural = compare_parts(i, j, pa, pb, name_map, na, nb, meta=meta, stack=stack)
            if args or metas or structural:
                changed = True
                nodes.append(NodeDiff("changed", path, rows_a[i], rows_b[j], args, metas, structural))
            else:
                nodes.append(NodeDiff("same", path, rows_a[i], rows_b[j], NO_CHANGES, NO_CHANGES, False))
    return SubgraphDiff(path, "changed" if changed else "same", nodes)


def diff_tables(
    a: GraphTables,
    b: GraphTables,
    *,
    a_label: str = "a",
    b_label: str = "b",
    norm_a: GraphNormalizer | None = None,
    norm_b: GraphNormalizer | None = None,
    meta: bool = True,
    stack: bool = False,
) -> GraphDiff:
    with no_gc():
        return _diff_tables(a, b, a_label, b_label, norm_a or IDENTITY, norm_b or IDENTITY, meta, stack)


def _diff_tables(
    a: GraphTables,
    b: GraphTables,
    a_label: str,
    b_label: str,
    na: GraphNormalizer,
    nb: GraphNormalizer,
    meta: bool,
    stack: bool,
) -> GraphDiff:
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
    paired = {id(g) for g in renamed.values()}  # a SubGraph equals only itself
    for g in b.graphs:
        if g.path not in used and id(g) not in paired:
            subs.append(diff_subgraph(None, g, na, nb, meta=meta, stack=stack))
    return GraphDiff(a_label, b_label, a.gid, b.gid, subs)


# ---------------------------------------------------------------------------------------------
# Text


_STACK_LINE = re.compile(r"^\s*# (File: |No stacktrace found|graph id: )")
_DEAD = re.compile(r";\s+[A-Za-z_][A-Za-z0-9_]*( = [A-Za-z_][A-Za-z0-9_]*)* = None\s*$")


def normalize_code(
    code: str, norm: GraphNormalizer | None = None, *, drop_stack: bool = True, drop_dead: bool = True
) -> list[str]:
    """Lines of FX code without stack comments and dead-value `x = None` tails; with `norm`, group
    names and the own device rewritten as in a rank diff."""
    out = []
    own = norm.ctx.own_device if norm is not None and norm.ctx is not None else None
    own_idx = own.partition(":")[2] if own and ":" in own else None
    groups: dict[str, str] = {}
    if norm is not None:
        names = set(norm.ordinals) | (set(norm.ctx.group_keys) if norm.ctx is not None else set())
        groups = {k: norm.group(k) for k in names}
    own_dev = own_new = own_tok = ""
    own_re = None
    if norm is not None and own_idx is not None:
        typ = own.partition(":")[0]  # type: ignore[union-attr]  # own_idx is set only from own
        own_dev, own_new = f"device(type='{typ}', index={own_idx})", f"device(type='{typ}', index=<own>)"
        own_tok, own_re = f"{typ}:{own_idx}", re.compile(rf"\b{typ}:{own_idx}\b")
    # each rewrite only where a plain substring test says it can apply (most lines hold no stack
    # comment, no dead value, no collective): a regex per line took most of the time
    for line in code.splitlines():
        if drop_stack and "# " in line and _STACK_LINE.match(line):
            continue
        if drop_dead and "None" in line:
            # a dead-value tail holds no ";" of its own, so it can start only at the line's last
            k = line.rfind(";")
            if k >= 0 and _DEAD.match(line, k):
                line = line[:k]
        if norm is not None:
            if own_re is not None:
                if own_dev in line:
                    line = line.replace(own_dev, own_new)
                if own_tok in line:
                    line = own_re.sub("<own>", line)
            if groups and ("c10d" in line or "_dtensor" in line or "device_mesh" in line):
                line = re.sub(
                    r"'([^']*)'", lambda m: f"'{groups[m.group(1)]}'" if m.group(1) in groups else m.group(0), line
                )
        out.append(line.rstrip())
    while out and not out[-1]:
        out.pop()
    return out


def text_diff(
    a_lines: list[str], b_lines: list[str], a_label: str = "a", b_label: str = "b", context: int = 3
) -> list[str]:
    return unified_diff(a_lines, b_lines, a_label, b_label, n=context)


def side_by_side(
    a_lines: list[str], b_lines: list[str], width: int = 160, context: int = 3
) -> list[tuple[str, str, str]]:
    """(marker, left, right) rows: marker ' ' same, '|' changed, '<' only left, '>' only right,
    '~' a skipped run of equal lines."""
    sm = line_matcher(a_lines, b_lines)
    rows: list[tuple[str, str, str]] = []
    for group in sm.get_grouped_opcodes(context):
        if rows:
            rows.append(("~", "...", "..."))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows.extend((" ", a_lines[i], b_lines[j]) for i, j in zip(range(i1, i2), range(j1, j2)))
            elif tag == "replace":
                la, lb = a_lines[i1:i2], b_lines[j1:j2]
                for k in range(max(len(la), len(lb))):
                    x = la[k] if k < len(la) else ""
                    y = lb[k] if k < len(lb) else ""
                    rows.append(("|" if x and y else ("<" if x else ">"), x, y))
            elif tag == "delete":
                rows.extend(("<", a_lines[i], "") for i in range(i1, i2))
            elif tag == "insert":
                rows.extend((">", "", b_lines[j]) for j in range(j1, j2))
    return rows


# ---------------------------------------------------------------------------------------------
# On a capture


def rank_context(cap: "Capture", rank: int, gid: str | None = None) -> RankContext:
    return RankContext.from_table(
        rank, cap.rank_table(rank), local_rank=cap.local_rank(rank), own_device=cap.own_device(rank, gid)
    )


def pass_diffs(
    cap: "Capture", rank: int, p: "PassRecord", *, meta: bool = True, stack: bool = False
) -> list[tuple[str, GraphDiff | None]]:
    """(role, diff of the pass's input and that output) for each output; None where unreadable."""
    out: list[tuple[str, GraphDiff | None]] = []
    before = None
    for role, gid in p.after.items():
        label = f"after {p.name}" + ("" if role == "out" else f" ({role})")
        if meta and not stack and p.before:
            # tables with row digests and refs: their changes, from the rows that differ
            d = anchored_pass_diff(cap, rank, p.before, gid, f"before {p.name}", label)
            if d is not None:
                out.append((role, d))
                continue
        if before is None and p.before:
            before = cap.node_table(rank, p.before)
        after = cap.node_table(rank, gid)
        if before is None or after is None:
            out.append((role, None))
            continue
        out.append(
            (
                role,
                diff_tables(
                    before,
                    after,
                    a_label=f"before {p.name}",
                    b_label=label,
                    meta=meta,
                    stack=stack,
                ),
            )
        )
    return out


def pass_text_diff(cap: "Capture", rank: int, p: "PassRecord", role: str) -> tuple[list[str], list[str]] | None:
    gid = p.after.get(role)
    if p.before is None or gid is None:
        return None
    a = cap.graph_code(rank, p.before)
    b = cap.graph_code(rank, gid)
    if a is None or b is None:
        return None
    return normalize_code(a), normalize_code(b)


def table_collective_rows(tables: GraphTables) -> Iterator[NodeRow]:
    """The rows of a GraphTables whose target is a collective, in order: all of a graph that
    GraphNormalizer reads (its group-name ordinals); one is_collective_target per distinct target
    instead of one per row."""
    for g in tables.graphs:
        # rows are dicts at run time: dict.get mapped in C
        targets = list(map(dict.get, g.nodes, repeat("target")))  # type: ignore[arg-type]  # rows are dicts
        try:
            colls = {t for t in set(targets) if is_collective_target(t)}
        except TypeError:  # a target that is no string
            yield from g.nodes
            continue
        if colls:
            yield from compress(g.nodes, map(colls.__contains__, targets))


def graph_normalizer(tables: GraphTables | None, ctx: RankContext | None) -> GraphNormalizer:
    """GraphNormalizer of the graph's table, built from its collective rows alone."""
    return GraphNormalizer(table_collective_rows(tables) if tables is not None else None, ctx)


def normalizers(
    cap: "Capture", rank_a: int, gid_a: str, rank_b: int, gid_b: str
) -> tuple[GraphTables | None, GraphTables | None, GraphNormalizer, GraphNormalizer]:
    ta = cap.node_table(rank_a, gid_a)
    tb = cap.node_table(rank_b, gid_b)
    na = graph_normalizer(ta, rank_context(cap, rank_a, gid_a))
    nb = graph_normalizer(tb, rank_context(cap, rank_b, gid_b))
    return ta, tb, na, nb


def rank_text(cap: "Capture", rank: int, gid: str) -> list[str] | None:
    """The graph's code normalized for a rank diff. The normalizer reads the table's collective
    rows alone: where the table has row digests, those rows are found in the stored payload and
    read by themselves (the rest of a 100k-row table is not decoded: 0.6 s, VM)."""
    code = cap.graph_code(rank, gid)
    if code is None:
        return None
    ctx = rank_context(cap, rank, gid)
    rows = collective_rows(cap, rank, gid)
    if rows is not None:
        return normalize_code(code, GraphNormalizer(rows, ctx))
    return normalize_code(code, graph_normalizer(cap.node_table(rank, gid), ctx))


def collective_rows(cap: "Capture", rank: int, gid: str) -> list[NodeRow] | None:
    """The rows of the graph's table whose target is a collective, in table order, read by the
    table's row digests (`RowDigests.rows_by_target`: the targets from the start of each stored
    row line). None where the table has no digests, a row line does not start as the capture
    writes it, or a row read is not what its digest says."""
    d = cap.row_digests(rank, gid)
    places = d.rows_by_target(is_collective_target) if d is not None else None
    if places is None:
        return None
    by_sub: dict[int, list[int]] = {}
    for k, i in places:
        by_sub.setdefault(k, []).append(i)
    out: list[NodeRow] = []
    for k, rows in by_sub.items():
        got = cap.digest_rows(rank, gid, k, rows)
        if got is None:
            return None
        out.extend(got)
    return out
