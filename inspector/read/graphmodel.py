"""The node model every inspector computation works on: node tables of one graph and its subgraphs.

Rows are the plain dicts of the `gti_nodes` schema (docs/log-format.md), whether they come from a
capture's node table or were parsed from graph text (`fxtext`): no per-node objects, so a 100k
node graph costs what its JSON costs. This module also derives what a capture stores beside the
node table (symbol map, device table) for graphs that only have text. No torch here.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterator, Mapping, TypeGuard

from graphtrain_inspect.capture.logformat import NodeRow
from graphtrain_inspect.capture.symbol_usage import row_symbols, symbol_usage


class SubGraph:
    """One graph of a GraphModule: the root (`path == ""`) or a nested subgraph."""

    __slots__ = ("path", "parent_node", "nodes", "_index")

    def __init__(self, path: str, parent_node: str | None, nodes: list[NodeRow]):
        self.path = path
        self.parent_node = parent_node
        self.nodes = nodes
        self._index: dict[str, int] | None = None

    def index_of(self, name: str) -> int | None:
        if self._index is None:
            self._index = {row["name"]: i for i, row in enumerate(self.nodes)}
        return self._index.get(name)

    def node(self, name: str) -> NodeRow | None:
        i = self.index_of(name)
        return None if i is None else self.nodes[i]

    def __len__(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        return f"SubGraph({self.path!r}, {len(self.nodes)} nodes)"


class GraphTables:
    """Node tables of one graph id on one rank. `source` is "table" (captured) or "text" (parsed)."""

    def __init__(self, gid: str, graphs: list[SubGraph], *, source: str = "table", warnings: list[str] | None = None):
        self.gid = gid
        self.graphs = graphs
        self.source = source
        self.warnings = warnings or []
        self._by_path = {g.path: g for g in graphs}

    @classmethod
    def from_payload(
        cls, gid: str, payload: dict[str, Any], *, source: str = "table", warnings: list[str] | None = None
    ) -> "GraphTables":
        graphs = []
        subs = payload.get("graphs")
        for g in subs if isinstance(subs, list) else []:
            if not isinstance(g, dict):
                continue
            rows = g.get("nodes")
            # rows parsed from code nest no deeper than Python's parser reads (200 brackets), which
            # every reader walks: only a captured table's rows are looked through for depth
            line = b"" if source == "text" else None
            nodes = [r for r in rows if row_ok(r, line)] if isinstance(rows, list) else []
            parent = g.get("parent_node")
            graphs.append(SubGraph(str(g.get("path") or ""), parent if isinstance(parent, str) else None, nodes))
        if not graphs:
            graphs = [SubGraph("", None, [])]
        return cls(gid, graphs, source=source, warnings=warnings)

    @property
    def root(self) -> SubGraph:
        return self._by_path.get("") or self.graphs[0]

    def subgraph(self, path: str | None) -> SubGraph | None:
        return self._by_path.get(path or "")

    @property
    def paths(self) -> list[str]:
        return [g.path for g in self.graphs]

    @property
    def node_count(self) -> int:
        return sum(len(g.nodes) for g in self.graphs)

    def iter_nodes(self) -> Iterator[tuple[SubGraph, NodeRow]]:
        for g in self.graphs:
            for row in g.nodes:
                yield g, row

    def __repr__(self) -> str:
        return f"GraphTables({self.gid!r}, {self.node_count} nodes, {len(self.graphs)} graphs, {self.source})"


# The types the `gti_nodes` schema gives a row's keys. A log is input like any other: a row whose
# name or op is not a string is dropped, a key of another type is removed, so every reader below
# can rely on the schema.
_ROW_TYPES: dict[str, Any] = {
    "target": (str, type(None)),
    "args": list,
    "kwargs": dict,
    "syms": list,
    "unbacked_bindings": dict,
    "stack": str,
    "created": str,
    "bwd": bool,
    "subgraph": bool,
    "attr": dict,
    "val": (dict, list, str, int, float, bool, type(None)),
}
_VAL_TYPES: dict[str, Any] = {
    "t": str,
    "dtype": str,
    "shape": list,
    "stride": list,
    "device": str,
    "type": str,
    "expr": str,
}


# How deep a row's values may nest (args, kwargs, val, attr): an FX argument nests a few levels
# (a list of lists of nodes); a JSON parser reads up to 1024 and every reader that walks a value
# recurses (normalizing, aligning, rendering, `str` itself). What nests deeper is cut there.
MAX_NESTING = 64
NESTED_TOO_DEEP: dict[str, str] = {"obj": "nested", "repr": f"<nested deeper than {MAX_NESTING} levels: not read>"}


def _cut_too_deep(value: Any) -> bool:
    """Replace, in place, every list or object `value` holds at depth MAX_NESTING with
    NESTED_TOO_DEEP (a literal every reader shows as its repr); True if any was. Iterative: the
    walk that bounds the depth cannot itself recurse too deep."""
    cut = False
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        items = enumerate(v) if type(v) is list else v.items()
        for k, x in list(items):
            if type(x) is list or type(x) is dict:
                if depth + 1 >= MAX_NESTING:
                    v[k] = dict(NESTED_TOO_DEEP)
                    cut = True
                else:
                    stack.append((x, depth + 1))
    return cut


def row_ok(r: Any, line: bytes | None = None) -> TypeGuard[NodeRow]:
    """Whether `r` is a row (a dict with a string name and op), its keys of other types than the
    schema's removed and values nested past MAX_NESTING cut, in place. `line`: the JSON it was
    decoded from, where the caller has it: a line with fewer brackets than MAX_NESTING cannot nest
    that deep, so only the rare row with many is walked."""
    if not isinstance(r, dict) or not isinstance(r.get("name"), str) or not isinstance(r.get("op"), str):
        return False
    if line is None or line.count(b"[") + line.count(b"{") >= MAX_NESTING:
        _cut_too_deep(r)
    for k, t in _ROW_TYPES.items():
        if k in r and not isinstance(r[k], t):
            del r[k]
    if "syms" in r:
        r["syms"] = [x for x in r["syms"] if isinstance(x, str)]
    if "unbacked_bindings" in r:
        r["unbacked_bindings"] = {k: v for k, v in r["unbacked_bindings"].items() if isinstance(k, str)}
    v = r.get("val")
    for item in v if isinstance(v, list) else [v]:
        if isinstance(item, dict):
            for k, t in _VAL_TYPES.items():
                if k in item and not isinstance(item[k], t):
                    del item[k]
    return True


# ---------------------------------------------------------------------------------------------
# Values inside rows


def iter_leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, leaf) for every leaf of an encoded arg: literals, one-key objects, node refs."""
    if isinstance(value, list):
        for i, v in enumerate(value):
            yield from iter_leaves(v, f"{path}[{i}]")
    elif isinstance(value, dict) and "dict" in value and len(value) == 1 and isinstance(value["dict"], list):
        for kv in value["dict"]:
            if isinstance(kv, list) and len(kv) == 2:
                yield from iter_leaves(kv[1], f"{path}{{{_key_text(kv[0])}}}")
    else:
        yield path, value


def _key_text(k: Any) -> str:
    return k if isinstance(k, str) else repr(k)


def row_leaves(row: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """Leaves of a node's args and kwargs, paths like `args[1][0]` and `kwargs.device`."""
    yield from iter_leaves(row.get("args") or [], "args")
    for k, v in (row.get("kwargs") or {}).items():
        yield from iter_leaves(v, f"kwargs.{k}")


def is_ref(v: Any) -> bool:
    """A reference to another node: `{"n": NAME}` with a string name (anything else under "n"
    in a damaged or hand-made table is a literal, never a name to look up)."""
    return isinstance(v, dict) and len(v) == 1 and type(v.get("n")) is str


def device_of_leaf(v: Any) -> str | None:
    """The device a leaf names: `{"dev": "cuda:1"}` or a plain string like "cuda:1"."""
    if isinstance(v, dict) and len(v) == 1 and "dev" in v:
        return str(v["dev"])
    if isinstance(v, str) and (
        v == "cuda" or re.fullmatch(r"(cuda|xpu|mps|hpu|npu|mtia|privateuseone|meta|cpu):\d+", v)
    ):
        return v
    return None


def split_device(dev: str | None) -> tuple[str | None, int | None]:
    if not dev:
        return None, None
    typ, _, idx = dev.partition(":")
    return typ, int(idx) if idx.isdigit() else None


# ---------------------------------------------------------------------------------------------
# Derived tables for graphs that have only text


def derive_devices(tables: GraphTables, own_device: str | None = None) -> dict[str, Any]:
    """A `gti_devices`-shaped table from node rows; `own_device` inferred from inputs if not given."""
    literals = []
    values = []
    for g, row in tables.iter_nodes():
        for where, leaf in row_leaves(row):
            dev = device_of_leaf(leaf)
            if dev is not None:
                literals.append(
                    {"graph": g.path, "node": row["name"], "target": row.get("target"), "where": where, "device": dev}
                )
        val = row.get("val")
        if row["op"] == "placeholder" and isinstance(val, dict) and val.get("t") == "tensor" and val.get("device"):
            values.append({"graph": g.path, "node": row["name"], "kind": "input", "device": val["device"]})
        elif row["op"] == "get_attr":
            attr = row.get("attr")
            if isinstance(attr, dict) and attr.get("device"):
                kind = "parameter" if attr.get("param") else "constant"
                values.append({"graph": g.path, "node": row["name"], "kind": kind, **attr})
            elif isinstance(val, dict) and val.get("t") == "tensor" and val.get("device") and not row.get("subgraph"):
                values.append(
                    {
                        "graph": g.path,
                        "node": row["name"],
                        "kind": "constant",
                        "device": val["device"],
                        "dtype": val.get("dtype"),
                        "shape": val.get("shape"),
                    }
                )
    if own_device is None:
        own_device = infer_own_device(tables)
    return {
        "own_device": own_device,
        "local_rank": None,
        "cuda_visible_devices": None,
        "literals": literals,
        "values": values,
        "derived": True,
    }


def infer_own_device(tables: GraphTables) -> str | None:
    """The most common accelerator device of the root's inputs, else "cpu" if inputs are on cpu."""
    counts: Counter[str] = Counter()
    for row in tables.root.nodes:
        val = row.get("val")
        if row["op"] == "placeholder" and isinstance(val, dict) and val.get("t") == "tensor":
            dev = val.get("device")
            if dev:
                counts[dev] += 1
    accel = [(n, d) for d, n in counts.items() if not d.startswith("cpu") and not d.startswith("meta")]
    if accel:
        return max(accel)[1]
    return "cpu" if counts else None


def derive_symbols(tables: GraphTables) -> dict[str, Any]:
    """A `gti_symbols`-shaped map from node rows (no ShapeEnv: `shape_env` false)."""
    symbols = symbol_usage(((g.path, g.nodes) for g in tables.graphs), row_symbols)
    return {"shape_env": False, "symbols": symbols, "derived": True}
