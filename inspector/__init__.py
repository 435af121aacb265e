"""The headless core of graphtrain-inspect, in stages of the data flow:

    capture (logs) -> read -> diff -> checks -> replay -> cli (and the tui on top)

The documented API (docs/inspector.md) is importable from here; each name is loaded when first
used, so importing one stage never loads a later one (read stays free of diff and checks):

    from graphtrain_inspect.inspector import open_capture, run_checks, diff_tables
"""

from __future__ import annotations

import importlib
from typing import Any

_API = {
    "open_capture": "graphtrain_inspect.inspector.read.capture_index",
    "Capture": "graphtrain_inspect.inspector.read.capture_reader",
    "CaptureUnreadable": "graphtrain_inspect.inspector.errors",
    "GraphTables": "graphtrain_inspect.inspector.read.graphmodel",
    "StageIndex": "graphtrain_inspect.inspector.read.stages",
    "diff_tables": "graphtrain_inspect.inspector.diff.graph_diff",
    "rank_diff": "graphtrain_inspect.inspector.diff.rank_diffs",
    "pass_diffs": "graphtrain_inspect.inspector.diff.graph_diff",
    "text_diff": "graphtrain_inspect.inspector.diff.graph_diff",
    "run_checks": "graphtrain_inspect.inspector.checks",
    "check_report": "graphtrain_inspect.inspector.checks",
    "Finding": "graphtrain_inspect.inspector.checks",
}

__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
