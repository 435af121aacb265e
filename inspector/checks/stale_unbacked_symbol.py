"""stale-unbacked-symbol: an unbacked symbol in a node's metadata that nothing in scope binds.

Walk each graph in node order. In scope: the symbols of the root's placeholders (inputs), plus
every symbol a node binds (`unbacked_bindings`) once that node has run. A nested subgraph (cond
branch, flex_attention score_mod, invoke_subgraph body) starts with the scope of its parent at
the node that uses it, so a parent symbol lifted into it as a `Sym(u0)` placeholder is bound; a
placeholder symbol the parent never bound is stale. Symbols the capture's ShapeEnv does not know
are reported too. Renamed symbols (ShapeEnv `unbacked_renamings`) count as their new names.

Graphs that only have text (TORCH_TRACE) have no `unbacked_bindings`: a symbol's first appearance
binds it where the node's op can create one (data-dependent aten ops, custom ops, higher-order
ops and their getitems); such findings are warnings and say the bindings were inferred.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from itertools import compress, repeat
from operator import is_
from typing import Any, Callable, Mapping

import orjson

from graphtrain_inspect.capture.shared import logformat, symbol_rows
from graphtrain_inspect.capture.shared.logformat import NodeRow
from graphtrain_inspect.capture.shared.symbol_rows import row_refs
from graphtrain_inspect.capture.shared.symbol_usage import is_unbacked, row_symbols
from graphtrain_inspect.inspector.checks.context import CheckContext, Observation
from graphtrain_inspect.inspector.checks.findings import Finding
from graphtrain_inspect.inspector.checks.rank_classes import class_rep_stage
from graphtrain_inspect.inspector.diff.rank_diffs import POSITIONAL
from graphtrain_inspect.inspector.read.collector import no_gc
from graphtrain_inspect.inspector.read.graphmodel import GraphTables, SubGraph
from graphtrain_inspect.inspector.read.stages import Stage

KIND = "stale-unbacked-symbol"
DESCRIPTION = "unbacked symbols that no node in scope binds (root or nested subgraph, placeholders included)"

# aten ops whose output sizes or values are data-dependent: they create unbacked symbols
_ATEN_BINDERS = re.compile(
    r"^aten\.(nonzero|_local_scalar_dense|item|masked_select|unique|_unique|_unique2|unique_dim|unique_consecutive"
    r"|repeat_interleave|bincount|argwhere|nonzero_numpy|index|_embedding_bag|tolist|_assert_tensor_metadata"
    r"|sym_constrain_range|segment_reduce)\b"
)


def _canon(renamings: dict[str, str]):
    def canon(s: str) -> str:
        seen = 0
        while s in renamings and seen < 64:
            s = renamings[s]
            seen += 1
        return s

    return canon


def _text_binder(row: NodeRow) -> bool:
    target = str(row.get("target") or "")
    if row.get("op") in ("placeholder", "output", "get_attr"):
        return False
    if not target.startswith("aten."):
        return True  # custom ops, higher-order ops, getitem of their outputs, operator.*
    return bool(_ATEN_BINDERS.match(target))


def stale_symbols(tables: GraphTables, symmap: dict[str, Any] | None) -> list[Observation]:
    """Observations of stale (and ShapeEnv-unknown) unbacked symbols in one graph."""
    symmap = symmap or {}
    renamings = {str(k): str(v) for k, v in (symmap.get("renamings") or {}).items()}
    canon = _canon(renamings)
    children: dict[str | None, list[SubGraph]] = {}
    for g in tables.graphs:
        if g.path:
            children.setdefault(symbol_rows.parent_path(g.path), []).append(g)
    bound_anywhere: dict[str, list[str]] = {}
    for g, row in tables.iter_nodes():
        for s in row.get("unbacked_bindings") or ():
            bound_anywhere.setdefault(canon(str(s)), []).append(f"{g.path + ':' if g.path else ''}{row['name']}")
    info = symmap.get("symbols") or {}
    shape_env = bool(symmap.get("shape_env"))
    walk = _ScopeWalk(canon, bool(renamings), tables.source == "text", info, shape_env, children, bound_anywhere)
    walk.graph(tables.root, set(), True)
    out = walk.out
    if shape_env:
        out += _unknown_to_shape_env(info, out)
    return out


@dataclass
class _ScopeWalk:
    """The walk of one graph and its subgraphs in scope order: each graph sees the symbols bound
    before the node that uses it; a symbol used where nothing in scope binds it is stale."""

    canon: Callable[[str], str]  # a symbol's name after the graph's renamings
    renamed: bool  # the graph has renamings (else canon is the identity)
    text: bool  # rows parsed from graph text: bindings inferred, not captured
    info: dict[str, Any]  # the symbol map's symbols
    shape_env: bool  # the symbol map comes from a ShapeEnv (its `known` says something)
    children: dict[str | None, list[SubGraph]]  # subgraphs by their parent's path
    bound_anywhere: dict[str, list[str]]  # symbol -> nodes binding it anywhere in the graph
    out: list[Observation] = field(default_factory=list)

    def graph(self, g: SubGraph, scope: set[str], is_root: bool) -> None:
        canon, renamed, text = self.canon, self.renamed, self.text
        bound = set(scope)
        found: dict[str, Observation] = {}
        sub_scope: dict[str, set[str]] = {}
        sub_by_node = {c.parent_node: c for c in self.children.get(g.path, []) if c.parent_node}
        for row in g.nodes:
            op = row.get("op")
            # (row_symbols, without copying the row's list: it is only read)
            syms = row.get("syms")
            if syms is None:
                syms = row_symbols(row)
            if renamed:
                syms = [canon(s) for s in syms]
            ub = row.get("unbacked_bindings")
            binds = ({canon(str(s)) for s in ub} if renamed else {str(s) for s in ub}) if ub else set()
            if op == "placeholder" and is_root:
                bound.update(syms)
                continue
            if text and not binds and _text_binder(row):
                binds = {s for s in syms if is_unbacked(s) and s not in bound}
            for s in syms:
                if s in found:
                    found[s].evidence["uses"] += 1
                elif s not in bound and s not in binds and is_unbacked(s):
                    found[s] = o = self._stale(g, row, s)
                    self.out.append(o)
            if binds:
                bound.update(binds)
            if not sub_by_node:
                continue  # no subgraph of this graph to hand a scope to
            # a subgraph sees the scope of the node that uses it (its get_attr, then the HOP call)
            if op == "get_attr":
                if row["name"] in sub_by_node:
                    sub_scope[row["name"]] = set(bound)
            else:
                for n in row_refs(row):
                    if n in sub_by_node:
                        sub_scope[n] = set(bound)
        for node_name, child in sub_by_node.items():
            self.graph(child, sub_scope.get(node_name, bound), False)
        for child in self.children.get(g.path, []):
            if not child.parent_node:
                self.graph(child, bound, False)

    def _stale(self, g: SubGraph, row: NodeRow, s: str) -> Observation:
        op = row.get("op")
        where = "placeholder" if op == "placeholder" else "node"
        in_sub = f" of subgraph {g.path}" if g.path else ""
        msg = f"unbacked symbol {s} in {where} {row['name']}{in_sub} is bound by nothing in scope"
        if op == "placeholder":
            msg += " (not lifted from the parent graph)"
        ev: dict[str, Any] = {
            "symbol": s,
            "in_placeholder": op == "placeholder",
            "value": row.get("val"),
            "uses": 1,
            "bound_elsewhere": self.bound_anywhere.get(s, []),
            "shape_env_known": (self.info.get(s) or {}).get("known") if self.shape_env else None,
            "bindings": "inferred from graph text" if self.text else "captured (unbacked_bindings)",
        }
        return Observation(
            key=("stale", g.path, s),
            severity="warning" if self.text else "error",
            message=msg,
            node=row["name"],
            subgraph=g.path or None,
            evidence=ev,
            loose_key=("stale", s),
        )


def _unknown_to_shape_env(info: dict[str, Any], stale: list[Observation]) -> list[Observation]:
    """Unbacked symbols the ShapeEnv does not know, where no stale use names them already."""
    out = []
    for name, e in info.items():
        if is_unbacked(name) and e.get("known") is False and not any(o.evidence.get("symbol") == name for o in stale):
            where = (e.get("bound_by") or e.get("inputs") or e.get("used_by") or [{}])[0]
            out.append(
                Observation(
                    key=("unknown", name),
                    severity="warning",
                    message=f"unbacked symbol {name} is not known to the ShapeEnv",
                    node=where.get("node"),
                    subgraph=where.get("graph") or None,
                    evidence={"symbol": name, "bound_by": e.get("bound_by"), "uses": e.get("uses")},
                )
            )
    return out


# per check run: each distinct row line's answer of `unbacked_rows` (consecutive passes and other
# ranks repeat most rows), emptied past this many rows
_UNBACKED_MEMO_ROWS = 300_000


def _rows_alone(ctx: CheckContext) -> bool:
    """Whether the walk reads the rows that name a symbol alone, as the positional rank diff reads
    the rows that differ: off with that strategy (tests compare both with the tables read whole)."""
    return POSITIONAL in ctx.strategies


def _kept(ctx: CheckContext, rank: int, gid: str) -> list[tuple[bytes, dict[str, Any], list[bytes]]] | None:
    """Per subgraph, its head (undecoded and decoded) and the undecoded lines of the rows the walk
    needs (see `symbol_tables`), in order: the capture's own selection (`gti_symbol_rows`) where it
    wrote one, else selected from the table; None when neither is laid out one row per line or a
    head does not parse."""
    if not _rows_alone(ctx):
        return None
    recorded = _recorded_rows(ctx, rank, gid)
    if recorded is not None:
        return recorded
    subs = ctx.cap.node_rows(rank, gid)
    if subs is None:
        return None
    memo: dict[bytes, bool] = ctx.__dict__.setdefault("_unbacked_memo", {})
    if len(memo) > _UNBACKED_MEMO_ROWS:
        memo.clear()
    heads = _heads(subs)
    if heads is None:
        return None

    def unbacked(rows: list[bytes]) -> set[int]:
        # each distinct line answered once per run: consecutive passes and ranks repeat most rows
        known = list(map(memo.get, rows))
        if None in known:
            new = list(compress(rows, map(is_, known, repeat(None))))
            hits = symbol_rows.unbacked_rows(new)
            named = list(map(hits.__contains__, range(len(new))))
            memo.update(zip(new, named))
            answers = iter(named)
            known = [next(answers) if k is None else k for k in known]
        return set(compress(range(len(rows)), known))

    keep = symbol_rows.kept_positions(heads, [rows for _, rows in subs], unbacked)
    return [(head, h, [rows[i] for i in at]) for (head, rows), h, at in zip(subs, heads, keep)]


def _recorded_rows(ctx: CheckContext, rank: int, gid: str) -> list[tuple[bytes, dict[str, Any], list[bytes]]] | None:
    """The graph's `gti_symbol_rows` record, made by the selection rules this reader knows, as
    `_kept` gives it; None where there is none (older captures, text graphs) or it does not read."""
    rec = ctx.cap.graph_record(rank, gid, logformat.SYMBOL_ROWS)
    if rec is None or rec.meta.get("rule") != symbol_rows.RULE:
        return None
    subs = ctx.cap.node_rows(rank, gid, logformat.SYMBOL_ROWS)
    heads = _heads(subs) if subs is not None else None
    if subs is None or heads is None:
        return None
    return [(head, h, rows) for (head, rows), h in zip(subs, heads)]


def _heads(subs: list[tuple[bytes, list[bytes]]]) -> list[dict[str, Any]] | None:
    """The subgraph heads decoded, or None where one does not parse as an object."""
    try:
        heads = [logformat.decode_sub_head(head) for head, _ in subs]
    except orjson.JSONDecodeError:
        return None
    return heads if all(isinstance(h, dict) for h in heads) else None


def _kept_tables(
    ctx: CheckContext, gid: str, kept: list[tuple[bytes, dict[str, Any], list[bytes]]]
) -> GraphTables | None:
    """The graph of the kept rows, each decoded through the capture's row pool; None when one
    does not parse."""
    row = ctx.cap.decoded_row  # shared with the node tables and rank diffs of the run
    graphs = []
    try:
        for _, h, lines in kept:
            nodes = list(filter(None, map(row, lines)))  # a row is a non-empty dict, or None
            parent = h.get("parent_node")
            graphs.append(SubGraph(str(h.get("path") or ""), parent if isinstance(parent, str) else None, nodes))
    except orjson.JSONDecodeError:
        return None
    return GraphTables(gid, graphs or [SubGraph("", None, [])])


def symbol_tables(ctx: CheckContext, rank: int, gid: str) -> GraphTables | None:
    """The graph with only the rows that can matter here, parsed; the rest are never decoded. A
    row matters when it names an unbacked symbol (uses, bindings, placeholders) or hands a scope to
    a nested subgraph (its get_attr, or a node taking it as input): every other row binds nothing
    and uses nothing, so the walk below sees the same scopes. None when the table is not laid out
    one row per line (then read the whole table)."""
    kept = _kept(ctx, rank, gid)
    return _kept_tables(ctx, gid, kept) if kept is not None else None


def _symbols_record(ctx: CheckContext, rank: int, gid: str):
    """The graph's symbols record and its rank's log, or (None, None)."""
    rec = ctx.cap.graph_record(rank, gid, logformat.SYMBOLS)
    log = ctx.cap.log_file(rank)
    return (rec, log) if rec is not None and log is not None else (None, None)


def _symbol_map_text(ctx: CheckContext, rank: int, gid: str) -> bytes | None:
    """The symbol map's payload, undecoded (md5 verified), or None."""
    rec, log = _symbols_record(ctx, rank, gid)
    return log.payload_bytes(rec) if rec is not None else None


def _symbol_map_key(ctx: CheckContext, rank: int, gid: str) -> tuple | None:
    """A key for the graph's symbol map, equal for two graphs whose `cap.symbols` are the same but
    for their gid, or None: the payload's encoding and its bytes after `{"gid":<this gid>,` (two
    such payloads with the same rest decode alike, but for the gid, which the walk does not read).
    Used only for a graph whose `cap.symbols` was that record's payload (`_symbols_from_record`):
    then another graph with the same key has the same map."""
    text = _symbol_map_text(ctx, rank, gid)
    head = b'{"gid":' + orjson.dumps(gid) + b","
    if text is None or not text.startswith(head):
        return None
    art = _symbols_record(ctx, rank, gid)[0].env.get("artifact")
    return (repr(art.get("encoding") if isinstance(art, dict) else None), text[len(head) :])


def _symbols_from_record(ctx: CheckContext, rank: int, gid: str, symmap: Any) -> bool:
    """`cap.symbols(rank, gid)` returned the graph's own symbols record, decoded (not another record
    of it, nor a map derived from its rows): the very object the log's payload cache holds."""
    rec, log = _symbols_record(ctx, rank, gid)
    return symmap is not None and rec is not None and log.payload(rec) is symmap


def _symbol_map_bytes(ctx: CheckContext, stage) -> bytes | None:
    """The symbol map's payload after its gid (which differs between ranks' graphs), undecoded."""
    text = _symbol_map_text(ctx, stage.rank, stage.gid)
    if text is None or not text.startswith(b'{"gid":'):
        return None
    cut = text.find(b",", len(b'{"gid":'))
    return text[cut:] if cut > 0 else None


def _same_symbol_maps(ctx: CheckContext, a, b) -> bool:
    """Two graphs' symbol maps say the same, gid aside: compared as bytes (they run to hundreds of
    KB on large graphs), decoded only when the bytes differ; not read at all where both ranks
    logged the same record (same graph id, same payload md5: the same bytes)."""
    ka = ctx.content_key(a.rank, a.gid, logformat.SYMBOLS)
    if ka[0] == a.gid and ka == ctx.content_key(b.rank, b.gid, logformat.SYMBOLS):
        return True
    ba, bb = _symbol_map_bytes(ctx, a), _symbol_map_bytes(ctx, b)
    if ba is not None and ba == bb:
        return True
    sa, sb = ctx.cap.symbols(a.rank, a.gid), ctx.cap.symbols(b.rank, b.gid)
    return sa is not None and sb is not None and {**sa, "gid": None} == {**sb, "gid": None}


def _same_symbols_as_ref(ctx: CheckContext, stage: Stage) -> Stage | None:
    """The reference rank's stage for this one when their graphs agree on every row that names an
    unbacked symbol (the rank diff lists every other difference) and their symbol maps are the
    same record: its observations hold here too, node names included."""
    group = next((g for g in ctx.rank_groups() if stage.rank in g), None)
    if not _rows_alone(ctx) or not group or group[0] == stage.rank:
        return None
    ref = ctx.index.across(stage.key).get(group[0])
    if ref is None:
        return None
    d = ctx.rank_diff(stage.key, ref.rank, stage.rank)
    if d is None or not d.unlisted_same or d.renamed is not None:
        return None  # only a diff that pairs rows by position says the graphs are the same rows
    if not _same_symbol_maps(ctx, ref, stage):
        return None
    for n in d.changes():
        # the same node with the same symbols, bindings and value: only other literals differ
        a: Mapping[str, Any] = n.a or {}
        b: Mapping[str, Any] = n.b or {}
        if (
            n.structural
            or row_symbols(a) != row_symbols(b)
            or a.get("unbacked_bindings") != b.get("unbacked_bindings")
            or a.get("val") != b.get("val")
        ):
            return None
    return ref


# off: every graph's rows are walked, as without `gti_symbol_scopes`; tests compare both ways
SCOPES = True

# graphs walked last in a run, by what their walk read (`graph_observations`): consecutive passes
# are what repeat, and each entry holds its graph's kept lines and symbol map
_WALKED_KEPT = 8


def graph_observations(ctx: CheckContext, rank: int, gid: str) -> tuple[list[Observation], bool]:
    """The stale symbols of one graph, and whether its table was parsed from text.

    The walk of the kept rows (`symbol_tables`) reads their lines, the subgraph heads and the
    symbol map, nothing else: a graph whose three are the same bytes as those of a graph walked
    shortly before in this run (consecutive passes that change no row naming a symbol) gets that
    graph's observations, node names and all, without decoding or walking anything. The symbol
    maps are compared only where the rows are the same. The cyclic collector is off meanwhile
    (`no_gc`): the rows decoded here make no cycles, and would have it rescan every row kept."""
    with no_gc():
        return _graph_observations(ctx, rank, gid)


def _graph_observations(ctx: CheckContext, rank: int, gid: str) -> tuple[list[Observation], bool]:
    obs, text = _walked(ctx, rank, gid)
    if obs and _recorded_rows(ctx, rank, gid) is not None:
        obs = _with_values(ctx, rank, gid, obs)
    return obs, text


def _walked(ctx: CheckContext, rank: int, gid: str) -> tuple[list[Observation], bool]:
    if _scopes_say_none(ctx, rank, gid):
        return [], False
    kept = _kept(ctx, rank, gid)
    # the rows as a key: their line objects, whose hashes the selection has already made
    rows_key = tuple((head, tuple(lines)) for head, _, lines in kept) if kept is not None else None
    walked: dict[tuple, list] = ctx.__dict__.setdefault("_stale_walked", {})
    seen = walked.get(rows_key) if rows_key is not None else None
    if seen is not None:
        # [rank, gid, its symbol-map key (made when first needed), result]
        if len(seen[2]) == 0:
            seen[2].append(_symbol_map_key(ctx, seen[0], seen[1]))
        if seen[2][0] is not None and seen[2][0] == _symbol_map_key(ctx, rank, gid):
            return seen[3]
    symmap = ctx.cap.symbols(rank, gid)
    renamed_to_unbacked = any(
        is_unbacked(str(v)) and not is_unbacked(str(k)) for k, v in ((symmap or {}).get("renamings") or {}).items()
    )
    tables = None if renamed_to_unbacked or kept is None else _kept_tables(ctx, gid, kept)
    if tables is None:
        rows_key = None
        tables = ctx.tables(rank, gid)
    if tables is None:
        return [], False
    result = (stale_symbols(tables, symmap), tables.source == "text")
    if rows_key is not None and _symbols_from_record(ctx, rank, gid, symmap):
        walked.pop(rows_key, None)
        walked[rows_key] = [rank, gid, [], result]
        while len(walked) > _WALKED_KEPT:
            del walked[next(iter(walked))]
    return result


def scopes_record(ctx: CheckContext, rank: int, gid: str) -> Any:
    """The graph's `gti_symbol_scopes` record where the check may read it instead of the graph's
    rows (from the index alone: whether its events show a stale symbol is known once they are
    read), else None."""
    rec = ctx.cap.graph_record(rank, gid, logformat.SYMBOL_SCOPES)
    return rec if SCOPES and rec is not None and rec.meta.get("rule") == symbol_rows.RULE else None


def _scopes_say_none(ctx: CheckContext, rank: int, gid: str) -> bool:
    """The graph's `gti_symbol_scopes` record says the walk of its symbol rows finds nothing: the
    walk over the record's events (`event_tables`) finds nothing, where the capture made it from
    those rows with the selection rules this reader knows and its symbol map has no renamings
    and no symbol unknown to the ShapeEnv. The record stands for the rows it was made of, as a
    row digest does for a row never read. False where there is no such record, it does not
    read, or the walk of the events finds something: then the rows are walked, and the findings
    (node names, use counts, values) come from them."""
    cap = ctx.cap
    rec = scopes_record(ctx, rank, gid)
    rows = cap.graph_record(rank, gid, logformat.SYMBOL_ROWS)
    log = cap.log_file(rank)
    if rec is None or rows is None or log is None or cap.graph_record(rank, gid, logformat.NODES) is None:
        return False
    if rows.meta.get("rule") != symbol_rows.RULE:
        return False
    v = log.payload(rec)
    if not isinstance(v, dict) or v.get("gid") != gid:
        return False
    if not all(type(v.get(k)) is int and v[k] == 0 for k in ("renamings", "unknown")):
        return False
    tables = event_tables(gid, v.get("graphs"))
    return tables is not None and not stale_symbols(tables, None)


_EVENTS = ("uses", "ph", "binds", "ph_binds", "hands")


def event_tables(gid: str, graphs: Any) -> GraphTables | None:
    """The graph as few rows as make the walk decide as it does on the kept rows: per subgraph,
    one row at each position where a symbol is first used or bound or a scope last handed on
    (`symbol_rows.scope_events`); a placeholder's symbols bind in the root and are used
    elsewhere, as the walk takes them. The walk of these rows finds a stale symbol exactly where
    the walk of the kept rows does: a symbol is stale where its first use comes before its first
    binding, and a handed scope holds what was bound by then. None where the events do not read."""
    if not isinstance(graphs, list) or not graphs:
        return None
    subs: list[SubGraph] = []
    events: list[list[dict[str, int]]] = []
    for g in graphs:
        if not isinstance(g, dict):
            return None
        ev: list[dict[str, int]] = []
        for k in _EVENTS:
            e = g.get(k)
            if not (isinstance(e, dict) and all(type(i) is int for i in e.values())):
                return None
            ev.append(e)
        parent = g.get("parent_node")
        subs.append(SubGraph(str(g.get("path") or ""), parent if isinstance(parent, str) else None, []))
        events.append(ev)
    tables = GraphTables(gid, subs)
    root = tables.root
    for sub, (uses, ph, binds, ph_binds, hands) in zip(subs, events):
        at: dict[int, tuple[list[str], dict[str, str], list[dict[str, str]]]] = {}
        used = uses if sub is root else _first(uses, ph)
        bound = _first(binds, ph) if sub is root else _first(binds, ph_binds)
        for sym, i in used.items():
            at.setdefault(i, ([], {}, []))[0].append(sym)
        for sym, i in bound.items():
            at.setdefault(i, ([], {}, []))[1][sym] = ""
        for name, i in hands.items():
            at.setdefault(i, ([], {}, []))[2].append({"n": name})
        for i in sorted(at):
            syms, binding, refs = at[i]
            sub.nodes.append(
                {"name": f"#{i}", "op": "call_function", "syms": syms, "unbacked_bindings": binding, "args": refs}
            )
    return tables


def _first(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """Each name of either at its lower position."""
    out = dict(a)
    for name, i in b.items():
        out[name] = min(i, out.get(name, i))
    return out


def _with_values(ctx: CheckContext, rank: int, gid: str, obs: list[Observation]) -> list[Observation]:
    """Observations of a walk over the capture's trimmed rows with each stale use's value (its
    `val`, which the trimmed rows leave out where they hold `syms`) read from the graph's node
    table: the observations a walk over its full rows makes."""
    out = []
    for o in obs:
        if "in_placeholder" in o.evidence and o.node is not None:  # a stale use (`_ScopeWalk._stale`)
            row = ctx.cap.node_row(rank, gid, o.subgraph or "", o.node)[1]
            o = replace(o, evidence={**o.evidence, "value": row.get("val") if row is not None else None})
        out.append(o)
    return out


def prefetch_tasks(ctx: CheckContext) -> list[tuple[int, str, tuple, Any]]:
    """(rank, gid, content key, stage key) of the graphs whose stale symbols the check computes whatever the
    rank diffs say, each content once (check -j): each rank group's reference rank's graphs, and
    another rank's graph whose node count differs from the reference's at that stage (its rank
    diff cannot be made from rows, so `_same_symbols_as_ref` cannot share the reference's)."""
    seen: set = set()
    out = []

    def add(st) -> None:
        key = ctx.content_key(st.rank, st.gid, logformat.NODES, logformat.SYMBOLS)
        if key not in seen:
            seen.add(key)
            out.append((st.rank, st.gid, key, st.key))

    for group in ctx.rank_groups():
        for st in ctx.index.by_rank.get(group[0], []):
            add(st)
        for r in group[1:]:
            for st in ctx.index.by_rank.get(r, []):
                ref = ctx.index.across(st.key).get(group[0])
                if ref is not None and ctx.cap.node_count(r, st.gid) != ctx.cap.node_count(ref.rank, ref.gid):
                    add(st)
    return out


def run(ctx: CheckContext) -> list:
    cache: dict[tuple, list[Observation]] = {}
    text_graphs = 0
    prefetched = ctx.prefetched.setdefault(KIND, {})

    def observe(stage):
        nonlocal text_graphs
        key = ctx.content_key(stage.rank, stage.gid, logformat.NODES, logformat.SYMBOLS)
        if key in cache:
            return cache[key]
        # the same rows as its rank class's lowest rank (but for group names and own device, which
        # name no symbol) and the same symbol map: that rank's observations
        ref = class_rep_stage(ctx, stage)
        if ref is None or not _same_symbol_maps(ctx, ref, stage):
            ref = _same_symbols_as_ref(ctx, stage)
        if ref is not None:
            cache[key] = observe(ref)
            return cache[key]
        # made by another process (check -j) or here
        obs, text = prefetched.pop(key) if key in prefetched else graph_observations(ctx, stage.rank, stage.gid)
        text_graphs += text
        cache[key] = obs
        return cache[key]

    findings = ctx.blame_per_rank(KIND, observe)
    if text_graphs:
        ctx.notes.append(
            f"{KIND}: {text_graphs} graph(s) have only text: bindings inferred from the ops, findings are warnings"
        )
    if ctx.cap.kind == "torch_trace":
        ctx.skip(f"{KIND} (ShapeEnv)", "TORCH_TRACE logs carry no ShapeEnv: symbols unknown to it cannot be found")
    return findings


def evidence_lines(f: Finding) -> list[str]:
    """The finding's evidence as lines of text (`check`, `report`, the TUI and SARIF show them)."""
    if f.layer == "codegen":
        from graphtrain_inspect.inspector.checks.codegen_sites import code_evidence_lines

        return code_evidence_lines(f)
    ev = f.evidence or {}
    s = f"{ev.get('symbol')}: {ev.get('uses', 1)} use(s)"
    if ev.get("bound_elsewhere"):
        s += f"; bound only at {', '.join(ev['bound_elsewhere'][:3])}"
    if ev.get("bindings") and "inferred" in ev["bindings"]:
        s += "; bindings inferred from text"
    return [s]
