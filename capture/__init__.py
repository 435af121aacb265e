"""Capture every graph pass on every rank; runs inside training workers (torch, stdlib, orjson).

Importing this package imports neither torch nor anything heavy: the inspector reads the log
format from `capture.shared` (what writer and reader share), and `record_pass` costs nothing
outside a capture. `record_pass` is loaded on first use, so a reader importing
`graphtrain_inspect.capture.shared.logformat` does not load the writer.
"""

from typing import Any

__all__ = ["record_pass"]


def __getattr__(name: str) -> Any:
    if name == "record_pass":
        from graphtrain_inspect.capture.api import record_pass

        return record_pass
    raise AttributeError(f"module 'capture' has no attribute {name!r}")
