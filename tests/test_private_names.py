"""No private name of ours is imported from another module.

A name that starts with `_` is its module's own business; a module that needs another's is an
interface, and is named as one (public), or the code moves to the module that uses it. Every
`from graphtrain_inspect... import _name` in the package sources and the tests is read with `ast`
(module level, in functions, under `if TYPE_CHECKING:`), and in the package sources every
`module._name` through a name imported from ours. Torch's private APIs are not ours: they are
feature-detected where they are used.
"""

from __future__ import annotations

import ast
import os

from tests.test_layering import NS, ROOT, package_sources

# Imports of private names still being made public elsewhere: (importing file, module, name).
NOT_YET: set[tuple[str, str, str]] = set()


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(source: str, *, through_names: bool = False) -> list[tuple[str, str]]:
    """(module, name) for every `from <ours> import _name` (dunders are not private); with
    `through_names`, also each `x._name` where `x` is a name imported from ours (a module or a
    class: `module._helper`), as (the module x came from + "." + x, name)."""
    tree = ast.parse(source)
    found = []
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == NS:
            for a in node.names:
                bound[a.asname or a.name] = f"{node.module}.{a.name}"
                if _private(a.name):
                    found.append((node.module or "", a.name))
        elif isinstance(node, ast.Import):
            bound.update({a.asname: a.name for a in node.names if a.asname and a.name.split(".")[0] == NS})
    if through_names:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr):
                if node.value.id in bound:
                    found.append((bound[node.value.id], node.attr))
    return found


def suite_sources():
    for dirpath, _, files in os.walk(os.path.join(ROOT, "tests")):
        if "__pycache__" in dirpath:
            continue
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                yield os.path.relpath(path, ROOT).replace(os.sep, "/"), open(path, encoding="utf-8").read()


def test_no_private_name_is_imported_across_modules():
    found = {
        (rel, mod, name) for rel, src in package_sources() for mod, name in private_imports(src, through_names=True)
    }
    # a test may reach a module's inside through the module (monkeypatch), never import from it
    found |= {(rel, mod, name) for rel, src in suite_sources() for mod, name in private_imports(src)}
    assert sorted(found - NOT_YET) == []
    assert sorted(NOT_YET - found) == [], "made public: take them off NOT_YET"


def test_the_finder_sees_every_kind_of_import():
    src = (
        "from typing import TYPE_CHECKING\n"
        f"from {NS}.inspector.read.logscan import LogFile, _hidden as shown\n"
        "if TYPE_CHECKING:\n"
        f"    from {NS}.inspector.read.capture_records import _Typed\n"
        "def f():\n"
        f"    from {NS}.capture.session import _Frame, __all__\n"
        "from torch._dynamo import _private\n"
        f"import {NS}.inspector.read.logscan\n"
    )
    assert private_imports(src) == [
        (f"{NS}.inspector.read.logscan", "_hidden"),
        (f"{NS}.inspector.read.capture_records", "_Typed"),
        (f"{NS}.capture.session", "_Frame"),
    ]
    through = f"from {NS}.capture import session\nfrom {NS}.capture.x import Y\nsession._quiet()\nY._z\nos._exit(1)\n"
    assert private_imports(through) == []
    assert sorted(private_imports(through, through_names=True)) == [
        (f"{NS}.capture.session", "_quiet"),
        (f"{NS}.capture.x.Y", "_z"),
    ]
