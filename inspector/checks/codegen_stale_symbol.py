"""stale-unbacked-symbol in generated code (`"layer": "codegen"`): a symbol (`u0`, `s77` ...) that a
function of Inductor's wrapper uses where nothing in its scope binds it (`read.code_scopes`: the
code parsed, never run). The function raises `NameError` at its first call: a `torch.cond` or
`while_loop` branch function, a subgraph's code, or the wrapper's own `call`. An error, whatever
the ranks: the code cannot run.

Blamed on the compile that generated the code, with the line, the function and the kernel the
line feeds (the kernel called on it, or the kernel a buffer allocated on it is handed to), and
the FX node: in a subgraph's function (named after the subgraph, as Inductor names it) the
kernel's post-grad node of that subgraph, else the higher-order op that runs the subgraph; in the
wrapper's own functions the kernel's node. Code each rank generated alike is one finding.
"""

from __future__ import annotations

import re
from typing import Any

from graphtrain_inspect.capture.shared.symbol_rows import row_refs
from graphtrain_inspect.inspector.checks.codegen_sites import (
    CodeSite,
    aligned,
    clip_code,
    code_evidence_lines,
    finding,
    fx_node,
)
from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.checks.findings import Finding
from graphtrain_inspect.inspector.read.code_scopes import UnboundUse, unbound_symbols
from graphtrain_inspect.inspector.read.graphmodel import GraphTables, SubGraph
from graphtrain_inspect.inspector.read.output_code import Kernel

KIND = "stale-unbacked-symbol"
DESCRIPTION = "symbols generated code uses where nothing in its function's scope binds them (NameError when it runs)"

_ASSIGNED = re.compile(r"^\s*([A-Za-z_]\w*)\s*=(?!=)")


def unbound_in(ctx: CheckContext, site: CodeSite) -> list[UnboundUse]:
    """The code's unbound symbol uses, found once per distinct code in a capture (ranks that
    generated the same code share its oid)."""
    key = ("code_unbound", -1, site.oc.oid)
    got = ctx.cap._derived.get(key)
    if got is None:
        got = ctx.cap._derived[key] = unbound_symbols(site.text or "")
    return got


def run(ctx: CheckContext) -> list[Finding]:
    out: list[Finding] = []
    for sites in aligned(ctx).values():
        hits: dict[tuple[str, str], list[tuple[int, UnboundUse]]] = {}
        for r, site in sorted(sites.items()):
            for u in unbound_in(ctx, site):
                hits.setdefault((u.function, u.name), []).append((r, u))
        for found in hits.values():
            ranks = [r for r, _ in found]
            r, u = found[0]
            out.append(_finding(ctx, {x: sites[x] for x in ranks}, sites[r], u))
    return out


def _finding(ctx: CheckContext, sites: dict[int, CodeSite], site: CodeSite, u: UnboundUse) -> Finding:
    first, _ = u.statements[0] if u.statements else (u.line, u.line)
    line_no = first
    kernel = None
    for a, b in u.statements or [(u.line, u.line)]:
        kernel = _kernel_fed(site, a, b)
        if kernel is not None:
            line_no = a
            break
    tables = ctx.tables(site.oc.rank, site.oc.graph) if site.oc.graph else None
    sub = _subgraph_of(tables, u.function)
    hop = _hop_node(tables, sub)
    fx = _fx(ctx, sites, site, kernel, sub)
    node = fx["fx_node"] or hop
    raw = site.lines[line_no] if line_no < len(site.lines) else ""
    at = re.search(rf"\b{u.name}\b", raw) if line_no != u.line else None
    col = u.col if line_no == u.line else at.start() if at is not None else -1
    what = "unbacked symbol" if u.name.startswith(("u", "zuf")) else "symbol"
    where = f"generated function {u.function}" + (f" (subgraph {sub.path} of {hop})" if sub is not None and hop else "")
    elsewhere = ", ".join(f"{fn} line {ln + 1}" for fn, ln in u.bound_in[:3])
    msg = (
        f"{what} {u.name} in {where} is bound by nothing in its scope"
        + (f" (bound in {elsewhere})" if elsewhere else "")
        + f": it raises NameError at its first call; line {line_no + 1}"
        + (f" feeds kernel {kernel.name}" if kernel is not None else "")
        + (f", computed from FX node {fx['fx_node']}" if fx["fx_node"] else "")
    )
    ev: dict[str, Any] = {
        "symbol": u.name,
        "function": u.function,
        "kernel": kernel.name if kernel is not None else None,
        "line": line_no + 1,
        "column": col + 1 if col >= 0 else None,
        "code": clip_code(raw, max(col, 0), max(col, 0) + len(u.name)),
        "lines": [x + 1 for x in u.lines[:20]],
        "uses": len(u.lines),
        "bound_in": [{"function": fn, "line": ln + 1} for fn, ln in u.bound_in],
        "subgraph": sub.path if sub is not None else None,
        "hop_node": hop,
        **fx,
    }
    f = finding(KIND, "error", msg, sites, sorted(sites), node=node, evidence=ev)
    if sub is not None and fx["fx_node"]:
        f.subgraph = sub.path
    return f


def _kernel_fed(site: CodeSite, first: int, last: int) -> Kernel | None:
    """The kernel the statement on lines first..last calls, or, for `buf = ...` (an allocation),
    the first kernel a later line of the same block hands `buf` to."""
    names = {k.name: k for k in site.kernels}
    if not names:
        return None
    lines = site.lines
    calls = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")(?:\.run)?\(")
    for i in range(first, min(last + 1, len(lines))):
        m = calls.search(lines[i])
        if m is not None:
            return names[m.group(1)]
    m = _ASSIGNED.match(lines[first]) if first < len(lines) else None
    if m is None:
        return None
    buf = re.compile(r"\b" + re.escape(m.group(1)) + r"\b")
    indent = len(lines[first]) - len(lines[first].lstrip())
    for i in range(last + 1, len(lines)):
        line = lines[i]
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            break  # the block ended
        k = calls.search(line)
        if k is not None and buf.search(line, k.end()):
            return names[k.group(1)]
    return None


def _subgraph_of(tables: GraphTables | None, function: str) -> SubGraph | None:
    """The post-grad graph's subgraph a generated function was made from: Inductor names a
    subgraph's function after the subgraph (nested ones joined by `_`)."""
    if tables is None:
        return None
    name = function.rsplit(".", 1)[-1]
    for g in tables.graphs:
        if g.path and name in (g.path, g.path.replace("/", "_")):
            return g
    for g in tables.graphs:
        if g.path and g.path.rsplit("/", 1)[-1] == name:
            return g
    return None


def _hop_node(tables: GraphTables | None, sub: SubGraph | None) -> str | None:
    """The node of the parent graph that runs the subgraph (the cond, while_loop ... taking its
    get_attr as input)."""
    if tables is None or sub is None:
        return None
    parent = tables.subgraph(sub.path.rpartition("/")[0])
    if parent is None or not sub.parent_node:
        return None
    for row in parent.nodes:
        if row.get("op") == "call_function" and sub.parent_node in row_refs(row):
            return str(row["name"])
    return sub.parent_node


def _fx(
    ctx: CheckContext, sites: dict[int, CodeSite], site: CodeSite, kernel: Kernel | None, sub: SubGraph | None
) -> dict[str, Any]:
    """The kernel's FX node as the other codegen checks name it; in a subgraph's function, among
    the kernel's nodes the one of that subgraph, with its stack."""
    if sub is None:
        return fx_node(ctx, sites, kernel)
    names, mapping = site.kernel_nodes(kernel)
    out: dict[str, Any] = {"fx_node": None, "fx_nodes": names, "source_node": None, "fx_stack": None}
    for n in names:
        row = sub.node(n)
        if row is not None and row.get("op") not in ("placeholder", "output", "get_attr"):
            out.update(fx_node=n, source_node=mapping.get(n), fx_stack=row.get("stack"))
            break
    return out


def evidence_lines(f: Finding) -> list[str]:
    """The finding's evidence as lines of text (`check`, `report`, the TUI and SARIF show them)."""
    return code_evidence_lines(f)
