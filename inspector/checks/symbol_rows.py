"""The unbacked-symbol map of one graph as table rows, stale symbols marked.

    rows = symbol_rows(cap.symbols(rank, gid), cap.node_table(rank, gid))

A symbol is stale when `graphtrain_inspect.inspector.checks.stale_unbacked_symbol` finds it in a node that
nothing in scope binds (the same rule as `check`), or when the capture's ShapeEnv does not know it. No textual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphtrain_inspect.capture.shared.symbol_usage import is_unbacked
from graphtrain_inspect.inspector.read.graphmodel import GraphTables


@dataclass
class SymbolRow:
    symbol: str
    unbacked: bool
    bound_by: list[str]
    inputs: list[str]
    used_by: list[str]
    uses: int
    range: str
    known: bool | None
    replacement: str | None
    stale: str | None  # why it is stale, or None
    first_node: tuple[str, str] | None  # (subgraph, node) to jump to

    @property
    def status(self) -> str:
        return "STALE" if self.stale else ("unknown" if self.known is False else "ok")


def _where(w: Any) -> str:
    if not isinstance(w, dict):
        return str(w)
    g = w.get("graph") or ""
    return f"{g}:{w.get('node')}" if g else str(w.get("node"))


def _range(r: Any) -> str:
    if isinstance(r, (list, tuple)) and len(r) == 2:
        return f"[{r[0]}, {r[1]}]"
    return "" if r is None else str(r)


def _sym_key(name: str) -> tuple:
    head = name.rstrip("0123456789")
    tail = name[len(head) :]
    return (head, int(tail) if tail else -1, name)


def symbol_rows(symmap: dict[str, Any] | None, tables: GraphTables | None) -> list[SymbolRow]:
    if not isinstance(symmap, dict):
        return []
    stale: dict[str, str] = {}
    if tables is not None:
        from graphtrain_inspect.inspector.checks.stale_unbacked_symbol import stale_symbols

        for o in stale_symbols(tables, symmap):
            s = o.evidence.get("symbol")
            if isinstance(s, str) and s not in stale:
                stale[s] = o.message
    rows = []
    for name, e in sorted((symmap.get("symbols") or {}).items(), key=lambda kv: _sym_key(kv[0])):
        if not isinstance(e, dict):
            continue
        bound = [_where(w) for w in e.get("bound_by") or []]
        inputs = [_where(w) for w in e.get("inputs") or []]
        used = [_where(w) for w in e.get("used_by") or []]
        first = None
        for w in (e.get("bound_by") or []) + (e.get("inputs") or []) + (e.get("used_by") or []):
            if isinstance(w, dict) and w.get("node"):
                first = (w.get("graph") or "", str(w["node"]))
                break
        rows.append(
            SymbolRow(
                symbol=name,
                unbacked=bool(e.get("unbacked", is_unbacked(name))),
                bound_by=bound,
                inputs=inputs,
                used_by=used,
                uses=int(e.get("uses") or len(used)),
                range=_range(e.get("range")),
                known=e.get("known"),
                replacement=e.get("replacement"),
                stale=stale.get(name),
                first_node=first,
            )
        )
    return rows
