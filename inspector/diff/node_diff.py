"""What a graph diff is made of, and how two aligned nodes compare: `NodeDiff`, `SubgraphDiff`,
`GraphDiff`, rendering a node or a value for a diff line, and `compare_rows` (args and kwargs leaf
by leaf, node references through the alignment, literals after rank normalization; metadata:
value, unbacked bindings, backward flag, recompute tag, constant descriptions; stack traces only
when asked). The diffs themselves are made by graph_diff.py (tables aligned structurally) and
anchored.py (tables with row digests and refs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from graphtrain_inspect.capture.shared.logformat import NodeRow
from graphtrain_inspect.inspector.diff.normalize import IDENTITY, GraphNormalizer
from graphtrain_inspect.inspector.diff.row_parts import Parts, same_frozen
from graphtrain_inspect.inspector.read.graphmodel import row_leaves

META_KEYS = ("val", "unbacked_bindings", "bwd", "recompute", "attr", "subgraph")


@dataclass
class NodeDiff:
    status: str  # same | changed | added | removed
    subgraph: str
    a: NodeRow | None
    b: NodeRow | None
    args: list[tuple[str, Any, Any]] = field(default_factory=list)  # (where, in a, in b)
    meta: list[tuple[str, Any, Any]] = field(default_factory=list)
    structural: bool = False  # target/op/arity differs or an input is another node

    @property
    def name(self) -> str:
        row = self.b if self.b is not None else self.a
        return row["name"] if row else "?"

    @property
    def names(self) -> tuple[str | None, str | None]:
        return (self.a["name"] if self.a else None, self.b["name"] if self.b else None)

    def summary(self) -> str:
        if self.status == "added":
            return f"+ {render_node(self.b)}"
        if self.status == "removed":
            return f"- {render_node(self.a)}"
        parts = [f"{w}: {_short(x)} -> {_short(y)}" for w, x, y in self.args + self.meta]
        na, nb = self.names
        name = nb if na == nb else f"{na} -> {nb}"
        return f"~ {name}: " + "; ".join(parts)


@dataclass
class SubgraphDiff:
    path: str
    status: str  # same | changed | added | removed
    nodes: list[NodeDiff]

    def changes(self) -> list[NodeDiff]:
        return [n for n in self.nodes if n.status != "same"]


@dataclass
class GraphDiff:
    a_label: str
    b_label: str
    a_gid: str | None
    b_gid: str | None
    subgraphs: list[SubgraphDiff]
    # `subgraphs` lists only changed nodes: every other node is on both sides, under its name, and
    # the same (checks' rank diffs of identical graphs, or of rows compared by position)
    unlisted_same: bool = False
    # with unlisted_same: None where every unlisted node has its name on both sides (the diff
    # paired rows by position); for a diff reduced to its changes (`only_changes`), the b name of
    # each matched node whose name differs, by (subgraph, a name)
    renamed: dict[tuple[str, str], str] | None = None

    def only_changes(self) -> "GraphDiff":
        """This diff with its unchanged nodes left out (`unlisted_same`, `renamed`): what the
        checks read of a diff, kept at a fraction of its size (a diff of two structurally
        different graphs lists every node of both)."""
        if self.unlisted_same:
            return self
        renamed: dict[tuple[str, str], str] = {}
        subs = []
        for sub in self.subgraphs:
            for n in sub.nodes:
                if n.a is not None and n.b is not None and n.a["name"] != n.b["name"]:
                    renamed[(sub.path, n.a["name"])] = n.b["name"]
            subs.append(SubgraphDiff(sub.path, sub.status, sub.changes()))
        return GraphDiff(self.a_label, self.b_label, self.a_gid, self.b_gid, subs, unlisted_same=True, renamed=renamed)

    @property
    def size(self) -> int:
        """What the diff holds: the nodes it lists and the names it maps."""
        return sum(len(sub.nodes) for sub in self.subgraphs) + len(self.renamed or ())

    @property
    def counts(self) -> dict[str, int]:
        c = {"added": 0, "removed": 0, "changed": 0}
        for sub in self.subgraphs:
            for n in sub.nodes:
                if n.status in c:
                    c[n.status] += 1
        return c

    @property
    def empty(self) -> bool:
        return all(n.status == "same" for sub in self.subgraphs for n in sub.nodes)

    @property
    def structural(self) -> bool:
        """Nodes added or removed, or an aligned node with another op/target/inputs."""
        for sub in self.subgraphs:
            if sub.status in ("added", "removed"):
                return True
            for n in sub.nodes:
                if n.status in ("added", "removed") or n.structural:
                    return True
        return False

    def changes(self) -> Iterator[NodeDiff]:
        for sub in self.subgraphs:
            yield from sub.changes()

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a_label,
            "b": self.b_label,
            "a_gid": self.a_gid,
            "b_gid": self.b_gid,
            "counts": self.counts,
            "changes": [
                {
                    "status": n.status,
                    "subgraph": n.subgraph or None,
                    "a": n.names[0],
                    "b": n.names[1],
                    "target": r.get("target") if (r := n.b or n.a) else None,
                    "args": [{"where": w, "a": x, "b": y} for w, x, y in n.args],
                    "meta": [{"where": w, "a": x, "b": y} for w, x, y in n.meta],
                }
                for n in self.changes()
            ],
        }


def _short(v: Any, n: int = 80) -> str:
    s = render_value(v)
    return s if len(s) <= n else s[: n - 3] + "..."


# ---------------------------------------------------------------------------------------------
# Rendering values and nodes as FX-like text


def render_value(v: Any) -> str:
    if isinstance(v, dict):
        if len(v) == 1:
            ((k, x),) = v.items()
            if k == "n":
                return str(x)
            if k == "dev":
                return f"device({x!r})"
            if k == "dtype":
                return f"torch.{x}"
            if k == "sym":
                return f"Sym({x})"
            if k == "float":
                return str(x)
            if k == "enum":
                return str(x)
            if k == "slice":
                return "slice(" + ", ".join(render_value(y) for y in x) + ")"
            if k == "dict":
                return "{" + ", ".join(f"{render_value(a)}: {render_value(b)}" for a, b in x) + "}"
            if k == "tensor":
                return f"tensor({render_val_meta(x)})"
        if "repr" in v:
            return str(v["repr"])
        if v.get("t") in ("tensor", "sym"):
            return render_val_meta(v)
        return "{" + ", ".join(f"{k}: {render_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(render_value(x) for x in v) + "]"
    return repr(v)


def render_val_meta(val: Any) -> str:
    if isinstance(val, dict):
        if val.get("t") == "sym":
            return f"Sym({val.get('expr')})"
        if val.get("t") == "tensor" or "dtype" in val:
            shape = ", ".join(str(d) for d in val.get("shape") or [])
            s = f"{val.get('dtype', '?')}[{shape}]"
            if val.get("stride") is not None:
                s += "[" + ", ".join(str(d) for d in val["stride"]) + "]"
            if val.get("device"):
                s += str(val["device"])
            if "value" in val:
                s += f" = {val['value']}"
            return s
    if isinstance(val, list):
        return "(" + ", ".join(render_val_meta(v) for v in val) + ")"
    return render_value(val)


def render_node(row: NodeRow | None) -> str:
    if row is None:
        return ""
    op = row.get("op")
    name = row.get("name")
    ann = f': "{render_val_meta(row["val"])}"' if row.get("val") is not None else ""
    if op == "placeholder":
        return f"{name}{ann} = placeholder"
    if op == "get_attr":
        return f"{name}{ann} = self.{row.get('target')}"
    if op == "output":
        return "return " + ", ".join(render_value(a) for a in row.get("args") or [])
    args = [render_value(a) for a in row.get("args") or []]
    args += [f"{k}={render_value(v)}" for k, v in (row.get("kwargs") or {}).items()]
    return f"{name}{ann} = {row.get('target')}({', '.join(args)})"


# ---------------------------------------------------------------------------------------------
# Comparing aligned nodes


def _leaf_map(row: NodeRow) -> dict[str, Any]:
    return dict(row_leaves(row))


_MISSING = object()


def compare_rows(
    a: NodeRow,
    b: NodeRow,
    name_map: dict[str, str],
    na: GraphNormalizer = IDENTITY,
    nb: GraphNormalizer = IDENTITY,
    *,
    meta: bool = True,
    stack: bool = False,
) -> tuple[list[tuple[str, Any, Any]], list[tuple[str, Any, Any]], bool]:
    """Differences of two aligned nodes: (arg changes, meta changes, structural?)."""
    pa, pb = Parts([a], na.leaf), Parts([b], nb.leaf)
    return compare_parts(0, 0, pa, pb, name_map, na, nb, meta=meta, stack=stack)


def compare_parts(
    i: int,
    j: int,
    pa: Parts,
    pb: Parts,
    name_map: dict[str, str],
    na: GraphNormalizer,
    nb: GraphNormalizer,
    *,
    meta: bool,
    stack: bool,
) -> tuple[list, list, bool]:
    a, b = pa.rows[i], pb.rows[j]
    ra, rb = tuple(zip(pa.wheres[i], pa.names[i])), tuple(zip(pb.wheres[j], pb.names[j]))
    same_refs = len(ra) == len(rb)
    if same_refs:
        for (w1, n1), (w2, n2) in zip(ra, rb):
            if w1 != w2 or name_map.get(n1) != n2:
                same_refs = False
                break
    if same_refs and pa.lits[i] == pb.lits[j] and (a == b or same_meta(a, b, stack)):
        return NO_CHANGES, NO_CHANGES, False
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
                args.append(
                    (
                        where,
                        {"n": x} if x is not None else _leaf_or_none(a, where),
                        {"n": y} if y is not None else _leaf_or_none(b, where),
                    )
                )
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
                if same_frozen(na.val(va), nb.val(vb)):
                    continue
            metas.append((k, va, vb))
        if stack and a.get("stack") != b.get("stack"):
            metas.append(("stack", a.get("stack"), b.get("stack")))
    return args, metas, structural


NO_CHANGES: list = []


def same_meta(a: Mapping[str, Any], b: Mapping[str, Any], stack: bool) -> bool:
    for k in META_KEYS:
        if a.get(k) != b.get(k):
            return False
    return not stack or a.get("stack") == b.get("stack")


def _leaf_or_none(row: NodeRow, where: str) -> Any:
    return _leaf_map(row).get(where)
