"""Whether a `--pass MODULE:QUALNAME` can resolve, found by the launcher before training starts.

The launcher must not import the user's module (its import can take minutes, start CUDA, or need
the set-up a worker makes first), so the module is located with import machinery that runs no
code, and its source is read with `ast`: a name it never binds at module level is a typo to report
at once, not a capture error found after the training ran. Whatever this cannot tell (a module it
cannot find from here, a star import, a module-level `__getattr__`, `globals()` writes) is left to
the workers, which record what went wrong.
"""

from __future__ import annotations

import ast
import difflib
import importlib.machinery
import importlib.util
import sys

from graphtrain_inspect.capture.named_passes import parse_target


def why_unresolvable(target: str) -> str | None:
    """One line saying why `target` cannot resolve, or None when it may (or this cannot tell).
    `target` has passed `parse_target`."""
    module, qual = parse_target(target)
    found, missing = _locate(module)
    if missing:
        return f"--pass {target}: {missing}"
    if found is None:
        return None
    try:
        with open(found, "rb") as f:
            tree = ast.parse(f.read(), filename=found)
    except (OSError, SyntaxError, ValueError):
        return None  # the worker's import says what is wrong with it
    names = _module_names(tree)
    first = qual.split(".")[0]
    if names is None or first in names:
        return None
    close = difflib.get_close_matches(first, sorted(names), n=1)
    hint = f"; did you mean {module}:{close[0]}{qual[len(first) :]}?" if close else ""
    return f"--pass {target}: module {module} ({found}) has no attribute {first!r}{hint}"


def _locate(module: str) -> tuple[str | None, str | None]:
    """(the source file of `module`, None), (None, why it does not exist), or (None, None) when
    this process cannot tell. Runs no code of the module or its packages."""
    parts = module.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])  # a top-level name: found, not imported
    except (ImportError, ValueError):
        return None, None
    if spec is None:
        return None, None  # perhaps on the workers' path only (their cwd, another interpreter)
    for i in range(1, len(parts)):
        locations = spec.submodule_search_locations
        if locations is None:
            return None, f"{'.'.join(parts[:i])} is a module, not a package: no module named {module!r}"
        spec = _find_spec(".".join(parts[: i + 1]), list(locations))
        if spec is None:
            return None, f"no module named {module!r} (package {'.'.join(parts[:i])} has no {parts[i]!r})"
    origin = spec.origin
    return (origin if origin and origin.endswith(".py") else None), None


def _find_spec(fullname: str, path: list[str]) -> importlib.machinery.ModuleSpec | None:
    """A submodule's spec from the finders an import would ask, in their order, without importing
    it or its parents: the path finder, and finders of editable installs that map packages to
    other folders (setuptools', for this project's own `graphtrain_inspect.*`)."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = find(fullname, path)
        except Exception:  # noqa: BLE001 - a third-party finder that cannot answer this one
            continue
        if spec is not None:
            return spec
    return None


def _module_names(tree: ast.Module) -> set[str] | None:
    """The names a module binds at its top level (inside if/try/with/for too), or None when it
    may bind others this cannot see."""
    names: set[str] = set()

    def targets(node: ast.AST) -> None:
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                names.add(n.id)

    def visit(body: list[ast.stmt]) -> bool:
        for st in body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(st.name)
                if st.name == "__getattr__":
                    return False
            elif isinstance(st, (ast.Import, ast.ImportFrom)):
                for a in st.names:
                    if a.name == "*":
                        return False
                    names.add(a.asname or a.name.split(".")[0])
            elif isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for t in st.targets if isinstance(st, ast.Assign) else [st.target]:
                    targets(t)
            elif isinstance(st, (ast.For, ast.AsyncFor)):
                targets(st.target)
            elif isinstance(st, (ast.With, ast.AsyncWith)):
                for item in st.items:
                    if item.optional_vars is not None:
                        targets(item.optional_vars)
            for sub in ("body", "orelse", "finalbody"):
                if isinstance(st, (ast.If, ast.Try, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)):
                    if not visit(getattr(st, sub, []) or []):
                        return False
            if isinstance(st, ast.Try):
                for h in st.handlers:
                    if not visit(h.body):
                        return False
        return True

    if not visit(tree.body):
        return None
    # `globals()[...] = ...` or `setattr(sys.modules[__name__], ...)` at import bind names no
    # statement shows (inside a function they run later, if ever: not counted)
    top = [st for st in tree.body if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    if any(isinstance(n, ast.Name) and n.id in ("globals", "setattr", "vars") for st in top for n in ast.walk(st)):
        return None
    return names
