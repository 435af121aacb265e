"""Parse FX graph code (print_readable output, as in TORCH_TRACE logs) into node tables.

The result has the schema of `gti_nodes` (docs/log-format.md): `{"graphs": [{"path",
"parent_node", "nodes": [row...]}]}` with rows holding `name`, `op`, `target`, `args`, `kwargs`,
`val` (from the type annotation: dtype, shape, stride, device, or `Sym(expr)`), `syms` and `stack`
(from the `# File:` comments). What text cannot say is left out: `unbacked_bindings`, `bwd`,
`recompute`, tensor-constant values. Nested subgraphs (`class true_graph_0(torch.nn.Module)`
inside the root class) get their own table, with the path of nested class names.

Uses Python's `ast` module on the whole code; statements it cannot parse are skipped and
reported in `warnings`. Never imports torch.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from graphtrain_inspect.capture.shared.logformat import NodeRow
from graphtrain_inspect.capture.shared.symbol_usage import val_symbols

DTYPE_ABBRS = {
    "u8": "uint8", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "f16": "float16", "f32": "float32", "f64": "float64", "c32": "complex32", "c64": "complex64",
    "c128": "complex128", "b8": "bool", "bf16": "bfloat16", "b1x8": "bits1x8", "b2x4": "bits2x4",
    "b4x2": "bits4x2", "b8x1": "bits8", "b16x1": "bits16", "f8e5m2": "float8_e5m2",
    "f8e4m3fn": "float8_e4m3fn", "f8e5m2fnuz": "float8_e5m2fnuz", "f8e4m3fnuz": "float8_e4m3fnuz",
    "u16": "uint16", "u32": "uint32", "u64": "uint64", "f8e8m0fnu": "float8_e8m0fnu",
    "f4e2m1fnx2": "float4_e2m1fn_x2",
}  # fmt: skip
_DTYPE_NAMES = set(DTYPE_ABBRS.values()) | {
    "float",
    "double",
    "half",
    "long",
    "int",
    "short",
    "bits16",
    "cfloat",
    "cdouble",
    "qint8",
    "quint8",
    "qint32",
}
_ENUM_NAMES = {
    "strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "jagged", "_mkldnn",
    "contiguous_format", "channels_last", "channels_last_3d", "preserve_format", "legacy_contiguous_format",
}  # fmt: skip


_BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.MatMult: "matmul", ast.BitAnd: "and_", ast.BitOr: "or_",
    ast.BitXor: "xor", ast.LShift: "lshift", ast.RShift: "rshift",
}  # fmt: skip
_CMPOPS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}
_UNARY = {ast.USub: "neg", ast.UAdd: "pos", ast.Not: "not_", ast.Invert: "invert"}

_CLASS_NAME_RE = re.compile(r"^(\s*class )([^(:\n]*[^\w(:\n][^(:\n]*)\(", re.M)
_FILE_COMMENT_RE = re.compile(r"^\s*# File: (.*?):(\d+) in ([^,]*), code: (.*)$")
_NO_STACK_RE = re.compile(r"^\s*# No stacktrace found")


def split_top(text: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside parentheses and brackets."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    tail = "".join(cur).strip()
    if tail or out:
        out.append(tail)
    return [x for x in out if x != ""]


def _dim(text: str) -> Any:
    t = text.strip()
    if t.lstrip("-").isdigit():
        return int(t)
    return t


def _bracket(text: str, i: int) -> tuple[str, int] | None:
    """The content of the bracket group starting at text[i] == '[', and the index after it."""
    if i >= len(text) or text[i] != "[":
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "[":
            depth += 1
        elif text[j] == "]":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j], j + 1
    return None


def parse_annotation(ann: str) -> Any:
    """`f32[u0, 4][4, 1]cuda:0` -> tensor val; `Sym(u0)` -> sym val; None if not understood."""
    ann = ann.strip()
    if ann.startswith("Sym(") and ann.endswith(")"):
        expr = ann[4:-1]
        kind = "SymBool" if re.search(r"[<>=!]=|[<>]|\b(?:True|False|Eq|Ne)\b", expr) else "SymInt"
        if kind == "SymInt" and re.search(r"\d\.\d|\bzu?f\d", expr):
            kind = "SymFloat"
        return {"t": "sym", "type": kind, "expr": expr}
    m = re.match(r"([a-z][a-z0-9]*)\[", ann)
    if m is None or m.group(1) not in DTYPE_ABBRS:
        return None
    shape = _bracket(ann, m.end() - 1)
    if shape is None:
        return None
    shape_text, i = shape
    val: dict[str, Any] = {
        "t": "tensor",
        "dtype": DTYPE_ABBRS[m.group(1)],
        "shape": [_dim(d) for d in split_top(shape_text)],
    }
    stride = _bracket(ann, i)
    if stride is not None:
        val["stride"] = [_dim(d) for d in split_top(stride[0])]
        i = stride[1]
    device = ann[i:].strip()
    if device:
        val["device"] = device
    return val


class _Parser:
    def __init__(self, code: str):
        self.code = code
        self.lines = code.splitlines()
        self.warnings: list[str] = []
        self.graphs: list[dict[str, Any]] = []
        self._stacks: list[str | None] | None = None

    def parse(self) -> dict[str, Any]:
        # `class <lambda>(torch.nn.Module):` (AOT's inference graphs) is not Python: rename
        self.code = _CLASS_NAME_RE.sub(lambda m: m.group(1) + re.sub(r"\W", "_", m.group(2)) + "(", self.code)
        try:
            module = ast.parse(self.code)
        except SyntaxError as e:
            return self._parse_lines(e)
        classes = [n for n in module.body if isinstance(n, ast.ClassDef)]
        if not classes:
            fn = next((n for n in module.body if isinstance(n, ast.FunctionDef)), None)
            if fn is None:
                self.warnings.append("no graph module class or forward function in the code")
                return {"graphs": []}
            self._graph(fn, [], "", None)
            return {"graphs": self.graphs}
        self._class(classes[0], "", None)
        for extra in classes[1:]:
            self.warnings.append(f"ignored a second top-level class {extra.name!r}")
        return {"graphs": self.graphs}

    def _parse_lines(self, err: SyntaxError) -> dict[str, Any]:
        """Fallback for code ast cannot take whole: parse the forward's statements one by one."""
        self.warnings.append(f"graph code does not parse as Python (line {err.lineno}: {err.msg}); parsed line by line")
        body: list[ast.stmt] = []
        sig: ast.FunctionDef | None = None
        for i, line in enumerate(self.lines, 1):
            s = line.strip()
            if not s or s.startswith("#") or s.startswith("class "):
                continue
            if s.startswith("def forward"):
                try:
                    sig = ast.parse(s + "\n    pass").body[0]  # type: ignore[assignment]  # a `def` line parses to a FunctionDef
                except SyntaxError:
                    sig = None
                continue
            try:
                stmts = ast.parse(s).body
            except SyntaxError:
                self.warnings.append(f"line {i}: skipped, does not parse")
                continue
            for st in stmts:
                ast.increment_lineno(st, i - 1)
                body.append(st)
        fn = (
            sig
            if isinstance(sig, ast.FunctionDef)
            else ast.FunctionDef(
                name="forward",
                args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                body=[],
                decorator_list=[],
            )
        )
        self._graph(fn, body, "", None)
        return {"graphs": self.graphs}

    def _class(self, cls: ast.ClassDef, path: str, parent_node: str | None) -> None:
        fn = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
        index = len(self.graphs)
        if fn is not None:
            self._graph(fn, fn.body, path, parent_node)
        else:
            self.graphs.append({"path": path, "parent_node": parent_node, "nodes": []})
        graph = self.graphs[index]
        nested = [n for n in cls.body if isinstance(n, ast.ClassDef)]
        if not nested:
            return
        attr_users = {row["target"]: row for row in graph["nodes"] if row["op"] in ("get_attr", "call_module")}
        for sub in nested:
            row = attr_users.get(sub.name)
            if row is not None and row["op"] == "get_attr":
                row["subgraph"] = True
            sub_path = f"{path}/{sub.name}" if path else sub.name
            self._class(sub, sub_path, row["name"] if row is not None else None)

    # -- one graph -----------------------------------------------------------------------------

    def _stack_for(self, lineno: int) -> str | None:
        """The `# File:` comment heading the block of lines that holds line `lineno` (1-based)."""
        if self._stacks is None:
            stacks: list[str | None] = []
            current: str | None = None
            for line in self.lines:
                s = line.strip()
                if not s or s.startswith("def ") or s.startswith("class "):
                    current = None
                elif s.startswith("#"):
                    m = _FILE_COMMENT_RE.match(line)
                    if m:
                        current = f'File "{m.group(1)}", line {m.group(2)}, in {m.group(3)} | {m.group(4)}'
                    elif _NO_STACK_RE.match(line):
                        current = None
                stacks.append(current)
            self._stacks = stacks
        i = lineno - 1
        return self._stacks[i] if 0 <= i < len(self._stacks) else None

    def _graph(self, fn: ast.FunctionDef, body: list[ast.stmt], path: str, parent_node: str | None) -> None:
        rows: list[NodeRow] = []
        names: set[str] = set()
        placeholders: list[NodeRow] = []
        arg_index: dict[str, NodeRow] = {}
        ann_placeholders = [
            st for st in body if isinstance(st, ast.AnnAssign) and st.value is None and isinstance(st.target, ast.Name)
        ]
        if ann_placeholders:
            # AOT's joint graph: forward(self, primals, tangents) then `primals_1: "f32[...]"` lines.
            for ann in ann_placeholders:
                row = self._placeholder(ann.target.id, ann.annotation)  # type: ignore[union-attr]  # the filter above keeps Name targets only
                placeholders.append(row)
                arg_index[row["name"]] = row
        else:
            fn_args = list(fn.args.posonlyargs) + list(fn.args.args)
            for a in fn_args:
                if a.arg == "self":
                    continue
                row = self._placeholder(a.arg, a.annotation)
                placeholders.append(row)
                arg_index[row["name"]] = row
            if fn.args.vararg is not None:
                row = self._placeholder(fn.args.vararg.arg, fn.args.vararg.annotation)
                placeholders.append(row)
                arg_index[row["name"]] = row
        rows.extend(placeholders)
        names.update(arg_index)
        for st in body:
            if isinstance(st, ast.AnnAssign):
                if st.value is None or not isinstance(st.target, ast.Name):
                    continue
                self._node(st.target.id, st.value, st.annotation, st.lineno, rows, names, arg_index)
            elif isinstance(st, ast.Assign):
                if len(st.targets) != 1:
                    continue  # `a = b = None`: the code freeing dead values
                tgt = st.targets[0]
                if not isinstance(tgt, ast.Name):
                    continue  # `primals_1, ... = fx_pytree.tree_flatten_spec(...)`
                if isinstance(st.value, ast.Constant) and st.value.value is None:
                    continue  # `x = None`
                self._node(tgt.id, st.value, None, st.lineno, rows, names, arg_index)
            elif isinstance(st, ast.Return):
                value = st.value
                if (
                    isinstance(value, ast.Call)
                    and _dotted(value.func) in ("pytree.tree_unflatten", "torch.utils._pytree.tree_unflatten")
                    and value.args
                ):
                    value = value.args[0]
                args = [self._arg(value, names)] if value is not None else [None]
                rows.append({"name": "output", "op": "output", "target": "output", "args": args, "kwargs": {}})
        self.graphs.append({"path": path, "parent_node": parent_node, "nodes": rows})

    def _placeholder(self, name: str, annotation: ast.expr | None) -> NodeRow:
        row: NodeRow = {"name": name, "op": "placeholder", "target": name, "args": [], "kwargs": {}}
        self._annotate(row, annotation)
        return row

    def _annotate(self, row: NodeRow, annotation: ast.expr | None) -> None:
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            val = parse_annotation(annotation.value)
            if val is not None:
                row["val"] = val
                syms = val_symbols(val)
                if syms:
                    row["syms"] = syms

    def _node(
        self,
        name: str,
        value: ast.expr,
        annotation: ast.expr | None,
        lineno: int,
        rows: list[NodeRow],
        names: set[str],
        arg_index: dict[str, NodeRow],
    ) -> None:
        if isinstance(value, ast.Name) and value.id in arg_index:
            # Dynamo: `l_x_ = L_x_` names the placeholder whose target is the forward argument.
            row = arg_index.pop(value.id)
            row["name"] = name
            names.discard(value.id)
            names.add(name)
            if annotation is not None:
                self._annotate(row, annotation)
            return
        op, target, args, kwargs = self._expr(value, names)
        row = {"name": name, "op": op, "target": target, "args": args, "kwargs": kwargs}
        self._annotate(row, annotation)
        stack = self._stack_for(lineno)
        if stack:
            row["stack"] = stack
        rows.append(row)
        names.add(name)

    def _expr(self, e: ast.expr, names: set[str]) -> tuple[str, str, list[Any], dict[str, Any]]:
        if isinstance(e, ast.Call):
            func = e.func
            args = [self._arg(a, names) for a in e.args]
            kwargs = {kw.arg: self._arg(kw.value, names) for kw in e.keywords if kw.arg is not None}
            dotted = _dotted(func)
            if dotted is not None and dotted.startswith("torch.ops."):
                return "call_function", dotted[len("torch.ops.") :], args, kwargs
            if isinstance(func, ast.Attribute):
                base = func.value
                if isinstance(base, ast.Name) and base.id == "self":
                    return "call_module", func.attr, args, kwargs
                if isinstance(base, ast.Name) and base.id in names:
                    return "call_method", func.attr, [{"n": base.id}, *args], kwargs
            if dotted is not None:
                return "call_function", dotted, args, kwargs
            return "call_function", _unparse(func), args, kwargs
        if isinstance(e, ast.Attribute):
            dotted = _dotted(e)
            if dotted is not None and dotted.startswith("self."):
                return "get_attr", dotted[len("self.") :], [], {}
        if isinstance(e, ast.Subscript):
            return "call_function", "operator.getitem", [self._arg(e.value, names), self._arg(e.slice, names)], {}
        if isinstance(e, ast.BinOp) and type(e.op) in _BINOPS:
            return (
                "call_function",
                f"operator.{_BINOPS[type(e.op)]}",
                [self._arg(e.left, names), self._arg(e.right, names)],
                {},
            )
        if isinstance(e, ast.Compare) and len(e.ops) == 1 and type(e.ops[0]) in _CMPOPS:
            return (
                "call_function",
                f"operator.{_CMPOPS[type(e.ops[0])]}",
                [self._arg(e.left, names), self._arg(e.comparators[0], names)],
                {},
            )
        if isinstance(e, ast.UnaryOp) and type(e.op) in _UNARY:
            return "call_function", f"operator.{_UNARY[type(e.op)]}", [self._arg(e.operand, names)], {}
        return "call_function", _unparse(e), [], {}

    def _arg(self, e: ast.expr, names: set[str]) -> Any:
        if isinstance(e, ast.Constant):
            v = e.value
            if v is None or isinstance(v, (bool, int, str)):
                return v
            if isinstance(v, float):
                return v if v == v and v not in (float("inf"), float("-inf")) else {"float": repr(v)}
            return {"obj": type(v).__name__, "repr": repr(v)[:200]}
        if isinstance(e, ast.Name):
            if e.id in names:
                return {"n": e.id}
            if e.id in ("inf", "nan"):
                return {"float": e.id}
            return {"obj": "name", "repr": e.id}
        if isinstance(e, (ast.List, ast.Tuple)):
            return [self._arg(x, names) for x in e.elts]
        if isinstance(e, ast.Dict):
            return {
                "dict": [
                    [self._arg(k, names) if k is not None else None, self._arg(v, names)]
                    for k, v in zip(e.keys, e.values)
                ]
            }
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            inner = self._arg(e.operand, names)
            if isinstance(inner, (int, float)) and not isinstance(inner, bool):
                return -inner
            if isinstance(inner, dict) and inner.get("float") in ("inf", "nan"):
                return {"float": "-" + inner["float"] if inner["float"] == "inf" else "nan"}
        if isinstance(e, ast.Attribute):
            dotted = _dotted(e)
            if dotted is not None and dotted.startswith("torch."):
                attr = dotted[len("torch.") :]
                if attr in _DTYPE_NAMES:
                    return {"dtype": attr}
                if attr in _ENUM_NAMES:
                    return {"enum": dotted}
            if dotted is not None and dotted.startswith("self."):
                return {"obj": "attr", "repr": dotted}
        if isinstance(e, ast.Call):
            fname = _dotted(e.func)
            if fname in ("device", "torch.device"):
                return {"dev": _device_text(e)}
            if fname == "slice" and len(e.args) <= 3 and not e.keywords:
                parts = [self._arg(a, names) for a in e.args]
                if len(parts) == 1:
                    parts = [None, parts[0], None]
                while len(parts) < 3:
                    parts.append(None)
                return {"slice": parts}
        if isinstance(e, ast.Slice):
            return {"slice": [self._arg(x, names) if x is not None else None for x in (e.lower, e.upper, e.step)]}
        return {"obj": "expr", "repr": _unparse(e)[:200]}


def _device_text(call: ast.Call) -> str:
    typ: Any = None
    index: Any = None
    if call.args:
        a0 = call.args[0]
        if isinstance(a0, ast.Constant):
            typ = a0.value
        if len(call.args) > 1 and isinstance(call.args[1], ast.Constant):
            index = call.args[1].value
    for kw in call.keywords:
        if kw.arg == "type" and isinstance(kw.value, ast.Constant):
            typ = kw.value.value
        elif kw.arg == "index" and isinstance(kw.value, ast.Constant):
            index = kw.value.value
    text = str(typ)
    if index is not None and ":" not in text:
        text = f"{text}:{index}"
    return text


def _dotted(e: ast.expr) -> str | None:
    parts = []
    while isinstance(e, ast.Attribute):
        parts.append(e.attr)
        e = e.value
    if isinstance(e, ast.Name):
        parts.append(e.id)
        return ".".join(reversed(parts))
    return None


def _unparse(e: ast.AST) -> str:
    try:
        return ast.unparse(e)
    except Exception:  # noqa: BLE001
        return type(e).__name__


def parse_graph_code(code: str) -> tuple[dict[str, Any], list[str]]:
    """Node tables (gti_nodes schema, without gid) of FX code, and warnings about what was skipped."""
    p = _Parser(code)
    tables = p.parse()
    return tables, p.warnings
