"""Where each symbol of a graph is bound, taken as input and used, from node-table rows.

One definition for the capture (which adds what the ShapeEnv knows) and the inspector (which
derives the same map for graphs known only as text). Torch-free: rows are the `gti_nodes` schema.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

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
