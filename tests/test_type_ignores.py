"""The type checker's escape hatches stay few and explained: every `type: ignore` in capture/ and
inspector/ names its error codes and says why after them (`# type: ignore[code]  # why`). mypy
itself (.ci/typecheck, `warn_unused_ignores`) fails on one that suppresses nothing."""

from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IGNORE = re.compile(r"#\s*type:\s*ignore")
EXPLAINED = re.compile(r"#\s*type:\s*ignore\[[a-z-]+(?:,\s*[a-z-]+)*\]  # \S")


def unexplained(text: str) -> list[int]:
    """Line numbers (1-based) of the `type: ignore`s without codes or a reason."""
    return [i for i, line in enumerate(text.splitlines(), 1) if IGNORE.search(line) and not EXPLAINED.search(line)]


def test_every_type_ignore_says_why():
    bad = []
    for folder in ("capture", "inspector"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(dirpath, f)
                    with open(path, encoding="utf-8") as fh:
                        bad += [f"{os.path.relpath(path, ROOT)}:{n}" for n in unexplained(fh.read())]
    assert bad == []


def test_the_rule_itself():
    assert unexplained("x = f()  # type: ignore[arg-type]  # f is untyped\n") == []
    assert unexplained("x = f()  # type: ignore[arg-type, union-attr]  # both, from torch's stubs\n") == []
    assert unexplained("x = f()  # type: ignore[arg-type]\n") == [1]
    assert unexplained("x = f()  # type: ignore  # no code\n") == [1]
    assert unexplained("\nx = f()  # type: ignore\n") == [2]
