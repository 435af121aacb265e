"""The rows of a node table that the stale-symbol check reads, found in its bytes: written by the
capture as a record of their own (`gti_symbol_rows`) so that the check reads them, not the table.

The stale-symbol walk (inspector/checks/stale_unbacked_symbol.py) follows scopes through a graph:
only rows that name an unbacked symbol (`u0`, `zuf1`: uses, bindings, placeholders) and rows that
hand a scope to a nested subgraph (the subgraph's get_attr, named as its parent node, and nodes
taking that node as input) can change what it finds, and of each row the walk reads five fields:
on the sample's 30k-node MoE graphs the kept rows, trimmed, are 5% of the table's bytes
(`python -m benchmarks record-cost CAPTURE`). The capture selects them
with the rules below, the ones the reader applies to a table that has no such record (one
definition), and writes each kept row trimmed to what the walk reads (`trim_row`).

The selections search the rows' bytes joined, at C speed: a regex or `bytes.find` over the
whole subgraph, then the offsets mapped back to rows (`rows_at`). Torch, the standard library and
orjson only: this runs inside training workers.
"""

from __future__ import annotations

import bisect
import os
import re
from itertools import accumulate, count
from operator import add
from typing import Any, Callable, Iterable, Mapping, Sequence

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.capture.shared.rank_tokens import finds
from graphtrain_inspect.capture.shared.symbol_usage import is_unbacked, row_symbols

# The selection rules' version, in each record's envelope (`rule`): a reader takes a record made
# by the rules it knows, and selects from the table itself otherwise.
RULE = 1
# The row fields the walk reads: kept as they are (`args` holds only the references to scope
# names, and `val` only where there is no `syms`, from which the reader would derive symbols).
_KEPT_FIELDS = ("name", "op", "syms", "unbacked_bindings")


def rows_with(
    rows: list[bytes], tokens: Sequence[bytes] = (), pattern: "re.Pattern[bytes] | None" = None, accept=None
) -> set[int]:
    """Positions of the rows containing any of `tokens`, or a match of `pattern` that `accept`
    (joined bytes, match) takes. The joined rows are searched at C speed; give `pattern` a literal
    first byte (a per-row search, or a lookbehind, costs ~30x more)."""
    if not tokens and pattern is None:
        return set()
    joined = b"\n".join(rows)
    offsets: list[int] = []
    for tok in tokens:
        offsets.extend(finds(joined, tok))
    if pattern is not None:
        # one accepted match per row is enough: after it, go on from the next row
        search, pos = pattern.search, 0
        while (m := search(joined, pos)) is not None:
            if accept is None or accept(joined, m):
                offsets.append(m.start())
                pos = joined.find(b"\n", m.end()) + 1
                if pos == 0:
                    break
            else:
                pos = m.start() + 1
    return rows_at(rows, offsets) if offsets else set()


def rows_at(rows: list[bytes], offsets: list[int]) -> set[int]:
    """Positions of the rows that hold the given byte offsets of `b"\n".join(rows)`."""
    # each row's start: the lengths of the rows before it and a newline after each, at C speed
    starts = list(map(add, accumulate(map(len, rows), initial=0), count()))
    return {bisect.bisect_right(starts, at) - 1 for at in offsets}


# a row that may name an unbacked symbol (u0, zuf1; "zuf1" holds "f1", not "u1", hence two
# literals): the others cannot make one stale. Each pattern starts with a literal: fast to search.
UNBACKED_BYTES = re.compile(rb"u[0-9]|zuf[0-9]")
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def symbol_start(joined: bytes, m: "re.Match[bytes]") -> bool:
    return m.start() == 0 or joined[m.start() - 1] not in _WORD


# `UNBACKED_BYTES` on the rows with every digit made 0: `u0` and `zuf0`, each a literal that sre
# finds at memchr-like speed (the alternation's two first bytes make it test every byte), the rest
# of the line taken with the match
_DIGITS_TO_0 = bytes.maketrans(b"123456789", b"000000000")
_UNBACKED_LINES = ((re.compile(rb"u0[^\n]*"), b"u0"), (re.compile(rb"zuf0[^\n]*"), b"zuf0"))


def unbacked_rows(rows: list[bytes]) -> set[int]:
    """The positions of the rows that name an unbacked symbol: exactly
    `rows_with(rows, (), UNBACKED_BYTES, symbol_start)` (a match of `u[0-9]` or `zuf[0-9]` whose
    byte before is not a word byte), found at about twice its speed. With the digits made 0 a
    match is an occurrence of `u0` or `zuf0`; each line's first one is found with the rest of its
    line, and only when its byte before is a word byte (rare) is the line searched on from the
    next byte. A row's answer depends on its own bytes only (a match cannot span the newline
    between rows, which is no word byte)."""
    joined = b"\n".join(rows).translate(_DIGITS_TO_0)
    offsets: list[int] = []
    for pattern, needle in _UNBACKED_LINES:
        if needle not in joined:
            continue
        for m in pattern.finditer(joined):
            at, end = m.span()
            while at > 0 and joined[at - 1] in _WORD:
                at = joined.find(needle, at + 1, end)
            if at >= 0:
                offsets.append(at)
    return rows_at(rows, offsets) if offsets else set()


def scope_pattern(names: set[bytes]):
    """A search for the rows naming (`"name":`) or taking as input (`{"n":`) one of `names`, and
    the test of a match. The names' common prefix goes into the pattern: a graph refers to other
    nodes a million times, to its subgraphs a few hundred. JSON escapes no character of an FX
    node name."""
    prefix = os.path.commonprefix(sorted(names)) or b""  # "" (of no names) as bytes
    pattern = re.compile(rb'"n(?:ame)?":"' + re.escape(prefix) + rb'([^"]*)"')
    return pattern, lambda _, m: prefix + m.group(1) in names


_STRING_TAIL = re.compile(rb'([^"]*)"')


def scope_rows(rows: list[bytes], names: set[bytes]) -> set[int]:
    """The positions of the rows that name or take as input one of `names`: exactly
    `rows_with(rows, (), *scope_pattern(names))`, found faster where the names have a common
    prefix. Then each `"PREFIX` is found with `bytes.find` (memchr speed; sre tests the pattern at
    every `"n`, and a graph has a reference per input), and matched there as the pattern would:
    the key before it (`"n":` or `"name":`), the rest of the string, the name; after a match the
    search goes on past its row's end, as `rows_with`'s does."""
    prefix = os.path.commonprefix(sorted(names)) or b""  # "" (of no names) as bytes
    if not prefix:
        return rows_with(rows, (), *scope_pattern(names))
    joined = b"\n".join(rows)
    quoted = b'"' + prefix
    find, tail = joined.find, _STRING_TAIL.match
    offsets: list[int] = []
    at = find(quoted)
    while at >= 0:
        m = tail(joined, at + len(quoted))
        if m is not None:
            key = (
                at - 4
                if at >= 4 and joined[at - 4 : at] == b'"n":'
                else at - 7
                if at >= 7 and joined[at - 7 : at] == b'"name":'
                else -1
            )
            if key >= 0 and prefix + m.group(1) in names:
                offsets.append(key)
                nl = find(b"\n", m.end())
                if nl < 0:
                    break
                at = find(quoted, nl + 1)
                continue
        at = find(quoted, at + 1)
    return rows_at(rows, offsets) if offsets else set()


def parent_path(path: str) -> str:
    """The path of the graph a nested subgraph belongs to ("" for the root): the walk hands each
    subgraph the scope of that graph, and the selection keeps that graph's rows that hand it on."""
    return path.rsplit("/", 1)[0] if "/" in path else ""


def scope_names(heads: Iterable[Mapping[str, Any]]) -> dict[str, set[bytes]]:
    """Per graph path, the parent-node names of its own subgraphs (from the subgraph heads): the
    rows of that graph that name or take them hand a scope on."""
    children: dict[str, set[bytes]] = {}
    for h in heads:
        path, parent = str(h.get("path") or ""), h.get("parent_node")
        if path and isinstance(parent, str):
            children.setdefault(parent_path(path), set()).add(parent.encode())
    return children


def kept_positions(
    heads: Sequence[Mapping[str, Any]],
    subs: list[list[bytes]],
    unbacked: Callable[[list[bytes]], set[int]] = unbacked_rows,
) -> list[list[int]]:
    """Per subgraph (heads decoded, rows undecoded), the positions of the rows the walk reads, in
    order. `unbacked` may be a memoized `unbacked_rows` (the reader's: consecutive passes repeat
    most rows)."""
    return [sorted(a | b) for a, b in _selections(heads, subs, unbacked)]


def _selections(
    heads: Sequence[Mapping[str, Any]], subs: list[list[bytes]], unbacked: Callable[[list[bytes]], set[int]]
) -> list[tuple[set[int], set[int]]]:
    """Per subgraph, the positions of the rows naming an unbacked symbol, and of those naming or
    taking one of its own subgraphs' parent nodes."""
    children = scope_names(heads)
    out = []
    for h, rows in zip(heads, subs):
        names = children.get(str(h.get("path") or ""))
        out.append((unbacked(rows), scope_rows(rows, names) if names else set()))
    return out


def _ref_names(value: Any, out: list[str]) -> None:
    """The names of the node references among the leaves of an encoded arg, in leaf order."""
    if isinstance(value, list):
        for v in value:
            _ref_names(v, out)
    elif isinstance(value, dict) and len(value) == 1:
        inner = value.get("dict")
        if "dict" in value and isinstance(inner, list):
            for kv in inner:
                if isinstance(kv, list) and len(kv) == 2:
                    _ref_names(kv[1], out)
        elif type(value.get("n")) is str:
            out.append(value["n"])


def row_refs(row: Mapping[str, Any]) -> list[str]:
    """The names of the nodes a row takes as input, args before kwargs, in leaf order."""
    out: list[str] = []
    _ref_names(row.get("args") or [], out)
    kwargs = row.get("kwargs")
    if isinstance(kwargs, dict):
        for v in kwargs.values():
            _ref_names(v, out)
    return out


def trim_row(row: Mapping[str, Any], names: set[str] | None = None) -> dict[str, Any]:
    """What the walk reads of a row: its name, op, symbols and bindings (`val` where it has no
    `syms`: the reader derives them from it) and, as `args`, its references to `names` (the
    subgraphs its graph hands a scope to: given for the rows that name one), in order. A stale
    use's value, which its finding shows, is read from the node table when there is one to show."""
    out = {k: row[k] for k in _KEPT_FIELDS if k in row}
    if "syms" not in row and "val" in row:
        out["val"] = row["val"]
    if names:
        refs = [n for n in row_refs(row) if n in names]
        if refs:
            out["args"] = [{"n": n} for n in refs]
    return out


def symbol_rows_payload(
    gid: str,
    table_payload: bytes,
    tables: Mapping[str, Any] | None = None,
    subs: list[tuple[bytes, list[bytes]]] | None = None,
) -> bytes | None:
    """The `gti_symbol_rows` payload of a `gti_nodes` payload (one row per line): the same layout,
    every subgraph head, and the kept rows trimmed (`trim_row`); None when the table is not laid
    out one row per line. `tables`: the table the payload encodes, where the caller has it (the
    capture): its rows are taken instead of decoding their lines. `subs`: the payload's
    `logformat.node_table_rows`, where the caller has them (else they are made here)."""
    graphs = kept_graphs(table_payload, tables, subs)
    return kept_payload(gid, graphs) if graphs is not None else None


def kept_payload(gid: str, graphs: list[dict[str, Any]]) -> bytes:
    """The `gti_symbol_rows` payload of `kept_graphs`."""
    return logformat.node_table_payload(gid, logformat.encode_node_table({"graphs": graphs}))


def kept_graphs(
    table_payload: bytes,
    tables: Mapping[str, Any] | None = None,
    subs: list[tuple[bytes, list[bytes]]] | None = None,
) -> list[dict[str, Any]] | None:
    """The subgraphs of `symbol_rows_payload` ({"path", "parent_node", "nodes"}, the kept rows
    trimmed), before they are encoded."""
    if subs is None:
        subs = logformat.node_table_rows(table_payload.split(b"\n"), table_payload)
    if subs is None:
        return None
    heads = [logformat.decode_sub_head(h) for h, _ in subs]
    given = tables.get("graphs") if tables is not None else None
    if not isinstance(given, list) or len(given) != len(subs):
        given = None
    children = scope_names(heads)
    graphs = []
    for k, (h, (_, lines), (named, scoped)) in enumerate(
        zip(heads, subs, _selections(heads, [x for _, x in subs], unbacked_rows))
    ):
        nodes = given[k]["nodes"] if given is not None else None
        row = (
            nodes.__getitem__
            if nodes is not None and len(nodes) == len(lines)
            else lambda i: logformat.decode_row(lines[i])
        )
        names = {n.decode() for n in children.get(str(h.get("path") or ""), ())}
        kept = [trim_row(row(i), names if i in scoped else None) for i in sorted(named | scoped)]
        graphs.append({"path": h.get("path"), "parent_node": h.get("parent_node"), "nodes": kept})
    return graphs


def scopes_payload(gid: str, graphs: Sequence[Mapping[str, Any]], symmap: Mapping[str, Any]) -> dict[str, Any]:
    """The `gti_symbol_scopes` payload: `scope_events` of the kept rows, and what of the graph's
    symbol map (`gti_symbols`) decides whether they say all the walk finds: how many renamings
    it has and how many unbacked symbols the ShapeEnv does not know."""
    info = symmap.get("symbols") or {}
    unknown = sum(1 for name, e in info.items() if is_unbacked(str(name)) and (e or {}).get("known") is False)
    return {
        "gid": gid,
        "renamings": len(symmap.get("renamings") or {}),
        "unknown": unknown,
        "graphs": scope_events(graphs),
    }


def scope_events(graphs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The `gti_symbol_scopes` summary of `kept_graphs` (or of a `gti_symbol_rows` payload's
    graphs): per subgraph, in order, where its rows first do what the stale-symbol walk looks at,
    as positions among its kept rows. `uses`: each unbacked symbol a row other than a placeholder
    names, at its first such row; `ph`: those placeholders name; `binds` and `ph_binds`: each
    unbacked symbol bound (`unbacked_bindings`) by a row other than a placeholder, or by a
    placeholder; `hands`: each name of a node handing a scope to a nested subgraph (a get_attr
    row of that name, or a row taking it as input), at its last such row. Symbols as the rows
    name them (the reader applies renamings, and uses this only where the map has none)."""
    out = []
    for g in graphs:
        uses: dict[str, int] = {}
        ph: dict[str, int] = {}
        binds: dict[str, int] = {}
        ph_binds: dict[str, int] = {}
        hands: dict[str, int] = {}
        for i, row in enumerate(g.get("nodes") or ()):
            placeholder = row.get("op") == "placeholder"
            for sym in row_symbols(row):
                if is_unbacked(sym):
                    (ph if placeholder else uses).setdefault(sym, i)
            for sym in row.get("unbacked_bindings") or ():
                if is_unbacked(str(sym)):
                    (ph_binds if placeholder else binds).setdefault(str(sym), i)
            if row.get("op") == "get_attr":
                hands[row["name"]] = i
            else:
                for n in row_refs(row):
                    hands[n] = i
        out.append(
            {"path": g.get("path"), "parent_node": g.get("parent_node"), "uses": uses, "ph": ph, "binds": binds}
            | {"ph_binds": ph_binds, "hands": hands}
        )
    return out
