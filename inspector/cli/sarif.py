"""`check --sarif FILE`: the findings as SARIF 2.1.0 (OASIS), the format code-scanning services read,
so a pull request that adds a rank-baked literal is annotated on the line that made it.

One run of tool `graphtrain-inspect`; one rule per finding kind (`ruleId` = the kind, its check's
DESCRIPTION); levels: error -> error, warning -> warning, info -> note. One result per root
cause (checks.root_causes), its consequences its `relatedLocations`; the message is the finding's
with its evidence lines under it. A finding is located at
its source line (the node's innermost stack frame, through the kernel's FX node for generated
code): the file relative to the current directory (`uriBaseId` %SRCROOT%) when it is under it, or
when the capture was recorded elsewhere and the tail of its path names a file here (a GPU host's
`/work/main/tests/x.py` is `tests/x.py` of this checkout); an absolute file URI otherwise. A
finding with no source line (about the capture itself) is located at the rank's log. The
rest (pass, graph, node, ranks, evidence) is in each result's `properties`. Message and snippet
text is escaped as the terminal's is (capture.shared.terminal_text): a code-scanning page shows it to
people as text; `properties` keep the capture's text exact, as `--json` does.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.capture.shared.terminal_text import escape_controls

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {"error": "error", "warning": "warning", "info": "note"}
SRCROOT = "%SRCROOT%"


def _rules() -> tuple[list[dict[str, Any]], dict[str, int]]:
    from graphtrain_inspect.inspector.checks import FINDING_KINDS, KIND_OF_CHECK, check_modules

    descriptions: dict[str, list[str]] = {}
    for name, module in check_modules().items():
        kind = KIND_OF_CHECK.get(name, name)
        descriptions.setdefault(kind, []).append(module.DESCRIPTION)
    rules: list[dict[str, Any]] = [
        {"id": kind, "name": kind, "shortDescription": {"text": "; ".join(descriptions.get(kind, [kind]))}}
        for kind in FINDING_KINDS
    ]
    return rules, {r["id"]: i for i, r in enumerate(rules)}


def artifact(path: str, root: Path) -> dict[str, Any]:
    """An artifactLocation for a file named by a capture: relative to `root` where possible."""
    p = Path(path)
    if p.is_absolute():
        try:
            return {"uri": p.resolve().relative_to(root).as_posix(), "uriBaseId": SRCROOT}
        except ValueError:
            pass
        parts = PurePosixPath(path).parts[1:]
        for i in range(len(parts) - 1):  # the longest tail that names a file here
            tail = Path(*parts[i:])
            if (root / tail).is_file():
                return {"uri": tail.as_posix(), "uriBaseId": SRCROOT}
        return {"uri": p.as_uri()}
    return {"uri": PurePosixPath(path).as_posix(), "uriBaseId": SRCROOT}


def _location(f, cap, root: Path) -> dict[str, Any] | None:
    src = f.source or {}
    if src.get("file") and isinstance(src.get("line"), int) and src["line"] >= 1:
        region: dict[str, Any] = {"startLine": src["line"]}
        if src.get("code"):
            region["snippet"] = {"text": escape_controls(src["code"])}
        return {"physicalLocation": {"artifactLocation": artifact(src["file"], root), "region": region}}
    for r in f.ranks or list(getattr(cap, "ranks", [])):
        log = cap.log_file(r) if cap is not None else None
        path = getattr(log, "path", None)
        if path:
            return {"physicalLocation": {"artifactLocation": artifact(os.path.abspath(path), root)}}
    where = getattr(cap, "path", None)
    if isinstance(where, str) and getattr(cap, "manifest", None) and os.path.isdir(where):
        # a capture whose ranks wrote nothing (its training failed first): its manifest says how it ended
        return {
            "physicalLocation": {
                "artifactLocation": artifact(os.path.abspath(os.path.join(where, logformat.MANIFEST_NAME)), root)
            }
        }
    return None


def _text(f) -> str:
    """A result's message: the finding's, then its evidence lines (each check renders its own)."""
    from graphtrain_inspect.inspector.checks.evidence import evidence_lines

    return escape_controls("\n".join([f.message, *evidence_lines(f)]))


def _placed(f, cap, base: Path) -> dict[str, Any] | None:
    """The finding's location, with its node as a logical location."""
    loc = _location(f, cap, base)
    if loc is not None and f.node:
        loc["logicalLocations"] = [
            {
                "name": f.node,
                "fullyQualifiedName": ":".join(x for x in (f.pipeline, f.subgraph, f.node) if x),
                "kind": "variable",
            }
        ]
    return loc


def _result(f, cap, base: Path, index: dict[str, int]) -> dict[str, Any]:
    """One result per root cause; its consequences are its relatedLocations (code-scanning pages
    list them under the alert), each with its own kind, severity and message, and whole in
    `properties.consequences` as `--json` has them."""
    res: dict[str, Any] = {
        "ruleId": f.kind,
        "level": LEVELS.get(f.severity, "note"),
        "message": {"text": _text(f)},
        "properties": {
            k: v for k, v in f.to_json().items() if k not in ("kind", "severity", "message", "source") and v is not None
        },
    }
    if f.kind in index:
        res["ruleIndex"] = index[f.kind]
    loc = _placed(f, cap, base)
    if loc is not None:
        res["locations"] = [loc]
    related = []
    for i, c in enumerate(f.consequences, 1):
        rel = _placed(c, cap, base) or {}
        rel["id"] = i
        rel["message"] = {"text": escape_controls(f"consequence ({c.severity} {c.kind}): {c.message}")}
        related.append(rel)
    if related:
        res["relatedLocations"] = related
    return res


def to_sarif(report, version: str | None = None, root: str | None = None) -> dict[str, Any]:
    base = Path(root or os.getcwd()).resolve()
    rules, index = _rules()
    results = [_result(f, report.cap, base, index) for f in report.findings]
    driver: dict[str, Any] = {"name": "graphtrain-inspect", "rules": rules}
    if version:
        driver["version"] = version
    run: dict[str, Any] = {
        "tool": {"driver": driver},
        "originalUriBaseIds": {SRCROOT: {"uri": base.as_uri() + "/"}},
        "results": results,
        "invocations": [
            {
                "executionSuccessful": True,
                "toolExecutionNotifications": [
                    {"level": "note", "message": {"text": escape_controls(f"not run: {n.check}: {n.reason}")}}
                    for n in report.not_run
                ]
                + [{"level": "note", "message": {"text": escape_controls(n)}} for n in report.notes],
            }
        ],
    }
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}
