"""Where each symbol of a graph is bound, taken as input and used, from node-table rows.

One definition for the capture (which adds what the ShapeEnv knows) and the inspector (which
derives the same map for graphs known only as text). Torch-free: rows are the `gti_nodes` schema.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Mapping

# Symbols of torch's ShapeEnv as they print: s0 (backed), u0 (unbacked), ps0, zf0, zuf0 ...
SYMBOL_RE = re.compile(r"\b(?:s|u|ps|zf|zuf|c|zb|ub)\d+\b")

# Cap on per-symbol use lists: a symbol used by every node of a 200k-node graph would
# otherwise dominate the log; the count is kept exactly.
MAX_USES_LISTED = 200


def is_unbacked(name: str) -> bool:
    # torch's SymT prefixes: "u" unbacked ints, "zuf" unbacked floats; backed ones are s, ps, ...
    return name.startswith("u") or name.startswith("zuf")


def symbol_usage(
    graphs: Iterable[tuple[str, Iterable[Mapping[str, Any]]]],
    symbols_of: Callable[[Mapping[str, Any]], Iterable[str]] = lambda row: row.get("syms", ()),
) -> dict[str, dict[str, Any]]:
    """{symbol: {unbacked, bound_by, inputs, used_by, uses}} over (graph path, rows) pairs."""
    symbols: dict[str, dict[str, Any]] = {}

    def entry(name: str) -> dict[str, Any]:
        e = symbols.get(name)
        if e is None:
            e = symbols[name] = {"unbacked": is_unbacked(name), "bound_by": [], "inputs": [], "used_by": [], "uses": 0}
        return e

    for path, rows in graphs:
        for row in rows:
            where = {"graph": path, "node": row["name"]}
            for s in row.get("unbacked_bindings") or ():
                entry(s)["bound_by"].append(where)
            syms = symbols_of(row)
            if row["op"] == "placeholder":
                for s in syms:
                    entry(s)["inputs"].append(where)
            else:
                for s in syms:
                    e = entry(s)
                    e["uses"] += 1
                    if len(e["used_by"]) < MAX_USES_LISTED:
                        e["used_by"].append(where)
    return symbols


def val_symbols(val: Any) -> list[str]:
    """The symbols an encoded value names (a symbolic scalar's expression, a tensor's shape and
    stride), sorted."""
    found: set[str] = set()
    _collect_syms(val, found)
    return sorted(found)


def _collect_syms(val: Any, found: set[str]) -> None:
    if isinstance(val, dict):
        if val.get("t") == "sym":
            found.update(SYMBOL_RE.findall(str(val.get("expr", ""))))
        elif val.get("t") == "tensor":
            for d in list(val.get("shape") or ()) + list(val.get("stride") or ()):
                if isinstance(d, str):
                    found.update(SYMBOL_RE.findall(d))
    elif isinstance(val, list):
        for v in val:
            _collect_syms(v, found)


def row_symbols(row: Mapping[str, Any]) -> list[str]:
    """A row's symbols: its `syms`, else those its value names (a table parsed from text)."""
    syms = row.get("syms")
    if syms is not None:
        return list(syms)
    return val_symbols(row.get("val"))
