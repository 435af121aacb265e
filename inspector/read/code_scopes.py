"""Symbols that Inductor's generated wrapper uses where nothing in their scope binds them.

    from graphtrain_inspect.inspector.read.code_scopes import unbound_symbols
    for u in unbound_symbols(code):          # [] for code that is not Python (AOTInductor's C++)
        u.name, u.function, u.line, u.lines   # "u0", "true_graph_0", 97 (0-based), [97, 98]
        u.statements                          # [(first, last)] of each statement using it
        u.bound_in                            # [("Runner.call", 188)]: where the name is bound elsewhere

The wrapper is parsed with `ast` (never compiled or run) and each name a function loads is
resolved as Python resolves it: the function's own bindings (parameters, assignments, `for`,
`with`, `except` and `match` targets, imports, nested `def`s and classes, `del`), then the
functions around it (closures; a class body's names are not seen by its methods), then the
module (its own bindings and names functions declare `global` and assign). Comprehensions and
lambdas are scopes of their own, as in Python. Only names shaped like the sympy symbols Inductor
writes into host code are reported (`s0`, `u0`, `ps0`, `zf0`, `zuf0`: torch/utils/_sympy/symbol.py's
size, unbacked, precomputed-size and float prefixes): a builtin or a global the module gets some
other way is never mistaken for one. Kernel sources are string literals and are not read.

Inductor's benchmark harness (`output_code.harness_spans`) is not read: it never runs in
training. A wrapper that names no such symbol at all is not parsed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from graphtrain_inspect.inspector.read.output_code import harness_spans, training_text

# sympy symbols Inductor prints into Python host code: sizes (s), unbacked ints (u), precomputed
# sizes (ps), floats and unbacked floats (zf, zuf); the other prefixes (x, r0_, tmp ...) name
# loop indices and temporaries inside kernels, whose sources are strings here
SYMBOL_NAME = re.compile(r"(?:s|u|ps|zf|zuf)\d+")
_SYMBOL_TOKEN = re.compile(r"\b(?:s|u|ps|zf|zuf)\d+\b")


@dataclass
class UnboundUse:
    """A symbol one function of the wrapper loads and nothing in its scope binds."""

    name: str
    function: str  # qualified name of the function (`Runner.call`, `true_graph_0`), `<module>` at top level
    line: int  # 0-based line of the first use
    col: int
    lines: list[int] = field(default_factory=list)  # every use, 0-based
    statements: list[tuple[int, int]] = field(default_factory=list)  # (first, last) line of each using statement
    bound_in: list[tuple[str, int]] = field(default_factory=list)  # other scopes binding the name: (function, line)


@dataclass
class _Scope:
    kind: str  # module | function | class | comprehension
    name: str
    parent: "_Scope | None"
    bound: dict[str, int] = field(default_factory=dict)  # name -> first binding line (0-based)
    globals_: set[str] = field(default_factory=set)
    nonlocals: set[str] = field(default_factory=set)
    loads: list[tuple[str, ast.expr, ast.stmt | None]] = field(default_factory=list)
    star_import: bool = False

    def bind(self, name: str, line: int) -> None:
        self.bound.setdefault(name, line)


class _Collector(ast.NodeVisitor):
    """One walk of the tree: each scope's bindings and the symbol-shaped names it loads."""

    def __init__(self, skip: list[tuple[int, int]]):
        self.module = _Scope("module", "<module>", None)
        self.scopes = [self.module]
        self.scope = self.module
        self.stmt: ast.stmt | None = None
        self.skip = skip  # 0-based inclusive line spans not to read (the harness)

    # -- scopes ------------------------------------------------------------------------------
    def _enter(self, kind: str, name: str) -> _Scope:
        parent = self.scope
        qual = name if parent.kind == "module" or kind == "comprehension" else f"{parent.name}.{name}"
        if kind == "comprehension":
            qual = parent.name
        s = _Scope(kind, qual, parent)
        self.scopes.append(s)
        self.scope = s
        return s

    def _skipped(self, node: ast.AST) -> bool:
        line = getattr(node, "lineno", 0) - 1
        return any(a <= line <= b for a, b in self.skip)

    def visit_Module(self, node: ast.Module) -> None:
        for st in node.body:
            if not self._skipped(st):
                self.visit(st)

    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.stmt):
            outer, self.stmt = self.stmt, node
            super().generic_visit(node)
            self.stmt = outer
        else:
            super().generic_visit(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, name: str) -> None:
        a = node.args
        for d in [*a.defaults, *(d for d in a.kw_defaults if d is not None)]:
            self.visit(d)  # defaults are evaluated where the function is defined
        if not isinstance(node, ast.Lambda):
            for dec in node.decorator_list:
                self.visit(dec)
            for ann in _annotations(node):
                self.visit(ann)
        outer_stmt = self.stmt
        parent = self.scope
        s = self._enter("function", name)
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
            if arg is not None:
                s.bind(arg.arg, node.lineno - 1)
        if isinstance(node, ast.Lambda):
            self.visit(node.body)
        else:
            for st in node.body:
                self.visit(st)
        self.scope = parent
        self.stmt = outer_stmt

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.scope.bind(node.name, node.lineno - 1)
        outer, self.stmt = self.stmt, node
        self._function(node, node.name)
        self.stmt = outer

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]  # the same walk for both

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._function(node, "<lambda>")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.bind(node.name, node.lineno - 1)
        outer, self.stmt = self.stmt, node
        for e in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(e)
        parent = self.scope
        self._enter("class", node.name)
        for st in node.body:
            self.visit(st)
        self.scope = parent
        self.stmt = outer

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        gens = node.generators
        self.visit(gens[0].iter)  # the first iterable is evaluated in the enclosing scope
        parent = self.scope
        self._enter("comprehension", "")
        for i, g in enumerate(gens):
            if i:
                self.visit(g.iter)
            self.visit(g.target)
            for cond in g.ifs:
                self.visit(cond)
        if isinstance(node, ast.DictComp):
            self.visit(node.key)
            self.visit(node.value)
        else:
            self.visit(node.elt)
        self.scope = parent

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension

    # -- bindings and uses -------------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            if SYMBOL_NAME.fullmatch(node.id):
                self.scope.loads.append((node.id, node, self.stmt))
        else:  # Store, Del: a binding of this scope
            self.scope.bind(node.id, node.lineno - 1)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        # `:=` in a comprehension binds in the function around it
        s = self.scope
        while s.kind == "comprehension" and s.parent is not None:
            s = s.parent
        s.bind(node.target.id, node.lineno - 1)
        self.visit(node.value)

    def _imports(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name == "*":
                self.scope.star_import = True
            else:
                self.scope.bind(alias.asname or alias.name.split(".")[0], node.lineno - 1)

    visit_Import = visit_ImportFrom = _imports

    def visit_Global(self, node: ast.Global) -> None:
        self.scope.globals_.update(node.names)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.scope.nonlocals.update(node.names)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.scope.bind(node.name, node.lineno - 1)
        self.generic_visit(node)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.name:
            self.scope.bind(node.name, node.lineno - 1)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self.scope.bind(node.name, node.lineno - 1)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest:
            self.scope.bind(node.rest, node.lineno - 1)
        self.generic_visit(node)


def _annotations(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr]:
    a = node.args
    args = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
    out = [x.annotation for x in args if x is not None and x.annotation is not None]
    return out + ([node.returns] if node.returns is not None else [])


def _module_names(scopes: list[_Scope]) -> set[str]:
    """Names bound at module level: the module's own bindings and every name a function declares
    `global` and binds."""
    names = set(scopes[0].bound)
    for s in scopes[1:]:
        names.update(n for n in s.globals_ if n in s.bound)
    return names


def _resolves(s: _Scope, name: str, module_names: set[str], star: bool) -> bool:
    """Whether `name` loaded in scope `s` is bound where Python looks for it."""
    if name in s.globals_:
        return name in module_names or star
    if name not in s.nonlocals and name in s.bound:
        return True
    p = s.parent
    while p is not None and p.kind != "module":
        # a class body's names are not seen from the functions inside it
        if p.kind != "class":
            if name in p.globals_:
                return name in module_names or star
            if name in p.bound and name not in p.nonlocals:
                return True
        p = p.parent
    return name in module_names or star


# lines assigning names: `s77 = arg0_1`, `u0 = buf1[0].size(1)`, `arg0_1, s0 = args`
_ASSIGNS = re.compile(r"^[ \t]*([A-Za-z_]\w*(?:[ \t]*,[ \t]*[A-Za-z_]\w*)*)[ \t]*,?[ \t]*=(?!=)", re.M)
_DEF_LINE = re.compile(r"^([ \t]*)(?:async[ \t]+)?def[ \t]+\w+[ \t]*\((.*)$", re.M)
# kernel sources (C++, Triton) are triple-quoted strings: most of a wrapper's bytes, no host code
_TRIPLE_QUOTED = re.compile(r"'''[^']*(?:'(?!'')[^']*)*'''|\"\"\"[^\"]*(?:\"(?!\"\")[^\"]*)*\"\"\"")
_DEDENTS: dict[int, re.Pattern[str]] = {}


def _dedent(indent: int) -> re.Pattern[str]:
    """The end of a block opened at `indent`: a line of code indented no deeper."""
    got = _DEDENTS.get(indent)
    if got is None:
        got = _DEDENTS[indent] = re.compile(rf"\n(?=[ \t]{{0,{indent}}}[^ \t\n#])")
    return got


def _suspect(code: str) -> bool:
    """Whether some function of the wrapper may load a symbol it does not assign itself: False
    where, in every function (its lines by their indentation, nested functions' left out; the
    harness blanked) and at top level, each symbol-shaped name is a parameter or is assigned on a
    line of that very function (`s77 = arg0_1`). Inductor's functions bind every symbol they use
    that way, so correct code is settled by a few regular-expression passes. Anything else (a
    symbol from an enclosing scope or the module, a lambda's parameter, a binding these lines do
    not show, a `def` inside a kernel's source string) goes to the parse. On code shaped as
    Inductor writes it the scan clears only what the parse clears; it could clear more only where
    a function holds a class body or a multi-line string binding the name, which Inductor's
    functions never do."""
    text = _TRIPLE_QUOTED.sub("''", training_text(code))
    blocks: list[tuple[int, int, int, set[str]]] = []  # (start, body start, end, parameters)
    for m in _DEF_LINE.finditer(text):
        close = _dedent(len(m.group(1))).search(text, m.end())
        stop = close.start() if close is not None else len(text)
        blocks.append((m.start(), m.end(), stop, set(_SYMBOL_TOKEN.findall(m.group(2)))))
    # each function's own text: its body without the functions nested in it; the module's: the rest
    pieces: list[tuple[list[str], set[str]]] = [([], set())]
    owners = [0]  # the piece each open block writes to, innermost last
    ends = [len(text)]
    at = [0]  # where each open block's own text resumes
    for start, body, end, params in blocks:
        while start >= ends[-1]:
            done = ends.pop()
            pieces[owners.pop()][0].append(text[at.pop() : done])
            at[-1] = done
        pieces[owners[-1]][0].append(text[at[-1] : start])
        at[-1] = end
        pieces.append(([], params))
        owners.append(len(pieces) - 1)
        ends.append(end)
        at.append(body)
    while owners:
        pieces[owners.pop()][0].append(text[at.pop() : ends.pop()])
    for parts, params in pieces:
        own = "".join(parts)
        used = set(_SYMBOL_TOKEN.findall(own))
        if not used or used <= params:
            continue
        bound = set(params)
        for names in _ASSIGNS.findall(own):
            bound.update(n.strip() for n in names.split(","))
        if not used <= bound:
            return True
    return False


def unbound_symbols(code: str) -> list[UnboundUse]:
    """Each symbol-shaped name a function of the wrapper (outside its benchmark harness) loads
    where its scope binds nothing of that name, in order of first use; [] where the code names no
    symbol or is not Python."""
    if _SYMBOL_TOKEN.search(code) is None:
        return []  # static shapes: nothing to resolve, nothing to parse
    if not _suspect(code):
        return []
    harness = harness_spans(code)
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []  # not Python (AOTInductor's C++), or not parseable here: nothing said of it
    col = _Collector(harness)
    col.visit(tree)
    module_names = _module_names(col.scopes)
    star = col.module.star_import  # `from m import *` at module level may bind anything
    out: dict[tuple[str, str], UnboundUse] = {}
    for s in col.scopes:
        for name, node, stmt in s.loads:
            if _resolves(s, name, module_names, star):
                continue
            key = (s.name, name)
            u = out.get(key)
            line = node.lineno - 1
            if u is None:
                u = out[key] = UnboundUse(name, s.name, line, node.col_offset)
            u.lines.append(line)
            if stmt is not None:
                span = (stmt.lineno - 1, (stmt.end_lineno or stmt.lineno) - 1)
                if span not in u.statements:
                    u.statements.append(span)
    for u in out.values():
        u.bound_in = sorted(
            ((s.name, s.bound[u.name]) for s in col.scopes if u.name in s.bound and s.name != u.function),
            key=lambda x: x[1],
        )
    return sorted(out.values(), key=lambda u: (u.line, u.col, u.name))
