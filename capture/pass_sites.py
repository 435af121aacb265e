"""Where a pass made its nodes: the line of pass code that created each one.

A node that a pass creates has no `stack_trace` (no model code ran), so a finding on it could only
say "created by pass X". While a captured pass runs, `torch.fx.Graph.create_node` is wrapped to
note, for each node it returns, the innermost calling frame outside torch inside the pass: the
pass's own line (or the line of a helper of the user's that the pass called). A node that torch's
own code made (Inductor's passes) gets no note: the frames outside torch are then the pass's
callers. The note is kept beside the graph in a weak map from node to frame, never in the node's
meta: the graph the pass returns is the one the training gets, untouched. The node table writes it
as the row's `created` (docs/log-format.md).
"""

from __future__ import annotations

import contextlib
import linecache
import os
import sys
import threading
import weakref
from types import FrameType
from typing import Any, Iterator

import torch
import torch.fx

_SITES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # node -> 'File "...", line N, in f | code'
# torch's own package: its frames are never the user's line (graph_tables reads stack traces by it too)
TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_CAPTURE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LOCK = threading.Lock()
_depth = 0
_original: Any = None


def site_of(node: Any) -> str | None:
    try:
        return _SITES.get(node)
    except TypeError:  # not weak-referenceable: never noted
        return None


def _caller_site() -> str | None:
    f: FrameType | None = sys._getframe(2)  # the caller of create_node
    while f is not None:
        path = f.f_code.co_filename
        if path.startswith(_CAPTURE_DIR):
            # the capture's call of the pass: everything below was torch's own (an Inductor pass,
            # a pattern replacement); the frames above called the pass, they did not make the node
            return None
        # torch's own frames (call_function, node_copy, the tracer) and generated code
        if not (path.startswith(TORCH_DIR) or path.startswith("<")):
            code = linecache.getline(path, f.f_lineno).strip()
            where = f'File "{path}", line {f.f_lineno}, in {f.f_code.co_name}'
            return f"{where} | {code}" if code else where
        f = f.f_back
    return None


def _noting_create_node(self: Any, *args: Any, **kwargs: Any) -> Any:
    node = _original(self, *args, **kwargs)
    try:
        site = _caller_site()
        if site is not None:
            _SITES[node] = site
    except Exception:  # noqa: BLE001 - a note we could not take; the node is the pass's as made
        pass
    return node


@contextlib.contextmanager
def noting() -> Iterator[None]:
    """Note the creating line of every node made while this is open (nested passes share it)."""
    global _depth, _original
    with _LOCK:
        if _depth == 0:
            _original = torch.fx.Graph.create_node
            torch.fx.Graph.create_node = _noting_create_node  # type: ignore[method-assign]  # torch's method, patched while a pass runs
        _depth += 1
    try:
        yield
    finally:
        with _LOCK:
            _depth -= 1
            if _depth == 0:
                # _original stays set: a node another thread is making right now still finds it
                torch.fx.Graph.create_node = _original  # type: ignore[method-assign]  # torch's method, patched while a pass runs
