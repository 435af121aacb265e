"""`record_pass`: the explicit capture API for framework authors.

    @record_pass                      # name = function name
    def my_pass(gm, example_inputs): ...

    @record_pass("bucketing")
    def bucket(gm, example_inputs): ...

    with record_pass("reorder", gm) as rec:
        gm = reorder(gm)
        rec.result = gm               # optional: the graph the pass produced (default: gm, mutated)

Outside a capture each form costs one attribute lookup and a None check per call.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Literal

from graphtrain_inspect.capture import session
from graphtrain_inspect.capture.wrap import wrap_pass


class _Recording:
    """Context manager for one pass application on `gm`."""

    __slots__ = ("name", "gm", "result", "_sess", "_frame", "_t0")

    def __init__(self, name: str, gm: Any):
        self.name = name
        self.gm = gm
        self.result: Any = None
        self._sess: session.Session | None = None
        self._frame: Any = None

    def __enter__(self) -> "_Recording":
        sess = session.current()
        if sess is not None:
            with sess.recorded("record_pass start"):
                self._frame = sess.begin(self.name, self.gm)
                self._sess = sess
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        if self._sess is None:
            return False
        wall = time.perf_counter() - self._t0
        out = self.result if self.result is not None else self.gm
        with self._sess.recorded("record_pass end", self._frame):
            self._sess.end(
                self._frame,
                qualname=None,
                source="api",
                outputs={} if exc is not None else {"out": out},
                exc=exc,
                t_wall=wall,
            )
        return False  # never swallow the pass's exception


def record_pass(name_or_fn: Any = None, gm: Any = None) -> Any:
    if callable(name_or_fn) and gm is None:
        return wrap_pass(name_or_fn, source="api")
    if gm is not None:
        return _Recording(str(name_or_fn), gm)

    def decorate(fn: Callable) -> Callable:
        return wrap_pass(fn, name=name_or_fn, source="api")

    return decorate
