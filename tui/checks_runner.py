"""Run `graphtrain-inspect check --json` in a child process and read its findings back.

The checks read every graph of the capture; in their own process they neither hold the app's
interpreter lock (the interface stays smooth while they run) nor leave their memory in the app
when they are done, and quitting the app stops them.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import orjson

from graphtrain_inspect.inspector.checks import Finding


@dataclass
class CheckResult:
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    not_run: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


def check_argv(path: str, source: str = "auto", shared_graph: bool = False) -> list[str]:
    return [
        sys.executable,
        "-m",
        "graphtrain_inspect.inspector.cli",
        "check",
        path,
        "--json",
        "--source",
        source,
        *(["--shared-graph"] if shared_graph else []),
    ]


def finding_from_json(d: dict[str, Any]) -> Finding:
    return Finding(
        kind=d["kind"],
        severity=d["severity"],
        message=d.get("message") or "",
        introduced_by=d.get("introduced_by"),
        pass_=d.get("pass"),
        ranks=list(d.get("ranks") or []),
        graph=d.get("graph"),
        subgraph=d.get("subgraph"),
        node=d.get("node"),
        evidence=d.get("evidence") or {},
        pipeline=d.get("pipeline"),
        introduced_seq=d.get("introduced_seq"),
        last_seq=d.get("last_seq"),
        layer=d.get("layer") or "graph",
        source=d.get("source") if isinstance(d.get("source"), dict) else None,
        consequences=[finding_from_json(c) for c in d.get("consequences") or [] if isinstance(c, dict)],
    )


def parse_report(stdout: bytes) -> CheckResult:
    doc = orjson.loads(stdout)
    summary = doc.get("summary") or {}
    return CheckResult(
        [finding_from_json(f) for f in doc.get("findings") or []],
        list(summary.get("notes") or []),
        list(summary.get("not_run") or []),
    )


def run_checks(path: str, source: str = "auto", *, shared_graph: bool = False, started=None) -> CheckResult:
    """Run the checks; `started(proc)` is called with the child so the caller can stop it."""
    try:
        proc = subprocess.Popen(
            check_argv(path, source, shared_graph),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
    except OSError as e:
        return CheckResult(error=f"cannot run the checks: {e}")
    if started is not None:
        started(proc)
    out, err = proc.communicate()
    if proc.returncode not in (0, 1) or not out.strip():
        last = err.decode("utf-8", "replace").strip().splitlines()
        return CheckResult(error=f"check exited with {proc.returncode}" + (f": {last[-1]}" if last else ""))
    try:
        return parse_report(out)
    except (orjson.JSONDecodeError, KeyError, TypeError) as e:
        return CheckResult(error=f"cannot read the check report: {e}")
