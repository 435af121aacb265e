"""Capture every graph pass on every rank; runs inside training workers (torch, stdlib, orjson).

Importing this package imports neither torch nor anything heavy: the inspector reads the log
format from `capture.logformat`, and `record_pass` costs nothing outside a capture.
"""

from capture.api import record_pass

__all__ = ["record_pass"]
