"""No private name of ours is imported from another module.

A name that starts with `_` is its module's own business; a module that needs another's is an
interface, and is named as one (public), or the code moves to the module that uses it. Every
`from graphtrain_inspect... import _name` in the package sources and the tests is read with `ast`
(module level, in functions, under `if TYPE_CHECKING:`). Torch's private APIs are not ours: they
are feature-detected where they are used.
"""

from __future__ import annotations

import ast
import os

from tests.test_layering import NS, ROOT, package_sources

# Imports of private names still being made public elsewhere: (importing file, module, name).
NOT_YET = {
    ("inspector/cli/html_report/contents.py", f"{NS}.inspector.cli.check", "_evidence_line"),
    ("inspector/diff/anchored.py", f"{NS}.inspector.diff.align", "_lis"),
    ("inspector/diff/anchored.py", f"{NS}.inspector.diff.node_diff", "_compare"),
    ("inspector/diff/graph_diff.py", f"{NS}.inspector.diff.align", "_align"),
    ("inspector/diff/graph_diff.py", f"{NS}.inspector.diff.align", "_merge_order"),
    ("inspector/diff/graph_diff.py", f"{NS}.inspector.diff.node_diff", "_NONE"),
    ("inspector/diff/graph_diff.py", f"{NS}.inspector.diff.node_diff", "_compare"),
    ("inspector/diff/graph_diff.py", f"{NS}.inspector.diff.node_diff", "_same_meta"),
    ("inspector/diff/line_match.py", f"{NS}.inspector.diff.align", "_lis"),
    ("inspector/diff/line_match.py", f"{NS}.inspector.diff.align", "_match_gap"),
    ("tests/diff/test_align.py", f"{NS}.inspector.diff.align", "_lis"),
    ("tests/diff/test_align.py", f"{NS}.inspector.diff.align", "_lis_of"),
}


def private_imports(source: str) -> list[tuple[str, str]]:
    """(module, name) for every `from <ours> import _name` (dunders are not private)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == NS:
            for a in node.names:
                if a.name.startswith("_") and not (a.name.startswith("__") and a.name.endswith("__")):
                    found.append((node.module or "", a.name))
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
        (rel, mod, name) for rel, src in (*package_sources(), *suite_sources()) for mod, name in private_imports(src)
    }
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
