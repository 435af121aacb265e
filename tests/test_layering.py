"""The direction of imports between the packages, and a headless core that stays headless.

    capture -> read -> diff -> checks -> replay -> cli -> tui        (samples: a user program on top)
    capture.shared: the floor under all of them (what the writer and the reader share)

Every `import` in the package sources is read with `ast` (module level and inside functions;
`if TYPE_CHECKING:` blocks are annotations, not imports) and held to the table below. Names
loaded through strings (the command table, the checks' `CHECK_MODULES`) are not imports and are
not seen; every file of every folder is read all the same, so a check module is held to the table
whether or not anything imports it. No module imports itself back through others (a circle), not
even from inside a function.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NS = "graphtrain_inspect"
FOLDERS = ("capture", "inspector", "tui", "samples")
CORE_STAGES = ("read", "diff", "checks", "replay", "cli")

# layer -> layers (of ours) it may import. A layer is capture.shared (the floor: what the writer
# and the reader share, below both), capture (the rest of capture: the launcher and the in-worker
# code), inspector.<stage>, inspector.errors (the core's errors, a leaf every stage may raise
# from), inspector (the package's own __init__), tui or samples. The "may import" lists in the
# stage packages' docstrings and in docs/inspector.md are read and held to this table (below).
ALLOWED: dict[str, set[str]] = {
    "capture.shared": {"capture.shared"},
    "capture": {"capture.shared", "capture"},
    "inspector.errors": set(),
    "inspector.read": {"capture.shared", "inspector.errors", "inspector.read"},
    "inspector.diff": {"capture.shared", "inspector.errors", "inspector.read", "inspector.diff"},
    "inspector.checks": {"capture.shared", "inspector.errors", "inspector.read", "inspector.diff", "inspector.checks"},
    "inspector.replay": {
        "capture.shared",
        "capture",
        "inspector.errors",
        "inspector.read",
        "inspector.diff",
        "inspector.checks",
        "inspector.replay",
    },
    "inspector.cli": {
        "capture.shared",
        "capture",
        "inspector.errors",
        "inspector.read",
        "inspector.diff",
        "inspector.checks",
        "inspector.replay",
        "inspector.cli",
    },
    "inspector": set(),
    # not cli: what the TUI shares with a command (rank agreement, the simulated-world line) is
    # data, made in the core; the TUI starts commands (check, replay) as child processes
    "tui": {
        "capture.shared",
        "capture",
        "inspector.errors",
        "inspector.read",
        "inspector.diff",
        "inspector.checks",
        "inspector.replay",
        "tui",
    },
    "samples": {
        "capture.shared",
        "capture",
        "inspector.errors",
        "inspector.read",
        "inspector.diff",
        "inspector.checks",
        "samples",
    },
}
# What the floor may import besides itself: the standard library and orjson, nothing else (no
# torch: the reader imports it, and nothing in it runs inside training but by being imported).
FLOOR = "capture.shared"
FLOOR_THIRD_PARTY = {"orjson"}
# The one place the core reaches the UI: the `tui` command's launcher, inside its run function.
LAZY_UI = {("inspector/cli/tui.py", "tui")}
UI_LIBRARIES = ("textual", "rich")
# The TUI's modules that the app's worker threads call and tests use without a screen: no UI
# library, not even inside a function, and nothing of the TUI (every other tui module is UI).
HEADLESS_TUI = {"tui/session.py"}


def layer_of_module(name: str) -> str | None:
    """graphtrain_inspect.inspector.read.logscan -> inspector.read; None when not ours."""
    parts = name.split(".")
    if parts[0] != NS or len(parts) < 2 or parts[1] not in FOLDERS:
        return None
    if parts[1] == "inspector" and len(parts) > 2 and parts[2] in (*CORE_STAGES, "errors"):
        return f"inspector.{parts[2]}"
    if parts[1] == "capture" and len(parts) > 2 and parts[2] == "shared":
        return FLOOR
    return parts[1]


def layer_of_file(rel: str) -> str:
    parts = rel.split("/")
    if parts[0] == "inspector" and len(parts) > 2 and parts[1] in CORE_STAGES:
        return f"inspector.{parts[1]}"
    if parts[:2] == ["inspector", "errors.py"]:
        return "inspector.errors"
    if parts[0] == "capture" and len(parts) > 2 and parts[1] == "shared":
        return FLOOR
    return parts[0]


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(source: str) -> list[tuple[str, bool]]:
    """(imported module, at module level?) for every import outside `if TYPE_CHECKING:`."""
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking_block(child):
                continue
            if isinstance(child, ast.Import):
                found.extend((a.name, top) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                found.append((child.module, top))
                found.extend((f"{child.module}.{a.name}", top) for a in child.names)
            visit(child, top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(source), True)
    return found


def violations(rel: str, source: str) -> list[str]:
    """What a file at `rel` (relative to the repository root) imports against the table."""
    layer = layer_of_file(rel)
    bad = []
    for name, top in imports_of(source):
        head = name.split(".")[0]
        if head in FOLDERS:
            bad.append(f"{rel}: imports {name} outside the {NS} namespace")
            continue
        if head in UI_LIBRARIES and top and layer.startswith("inspector"):
            bad.append(f"{rel}: imports {name} at module level (the core stays headless)")
            continue
        target = layer_of_module(name)
        if rel in HEADLESS_TUI and (head in UI_LIBRARIES or target == "tui"):
            bad.append(f"{rel}: imports {name} (this module stays headless, even inside a function)")
            continue
        if layer == FLOOR and target is None and head not in (*sys.stdlib_module_names, *FLOOR_THIRD_PARTY, NS):
            bad.append(f"{rel}: imports {name} (the floor imports the standard library and orjson only)")
            continue
        if target is None or target == layer:
            continue
        if name == f"{NS}.capture" and FLOOR in ALLOWED[layer]:
            continue  # `from graphtrain_inspect.capture import shared` names the package, then the floor
        if (rel, target) in LAZY_UI and not top:
            continue
        if target not in ALLOWED[layer]:
            bad.append(f"{rel}: {layer} imports {name} ({target})")
    return bad


def package_sources():
    for folder in FOLDERS:
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            if "__pycache__" in dirpath or os.sep + "captures" in dirpath:
                continue
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(dirpath, f)
                    yield os.path.relpath(path, ROOT).replace(os.sep, "/"), open(path, encoding="utf-8").read()


def test_imports_go_one_way():
    problems = [v for rel, src in package_sources() for v in violations(rel, src)]
    assert problems == []


def test_the_table_catches_a_wrong_direction():
    """The checker itself: an import against the flow is reported, the allowed ones are not."""
    assert violations("inspector/read/logscan.py", "from graphtrain_inspect.inspector.checks import run_checks\n") == [
        "inspector/read/logscan.py: inspector.read imports graphtrain_inspect.inspector.checks (inspector.checks)",
        "inspector/read/logscan.py: inspector.read imports "
        "graphtrain_inspect.inspector.checks.run_checks (inspector.checks)",
    ]
    assert violations("inspector/read/logscan.py", "from graphtrain_inspect.capture import session\n")
    assert violations("inspector/read/logscan.py", "from graphtrain_inspect.capture.shared import logformat\n") == []
    assert violations("inspector/read/logscan.py", "from graphtrain_inspect.capture import shared\n") == []
    assert violations("inspector/read/logscan.py", "from graphtrain_inspect.capture import session\n")
    assert violations("inspector/checks/x.py", "from graphtrain_inspect.capture.launcher import claim\n")
    # the floor: itself, the standard library and orjson
    assert (
        violations(
            "capture/shared/x.py", "import os, orjson\nfrom graphtrain_inspect.capture.shared import logformat\n"
        )
        == []
    )
    assert violations("capture/shared/x.py", "from graphtrain_inspect.capture import session\n")
    assert violations("capture/shared/x.py", "def f():\n    from graphtrain_inspect.inspector.read import logscan\n")
    assert violations("capture/shared/x.py", "def f():\n    import torch\n")
    assert violations("capture/session.py", "from graphtrain_inspect.capture.shared import logformat\n") == []
    assert violations("inspector/diff/align.py", "def f():\n    import graphtrain_inspect.tui.app\n")
    assert violations("inspector/checks/rank_baked_constant.py", "import textual\n")
    assert violations("inspector/checks/rank_baked_constant.py", "def f():\n    import rich\n") == []
    assert violations("capture/wrap.py", "from graphtrain_inspect.inspector.read import logscan\n")
    assert violations("capture/wrap.py", "import inspector\n")  # outside the namespace
    assert violations("inspector/cli/tui.py", "def run(a):\n    from graphtrain_inspect.tui.app import App\n") == []
    assert violations("inspector/cli/tui.py", "from graphtrain_inspect.tui.app import App\n")
    assert (
        violations(
            "inspector/read/x.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from graphtrain_inspect.inspector.checks import Finding\n",
        )
        == []
    )
    assert (
        violations("inspector/read/x.py", "from graphtrain_inspect.inspector.errors import CaptureUnreadable\n") == []
    )
    assert violations("inspector/errors.py", "from graphtrain_inspect.inspector.read import logscan\n")
    assert violations("capture/wrap.py", "from graphtrain_inspect.inspector.errors import CaptureUnreadable\n")
    assert violations("tui/capture_loading.py", "from graphtrain_inspect.inspector.cli.ls import listing\n")
    assert violations("tui/app.py", "def f():\n    from graphtrain_inspect.inspector.cli import ls\n")
    assert violations("tui/app.py", "from graphtrain_inspect.inspector.checks.rank_agreement import x\n") == []
    assert violations("tui/session.py", "def f():\n    import textual.widgets\n")
    assert violations("tui/session.py", "def f():\n    from rich.text import Text\n")
    assert violations("tui/session.py", "def f():\n    from graphtrain_inspect.tui.widgets.compile_view import x\n")
    assert violations("tui/session.py", "from graphtrain_inspect.inspector.read.compile_rows import x\n") == []
    assert violations("tui/app.py", "def f():\n    import textual.widgets\n") == []


def test_every_package_source_was_read():
    """The walk above sees every stage (a moved folder would silently check nothing)."""
    layers = {layer_of_file(rel) for rel, _ in package_sources()}
    assert {"capture", "tui", "samples", *(f"inspector.{s}" for s in CORE_STAGES)} <= layers


# modules whose purpose needs torch: replaying passes
NEEDS_TORCH = {f"{NS}.inspector.replay.{m}" for m in ("replayer", "load", "resolve", "world")}


def _modules(folder: str) -> list[str]:
    mods = []
    for rel, _ in package_sources():
        if rel.startswith(folder + "/") and not rel.endswith("__main__.py"):
            mod = rel[:-3].replace("/", ".")
            mods.append(f"{NS}.{mod[: -len('.__init__')] if mod.endswith('.__init__') else mod}")
    return sorted(mods)


@pytest.mark.parametrize(
    "folder,heavy", [("inspector", ("textual", "rich", "torch")), ("capture", ("textual", "rich"))]
)
def test_core_imports_without_ui_or_torch(folder, heavy):
    """Each module imported alone in a fresh interpreter: no textual or rich (nor torch for the inspector)."""
    mods = [m for m in _modules(folder) if m not in NEEDS_TORCH]
    code = (
        "import importlib, sys, json\n"
        f"bad = {{}}\n"
        f"for m in {mods!r}:\n"
        "    importlib.import_module(m)\n"
        f"    loaded = sorted(k for k in {heavy!r} if k in sys.modules)\n"
        "    if loaded:\n"
        "        bad[m] = loaded\n"
        "        break\n"
        "print(json.dumps(bad))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "{}", f"heavy modules imported by: {r.stdout}"
    assert f"{NS}.inspector.cli.check" in mods or folder == "capture"


def test_tui_session_imports_without_ui():
    """The TUI's session imported alone in a fresh interpreter loads neither textual nor rich (the
    table above holds its own imports; this holds what the core modules it imports bring)."""
    code = f"import sys\nimport {NS}.tui.session\nprint(sorted(m for m in {UI_LIBRARIES!r} if m in sys.modules))\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_every_check_module_is_a_file_the_walk_read():
    from graphtrain_inspect.inspector.checks import CHECK_MODULES

    read = {rel for rel, _ in package_sources()}
    assert {f"inspector/checks/{m}.py" for m in CHECK_MODULES} <= read


def module_names() -> dict[str, str]:
    """Module name (graphtrain_inspect.inspector.read.logscan) -> its source, for every package source."""
    mods = {}
    for rel, src in package_sources():
        mod = rel[:-3].replace("/", ".")
        mods[f"{NS}.{mod[: -len('.__init__')] if mod.endswith('.__init__') else mod}"] = src
    return mods


def import_graph(mods: dict[str, str]) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (module level or in a function, outside `if
    TYPE_CHECKING:`). `from pkg import mod` is an edge to pkg.mod where that is a module, to pkg
    where it is a name pkg defines."""

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    def targets(source: str) -> set[str]:
        found: set[str] = set()

        def visit(node: ast.AST) -> None:
            for child in ast.iter_child_nodes(node):
                if _type_checking_block(child):
                    continue
                if isinstance(child, ast.Import):
                    found.update(a.name for a in child.names)
                elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                    for a in child.names:
                        sub = f"{child.module}.{a.name}"
                        found.add(sub if sub in mods else child.module)
                visit(child)

        visit(ast.parse(source))
        return found

    graph = {}
    for mod, src in mods.items():
        graph[mod] = {t for name in targets(src) if (t := owner(name)) is not None and t != mod}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: each strongly connected set of two or more modules, sorted (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_import_circle():
    assert circles(import_graph(module_names())) == []


def test_a_circle_is_found_even_through_a_function():
    """The finder itself: a lazy import back (the way rank_classes once read context's
    switch) is a circle; a `TYPE_CHECKING` import and `from package import submodule` are not."""
    a, b, pkg = f"{NS}.inspector.checks.a", f"{NS}.inspector.checks.b", f"{NS}.inspector.checks"
    mods = {
        pkg: "",
        a: f"from {NS}.inspector.checks import b\n",
        b: f"def f():\n    from {NS}.inspector.checks import a\n",
    }
    assert circles(import_graph(mods)) == [[a, b]]
    mods[b] = f"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from {NS}.inspector.checks.a import X\n"
    assert circles(import_graph(mods)) == []
    mods[pkg] = f"def run():\n    from {NS}.inspector.checks import a\n"
    assert import_graph(mods)[a] == {b}  # the package itself is not imported back
    assert circles(import_graph(mods)) == []


# -- the "may import" lists written for readers, held to the table ---------------------------------

MAY_IMPORT = "May import (of ours):"


def layers_named(text: str) -> set[str] | None:
    """The layers a "may import" text names: its backticked names up to the first `;` or the end of
    its sentence (what follows qualifies them); an empty set for `nothing`."""
    names: set[str] = set()
    for m in re.finditer(r"`([^`]*)`|;|\.(?:\s|$)|(\bnothing\b)", text):
        if m.group(1) is not None:
            names.add(m.group(1))
        elif m.group(2) is not None:
            return names
        else:
            break
    return names


def documented_rules() -> dict[str, dict[str, set[str]]]:
    """Where each layer's "may import" list is written -> {layer: the layers it names}: the table in
    docs/inspector.md (one row a package) and the stage packages' docstrings."""
    found: dict[str, dict[str, set[str]]] = {"docs/inspector.md": {}}
    text = open(os.path.join(ROOT, "docs", "inspector.md"), encoding="utf-8").read()
    table = text.split("| package | owns | may import (of ours) |\n", 1)[1].split("\n\n", 1)[0]
    for line in table.splitlines()[1:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        path = cells[0].strip("`")
        named = layers_named(cells[2])
        assert named is not None
        found["docs/inspector.md"][layer_of_file(path + "x.py" if path.endswith("/") else path)] = named
    for rel, src in package_sources():
        if not rel.endswith("__init__.py") or MAY_IMPORT not in src:
            continue
        doc = ast.get_docstring(ast.parse(src)) or ""
        if MAY_IMPORT in doc:
            named = layers_named(doc.split(MAY_IMPORT, 1)[1])
            assert named is not None
            found[rel] = {layer_of_file(rel): named}
    return found


def test_the_documented_import_rules_are_the_table():
    """docs/inspector.md's "may import" column and each stage package's docstring say what the table
    above enforces: every layer in the docs, every core stage's package in its docstring."""
    found = documented_rules()
    assert set(found["docs/inspector.md"]) == set(ALLOWED) - {"inspector"}
    assert {f"inspector/{s}/__init__.py" for s in CORE_STAGES} <= set(found)
    wrong = [
        f"{where}: {layer} may import {sorted(named)}, the table says {sorted(ALLOWED[layer] - {layer})}"
        for where, rules in found.items()
        for layer, named in rules.items()
        if named != ALLOWED[layer] - {layer}
    ]
    assert wrong == []


def test_a_documented_rule_is_read_as_written():
    assert layers_named(" `capture.shared`, `inspector.read`. Never `inspector.checks`.") == {
        "capture.shared",
        "inspector.read",
    }
    assert layers_named(" `capture`; `tui` only lazily, from `cli/tui.py` |") == {"capture"}
    assert layers_named(" nothing else |") == set()
