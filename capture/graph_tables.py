"""Structured views of one FX GraphModule, as JSON-able dicts: node table, symbol map, device table.

Runs inside training workers (torch + stdlib only). Every nested GraphModule reachable through
get_attr or call_module (cond branches, flex_attention score/mask mods, invoke_subgraph bodies)
gets its own table, named by its path from the root ("" for the root, "true_graph_0",
"outer/inner"). The schemas are documented in docs/log-format.md; inspector/ reads them.
"""

from __future__ import annotations

import enum
import inspect
import math
import operator
import os
import sys
from typing import Any, Collection, Iterator, Sequence

import torch
import torch.fx

from graphtrain_inspect.capture import pass_sites
from graphtrain_inspect.capture.shared.logformat import NodeRow
from graphtrain_inspect.capture.shared.symbol_usage import symbol_usage

# Constants at most this many elements have their values recorded (a baked rank shows here).
SMALL_VALUE_NUMEL = 16

_PRINT_READABLE_KW: dict[str, Any] | None = None


def readable_code(gm: torch.fx.GraphModule) -> str:
    """print_readable with devices and strides where this torch supports them."""
    global _PRINT_READABLE_KW
    if _PRINT_READABLE_KW is None:
        params = inspect.signature(gm.print_readable).parameters
        _PRINT_READABLE_KW = {k: True for k in ("include_stride", "include_device") if k in params}
    return gm.print_readable(print_output=False, **_PRINT_READABLE_KW)


def iter_graph_modules(
    gm: torch.fx.GraphModule, path: str = ""
) -> Iterator[tuple[str, torch.fx.GraphModule, str | None]]:
    """(path, module, name of the node in the parent that refers to it) for gm and every nested graph."""
    yield path, gm, None
    seen: set[int] = {id(gm)}
    yield from _nested(gm, path, seen)


def _nested(
    gm: torch.fx.GraphModule, path: str, seen: set[int]
) -> Iterator[tuple[str, torch.fx.GraphModule, str | None]]:
    for node in gm.graph.nodes:
        if node.op not in ("get_attr", "call_module"):
            continue
        sub = _resolve_attr(gm, node.target)
        if isinstance(sub, torch.fx.GraphModule) and id(sub) not in seen:
            seen.add(id(sub))
            sub_path = f"{path}/{node.target}" if path else str(node.target)
            yield sub_path, sub, node.name
            yield from _nested(sub, sub_path, seen)


def _resolve_attr(gm: torch.nn.Module, target: object) -> Any:
    obj: Any = gm
    for part in str(target).split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


# ---------------------------------------------------------------------------------------------
# Literal encoding: JSON keeps int/float/bool/str/None/lists; everything else is a one-key dict.


def target_name(target: Any) -> str:
    if isinstance(target, str):
        return target
    if isinstance(target, torch._ops.OpOverload):
        return str(target)  # aten.add.Tensor, _c10d_functional.all_gather_into_tensor.default
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order.{target.name()}"
    mod = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
    if mod in ("_operator", "operator", "builtins"):
        return f"{mod.lstrip('_')}.{name}"
    return f"{mod}.{name}" if mod else name


def encode_arg(a: Any) -> Any:
    if a is None or isinstance(a, (bool, int, str)):
        return a
    if isinstance(a, float):
        return a if math.isfinite(a) else {"float": repr(a)}
    if isinstance(a, torch.fx.Node):
        return {"n": a.name}
    if isinstance(a, (list, tuple, torch.Size)):
        return [encode_arg(x) for x in a]
    if isinstance(a, dict):
        return {"dict": [[encode_arg(k), encode_arg(v)] for k, v in a.items()]}
    if isinstance(a, torch.device):
        return {"dev": str(a)}
    if isinstance(a, torch.dtype):
        return {"dtype": str(a).removeprefix("torch.")}
    if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return {"sym": str(a.node.expr)}
    if isinstance(a, slice):
        return {"slice": [encode_arg(a.start), encode_arg(a.stop), encode_arg(a.step)]}
    if isinstance(a, (torch.memory_format, torch.layout)):
        return {"enum": str(a)}
    if isinstance(a, enum.Enum):
        return {"enum": f"{type(a).__name__}.{a.name}"}
    if isinstance(a, torch.Tensor):
        return {"tensor": tensor_desc(a)}
    return {"obj": type(a).__qualname__, "repr": repr(a)[:200]}


def _dim(d: Any) -> Any:
    if isinstance(d, int):
        return d
    if isinstance(d, torch.SymInt):
        expr = d.node.expr
        return int(expr) if expr.is_number else str(expr)
    return str(d)


def tensor_desc(t: torch.Tensor) -> dict[str, Any]:
    desc: dict[str, Any] = {
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": [_dim(d) for d in t.shape],
        "device": str(t.device),
    }
    try:
        if t.layout == torch.strided:
            desc["stride"] = [_dim(s) for s in t.stride()]
    except Exception:  # noqa: BLE001 - sparse/nested tensors have no strides
        pass
    return desc


def encode_val(v: Any) -> Any:
    """meta['val'] / example_value: tensors and symbolic scalars described, containers kept."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"float": repr(v)}
    if isinstance(v, torch.Tensor):
        return {"t": "tensor", **tensor_desc(v)}
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return {"t": "sym", "type": type(v).__name__, "expr": str(v.node.expr)}
    if isinstance(v, (list, tuple)):
        return [encode_val(x) for x in v]
    return {"t": "obj", "type": type(v).__qualname__}


def _free_symbols(v: Any) -> Collection[Any]:
    from torch.fx.experimental.symbolic_shapes import free_symbols

    try:
        return free_symbols(v)
    except Exception:  # noqa: BLE001 - values free_symbols does not understand have none we can see
        return set()


def _node_val(node: torch.fx.Node) -> Any:
    meta = node.meta
    if "val" in meta:
        return meta["val"]
    return meta.get("example_value")


def last_frame(stack: Any) -> str | None:
    """The innermost 'File "...", line N, in fn' of a stack_trace outside torch itself (the
    user's line: make_fx's traces end inside torch.nn / functional collectives), else the
    innermost; with its code line."""
    if not isinstance(stack, str) or not stack:
        return None
    lines = [l.strip() for l in stack.strip().splitlines() if l.strip()]
    innermost = None
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("File "):
            code = lines[i + 1] if i + 1 < len(lines) and not lines[i + 1].startswith("File ") else ""
            frame = f"{lines[i]} | {code}" if code else lines[i]
            if not lines[i].startswith(f'File "{pass_sites.TORCH_DIR}'):
                return frame
            innermost = innermost or frame
    return innermost or lines[-1][:300]


def _is_backward(meta: dict) -> bool:
    return bool(meta.get("autograd_backward")) or meta.get("partitioner_tag") == "is_backward"


def _keystr(kp: Any) -> str:
    try:
        return torch.utils._pytree.keystr(kp)
    except Exception:  # noqa: BLE001
        return repr(kp)


# ---------------------------------------------------------------------------------------------
# The node table


def node_row(gm: torch.fx.GraphModule, node: torch.fx.Node) -> NodeRow:
    meta = node.meta
    row: NodeRow = {
        "name": node.name,
        "op": node.op,
        "target": target_name(node.target),
        "args": encode_arg(node.args),
        "kwargs": {k: encode_arg(v) for k, v in node.kwargs.items()},
    }
    val = _node_val(node)
    if val is not None:
        row["val"] = encode_val(val)
        syms = _free_symbols(val)
        if syms:
            row["syms"] = sorted(str(s) for s in syms)
    ub = meta.get("unbacked_bindings")
    if ub:
        row["unbacked_bindings"] = {str(s): _keystr(kp) for s, kp in ub.items()}
    frame = last_frame(meta.get("stack_trace"))
    if frame:
        row["stack"] = frame
    else:
        made = pass_sites.site_of(node)  # a node a pass made: the pass's line that made it
        if made:
            row["created"] = made
    if _is_backward(meta):
        row["bwd"] = True
    if meta.get("recompute") is not None:
        row["recompute"] = str(meta["recompute"])
    if node.op == "get_attr":
        attr = _resolve_attr(gm, node.target)
        if isinstance(attr, torch.fx.GraphModule):
            row["subgraph"] = True
        elif isinstance(attr, torch.Tensor):
            row["attr"] = _constant_desc(attr)
    return row


def _constant_desc(t: torch.Tensor) -> dict[str, Any]:
    desc = tensor_desc(t)
    desc["param"] = isinstance(t, torch.nn.Parameter)
    from torch._subclasses.fake_tensor import FakeTensor

    if not isinstance(t, FakeTensor) and t.numel() <= SMALL_VALUE_NUMEL and t.device.type != "meta":
        try:
            desc["value"] = t.detach().cpu().flatten().tolist()
        except Exception:  # noqa: BLE001
            pass
    return desc


# A node's fields that its row depends on, read in one C call (the fingerprint walk's cost is
# mostly these reads)
_NODE_FIELDS = operator.attrgetter("meta", "op", "name", "target", "_args", "_kwargs")


def row_inputs(gm: torch.fx.GraphModule, node: torch.fx.Node) -> tuple:
    """What a node's row depends on, as the objects themselves: where every one is the very same
    object (`same_objects`) the row is the same. FX replaces a node's args/kwargs tuples (never
    mutates them) on every change, and passes replace meta values rather than mutate them, so
    identities tell what changed; never ==, which on a SymInt or FakeTensor would compute or add
    guards. Whoever keeps the tuple keeps the objects, so no id is reused meanwhile."""
    meta, op, name, target, args, kwargs = _NODE_FIELDS(node)
    get = meta.get
    return (
        node,
        op,
        name,
        target,
        args,
        kwargs,
        meta["val"] if "val" in meta else get("example_value"),
        get("unbacked_bindings"),
        get("stack_trace"),
        get("recompute"),
        get("autograd_backward"),
        get("partitioner_tag"),
        _resolve_attr(gm, target) if op == "get_attr" else None,
    )


def same_objects(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(map(operator.is_, a, b))


class Fingerprint:
    """What a graph's records depend on, as the objects themselves in walk order: each subgraph's
    path and module, then its nodes' `row_inputs`. Two fingerprints are the same graph where
    every object is the very same one; holding the objects keeps their ids from being reused
    while the fingerprint is kept."""

    __slots__ = ("objects", "nodes")

    def __init__(self, objects: list, nodes: int):
        self.objects = objects
        self.nodes = nodes

    def same_as(self, other: "Fingerprint | None") -> bool:
        return other is not None and same_objects(self.objects, other.objects)


class TableCache:
    """The last snapshot's fingerprint and node rows, so an unchanged graph (the graph a pass
    receives is usually the one the previous pass returned) costs one walk, and a changed one
    recomputes only the rows of nodes that changed.

    Both hold the objects they compare by identity, so no id is reused while cached; only the
    latest graph is kept.
    """

    def __init__(self) -> None:
        self.fingerprint: Fingerprint | None = None
        self.result: Any = None
        self.rows: dict[int, tuple[tuple, NodeRow]] = {}  # id(node) -> (its row_inputs, its row)
        self._last: Fingerprint | None = None  # the last fingerprint taken

    def fingerprint_of(self, gm: torch.fx.GraphModule) -> Fingerprint:
        """The graph's fingerprint, kept until the next call for `remember` (taken here, before a
        child is forked: a walk after the fork would copy every page it touches while the child
        lives)."""
        objects: list = [gm]
        add = objects.extend
        nodes = 0
        for path, sub, _ in iter_graph_modules(gm):
            add((sys.intern(path), sub))  # interned: an equal path is the same object
            graph_nodes = sub.graph.nodes
            nodes += len(graph_nodes)
            for n in graph_nodes:
                add(row_inputs(sub, n))
        fingerprint = Fingerprint(objects, nodes)
        self._last = fingerprint
        return fingerprint

    def node_tables(self, gm: torch.fx.GraphModule) -> dict[str, Any]:
        graphs = []
        rows: dict[int, tuple[tuple, NodeRow]] = {}
        for path, sub, parent_node in iter_graph_modules(gm):
            out = []
            for n in sub.graph.nodes:
                inputs = row_inputs(sub, n)
                hit = self.rows.get(id(n))
                row = hit[1] if hit is not None and same_objects(hit[0], inputs) else node_row(sub, n)
                rows[id(n)] = (inputs, row)
                out.append(row)
            graphs.append({"path": path, "parent_node": parent_node, "nodes": out})
        self.rows = rows
        return {"graphs": graphs}

    def remember(self, fingerprint: Fingerprint, result: Any, *, table_made_here: bool = True) -> None:
        """Keep `result` for the graph of `fingerprint`. A graph whose table was not made here (a
        forked child recorded it) drops the row cache: its rows are of an older graph, and keeping
        them would keep that graph's objects alive."""
        if not table_made_here:
            if self._last is not fingerprint:
                self.fingerprint = self.result = None  # not the last fingerprint taken: nothing kept
                return
            self.rows = {}
        self.fingerprint = fingerprint
        self.result = result

    def lookup(self, fingerprint: Fingerprint) -> Any:
        return self.result if fingerprint.same_as(self.fingerprint) else None


def node_tables(gm: torch.fx.GraphModule) -> dict[str, Any]:
    return TableCache().node_tables(gm)


def count_nodes(tables: dict[str, Any]) -> int:
    return sum(len(g["nodes"]) for g in tables["graphs"])


# ---------------------------------------------------------------------------------------------
# Symbol map


def find_shape_env(gm: torch.fx.GraphModule) -> Any:
    env = getattr(gm, "shape_env", None)
    if env is not None:
        return env
    for _, sub, _ in iter_graph_modules(gm):
        for node in sub.graph.nodes:
            v = _node_val(node)
            for x in v if isinstance(v, (list, tuple)) else (v,):
                if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                    return x.node.shape_env
                fm = getattr(x, "fake_mode", None)
                if fm is not None and getattr(fm, "shape_env", None) is not None:
                    return fm.shape_env
    return None


def _range(shape_env: Any, sym: Any) -> list[str] | None:
    vr = getattr(shape_env, "var_to_range", {}).get(sym)
    if vr is None:
        return None
    return [str(vr.lower), str(vr.upper)]


def symbol_map(gm: torch.fx.GraphModule, tables: dict[str, Any], shape_env: Any = None) -> dict[str, Any]:
    """Every symbol seen in the graph: where it is bound, where it is used, what ShapeEnv says."""
    shape_env = shape_env if shape_env is not None else find_shape_env(gm)
    symbols = symbol_usage((g["path"], g["nodes"]) for g in tables["graphs"])

    out: dict[str, Any] = {"shape_env": shape_env is not None, "symbols": symbols}
    if shape_env is None:
        return out
    by_name = {}
    for attr in ("var_to_range", "replacements", "unbacked_renamings"):
        for s in getattr(shape_env, attr, {}) or {}:
            by_name[str(s)] = s
    known = set(by_name)
    for name, e in symbols.items():
        sym = by_name.get(name)
        e["known"] = name in known
        if sym is None:
            continue
        r = _range(shape_env, sym)
        if r:
            e["range"] = r
        rep = (getattr(shape_env, "replacements", {}) or {}).get(sym)
        if rep is not None:
            e["replacement"] = str(rep)
    renamings = getattr(shape_env, "unbacked_renamings", {}) or {}
    out["renamings"] = {str(k): str(v) for k, v in renamings.items() if str(k) in symbols or str(v) in symbols}
    asserts = []
    for sym, ras in (getattr(shape_env, "deferred_runtime_asserts", {}) or {}).items():
        for ra in ras:
            if (
                sym is None
                or str(sym) in symbols
                or any(str(s) in symbols for s in getattr(ra.expr, "free_symbols", ()))
            ):
                asserts.append(
                    {
                        "symbol": str(sym) if sym is not None else None,
                        "expr": str(ra.expr),
                        "msg": str(getattr(ra, "msg", ""))[:200],
                    }
                )
    out["deferred_asserts"] = asserts
    return out


# ---------------------------------------------------------------------------------------------
# Device table


_OWN_DEVICE_PINNED: str | None = None  # set in a forked child (pin_own_device)


def pin_own_device(device: str) -> None:
    """In a child forked to record a graph (deferred_graphs): the parent's own device. CUDA cannot
    be asked there (torch marks a forked child's CUDA state bad: `is_initialized()` is False)."""
    global _OWN_DEVICE_PINNED
    _OWN_DEVICE_PINNED = device


def own_device() -> str:
    """The device this rank computes on: the current CUDA device once CUDA is in use, else cpu."""
    if _OWN_DEVICE_PINNED is not None:
        return _OWN_DEVICE_PINNED
    try:
        if torch.cuda.is_initialized():
            return f"cuda:{torch.cuda.current_device()}"
    except Exception:  # noqa: BLE001
        pass
    return "cpu"


def _device_literals(a: Any, where: str, out: list[tuple[str, str]]) -> None:
    if isinstance(a, torch.device):
        out.append((where, str(a)))
    elif isinstance(a, (list, tuple)):
        for i, x in enumerate(a):
            _device_literals(x, f"{where}[{i}]", out)
    elif isinstance(a, dict):
        for k, x in a.items():
            _device_literals(x, f"{where}.{k}", out)
    elif isinstance(a, str) and (a.startswith("cuda:") or a == "cuda"):
        out.append((where, a))


def device_table(gm: torch.fx.GraphModule) -> dict[str, Any]:
    literals = []
    values = []
    for path, sub, _ in iter_graph_modules(gm):
        for node in sub.graph.nodes:
            found: list[tuple[str, str]] = []
            _device_literals(node.args, "args", found)
            _device_literals(dict(node.kwargs), "kwargs", found)
            for where, dev in found:
                literals.append(
                    {
                        "graph": path,
                        "node": node.name,
                        "target": target_name(node.target),
                        "where": where,
                        "device": dev,
                    }
                )
            if node.op == "placeholder":
                v = _node_val(node)
                if isinstance(v, torch.Tensor):
                    values.append({"graph": path, "node": node.name, "kind": "input", "device": str(v.device)})
            elif node.op == "get_attr":
                attr = _resolve_attr(sub, node.target)
                if isinstance(attr, torch.Tensor):
                    kind = (
                        "parameter"
                        if isinstance(attr, torch.nn.Parameter)
                        else ("buffer" if str(node.target) in dict(sub.named_buffers()) else "constant")
                    )
                    d = _constant_desc(attr)
                    values.append({"graph": path, "node": node.name, "kind": kind, **d})
    return {
        "own_device": own_device(),
        "local_rank": _env_int("LOCAL_RANK"),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "literals": literals,
        "values": values,
    }


def _env_int(name: str) -> int | None:
    v = os.environ.get(name)
    return int(v) if v is not None and v.lstrip("-").isdigit() else None
