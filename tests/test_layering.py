"""The direction of imports between the packages, and a headless core that stays headless.

    capture -> read -> diff -> checks -> replay -> cli -> tui        (samples: a user program on top)

Every `import` in the package sources is read with `ast` (module level and inside functions;
`if TYPE_CHECKING:` blocks are annotations, not imports) and held to the table below. Names
loaded through strings (the command table) are not imports and are not seen; the checks are
registered by plain imports (`inspector.checks.check_modules`), so the table holds them too.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NS = "graphtrain_inspect"
FOLDERS = ("capture", "inspector", "tui", "samples")
CORE_STAGES = ("read", "diff", "checks", "replay", "cli")

# layer -> layers (of ours) it may import. A layer is capture, inspector.<stage>, inspector.errors
# (the core's errors, a leaf every stage may raise from), inspector (the package's own __init__),
# tui or samples.
ALLOWED: dict[str, set[str]] = {
    "capture": {"capture"},
    "inspector.errors": set(),
    "inspector.read": {"inspector.errors", "inspector.read"},  # + capture.logformat / capture.symbol_usage, below
    "inspector.diff": {"inspector.errors", "inspector.read", "inspector.diff"},
    "inspector.checks": {"inspector.errors", "inspector.read", "inspector.diff", "inspector.checks"},
    "inspector.replay": {
        "capture",
        "inspector.errors",
        "inspector.read",
        "inspector.diff",
        "inspector.checks",
        "inspector.replay",
    },
    "inspector.cli": {
        "capture",
        "inspector.errors",
        "inspector.read",
        "inspector.diff",
        "inspector.checks",
        "inspector.replay",
        "inspector.cli",
    },
    "inspector": set(),
    "tui": {
        "capture",
        "inspector.errors",
        "inspector.read",
        "inspector.diff",
        "inspector.checks",
        "inspector.replay",
        "inspector.cli",
        "tui",
    },
    "samples": {"capture", "inspector.errors", "inspector.read", "inspector.diff", "inspector.checks", "samples"},
}
# What read, diff and checks may take from capture: the log format and the symbol rules the writer
# and the reader share, the signature the launcher writes and replay verifies (signing), and the
# one escaping of capture text for terminals the launcher's summary and the commands share
# (terminal_text). Nothing that runs inside training.
SHARED_FORMAT = {
    f"{NS}.capture.logformat",
    f"{NS}.capture.symbol_usage",
    f"{NS}.capture.rank_ranges",
    f"{NS}.capture.signing",
    f"{NS}.capture.terminal_text",
}
# The one place the core reaches the UI: the `tui` command's launcher, inside its run function.
LAZY_UI = {("inspector/cli/tui.py", "tui")}
UI_LIBRARIES = ("textual", "rich")


def layer_of_module(name: str) -> str | None:
    """graphtrain_inspect.inspector.read.logscan -> inspector.read; None when not ours."""
    parts = name.split(".")
    if parts[0] != NS or len(parts) < 2 or parts[1] not in FOLDERS:
        return None
    if parts[1] == "inspector" and len(parts) > 2 and parts[2] in (*CORE_STAGES, "errors"):
        return f"inspector.{parts[2]}"
    return parts[1]


def layer_of_file(rel: str) -> str:
    parts = rel.split("/")
    if parts[0] == "inspector" and len(parts) > 2 and parts[1] in CORE_STAGES:
        return f"inspector.{parts[1]}"
    if parts[:2] == ["inspector", "errors.py"]:
        return "inspector.errors"
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
        if target is None or target == layer:
            continue
        if layer in ("inspector.read", "inspector.diff", "inspector.checks") and target == "capture":
            # `from graphtrain_inspect.capture import logformat` names the package, then the module
            if name == f"{NS}.capture" or any(name == m or name.startswith(m + ".") for m in SHARED_FORMAT):
                continue
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
    assert violations("inspector/read/logscan.py", "from graphtrain_inspect.capture import logformat\n") == []
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


def test_the_check_modules_are_imports_the_table_sees():
    from graphtrain_inspect.inspector.checks import CHECKS

    with open(os.path.join(ROOT, "inspector", "checks", "__init__.py")) as f:
        seen = {name for name, _ in imports_of(f.read())}
    assert {f"{NS}.inspector.checks.{name.replace('-', '_')}" for name in CHECKS} <= seen
