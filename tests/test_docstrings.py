"""Module docstrings of the core name only what exists.

Two things are resolved in every module docstring of inspector/:

* dotted names of ours (`inspector.replay.plan`, `capture.shared.signing.KeyProblem`,
  `graphtrain_inspect.inspector.checks`): the longest importable module, then attributes;
* the examples (lines indented under the text that parse as Python): a name called
  (`open_capture(DIR)`) is defined in the module, in a module of the same package, or in the
  inspector's documented API; an attribute of a variable made by calling a class of ours
  (`r = Replayer(...)`, then `r.run()`) is one the class has.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import os
import pkgutil
import re
import textwrap

import pytest

from tests.test_layering import NS, ROOT

DOTTED = re.compile(r"(?<![\w./])((?:graphtrain_inspect|inspector|capture|tui)(?:\.[A-Za-z_]\w*)+)(?![\w(])")


def _core_modules() -> list[tuple[str, str]]:
    found = []
    for dirpath, _, files in os.walk(os.path.join(ROOT, "inspector")):
        if "__pycache__" in dirpath:
            continue
        for f in sorted(files):
            if f.endswith(".py") and f != "__main__.py":
                rel = os.path.relpath(os.path.join(dirpath, f), ROOT)
                mod = f"{NS}." + rel[:-3].replace(os.sep, ".").removesuffix(".__init__")
                found.append((rel, mod))
    return sorted(found)


def _docstring(rel: str) -> str:
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return ast.get_docstring(ast.parse(f.read())) or ""


def resolve(dotted: str) -> bool:
    """Whether `dotted` (ours, with or without the namespace) names a module or an attribute of one."""
    parts = dotted.split(".")
    if parts[0] != NS:
        parts = [NS, *parts]
    for cut in range(len(parts), 1, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def example_lines(doc: str) -> list[str]:
    """The docstring's indented lines that parse as Python statements (the examples)."""
    out = []
    for line in doc.splitlines():
        if not line.startswith("    ") or not line.strip():
            continue
        code = textwrap.dedent(line).split("  #")[0].rstrip()
        try:
            ast.parse(code)
        except SyntaxError:
            continue
        out.append(code)
    return out


def _known_names(module: str) -> set[str]:
    """What an example in `module` may call: its own names, its package's modules' names, the API."""
    names = set(dir(importlib.import_module(module)))
    package = module if hasattr(importlib.import_module(module), "__path__") else module.rsplit(".", 1)[0]
    pkg = importlib.import_module(package)
    for info in pkgutil.iter_modules(pkg.__path__):
        names |= set(dir(importlib.import_module(f"{package}.{info.name}")))
    names |= set(importlib.import_module(f"{NS}.inspector").__all__)
    return names


def example_problems(module: str, doc: str) -> list[str]:
    problems: list[str] = []
    lines = example_lines(doc)
    if not lines:
        return problems
    known = _known_names(module)
    mod = importlib.import_module(module)
    made: dict[str, type] = {}  # variable -> the class of ours it was made from
    for code in lines:
        tree = ast.parse(code)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                name = node.func.id
                if name not in known and not hasattr(builtins, name):
                    problems.append(f"{code!r}: {name} is not defined in {module}, its package or the API")
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in made:
                cls = made[node.value.id]
                fields = getattr(cls, "__dataclass_fields__", {}) or {}
                if not hasattr(cls, node.attr) and node.attr not in fields and node.attr not in _init_attrs(cls):
                    problems.append(f"{code!r}: {cls.__name__} has no attribute {node.attr}")
        for stmt in tree.body:
            if (
                isinstance(stmt, ast.Assign)
                and isinstance(stmt.value, ast.Call)
                and isinstance(stmt.value.func, ast.Name)
            ):
                cls = _class_named(stmt.value.func.id, mod)
                for t in stmt.targets:
                    if isinstance(t, ast.Name) and cls is not None:
                        made[t.id] = cls
    return problems


def _class_named(name: str, mod) -> type | None:
    obj = getattr(mod, name, None)
    return obj if isinstance(obj, type) and obj.__module__.startswith(NS) else None


def _init_attrs(cls: type) -> set[str]:
    """Attributes set as `self.X = ...` in the class's methods."""
    import inspect

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return set()
    return {
        t.attr
        for node in ast.walk(tree)
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    }


@pytest.mark.parametrize("rel,module", _core_modules(), ids=lambda v: v)
def test_module_docstring_names_what_exists(rel, module):
    doc = _docstring(rel)
    missing = [d for d in DOTTED.findall(doc) if not d.endswith(".py") and not resolve(d)]  # tui.py: a file
    assert missing == [], f"{rel}: its docstring names {missing}, which do not exist"
    assert example_problems(module, doc) == []


def test_the_resolver_catches_what_does_not_exist():
    """The checker itself, on two names once stale in replayer.py's docstring."""
    assert resolve("inspector.replay.plan")
    assert resolve("capture.shared.signing.KeyProblem")
    assert not resolve("inspector.replay_plan")
    assert not resolve("inspector.replay.graph_view")
    doc = "Example:\n\n    r = Replayer(cap, target)\n    out = r.run()\n    r.check_outcome(out)\n"
    assert example_problems(f"{NS}.inspector.replay.replayer", doc) == [
        "'r.check_outcome(out)': Replayer has no attribute check_outcome"
    ]
    assert example_problems(f"{NS}.inspector.read.capture_index", "    cap = no_such_opener(DIR)\n") == [
        f"'cap = no_such_opener(DIR)': no_such_opener is not defined in {NS}.inspector.read.capture_index, "
        "its package or the API"
    ]
