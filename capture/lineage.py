"""Where the graph a pass receives came from: a pass of this process, a GraphPickler load, or
neither (a trace). This is what pairs pipelines by identity rather than by position (format 4).

The capture sees graph objects, not just their contents: two layers of a per-layer compile can
trace identical graphs (one gid), and a precompile loads the very graph another rank compiled
(again one gid), yet each is a pipeline of its own. So lineage is kept by object: the `fx.Graph`
a pass returned (a GraphModule's `.graph`; Inductor's observer hands passes the GraphModule and
the graph alike) maps to that pass's seq, and graphs returned by `GraphPickler.loads` are marked
loaded. Weak references only: the capture never keeps a graph alive.

Also here: the module path a graph's nodes share (`nn_module_stack`), which names the layer of a
per-layer compile.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Callable

from graphtrain_inspect.capture import import_hooks

if TYPE_CHECKING:
    from graphtrain_inspect.capture.session import Session

TRACED, FROM_PASS, LOADED = "traced", "pass", "loaded"


def graph_of(obj: Any) -> Any:
    """The fx.Graph identifying a pass input or output (a GraphModule's graph, or the graph)."""
    g = getattr(obj, "graph", None)
    return g if g is not None and hasattr(g, "nodes") else obj


class Lineage:
    """Which pass produced each live graph object of this process, and which were loaded."""

    def __init__(self) -> None:
        self._produced: dict[int, tuple[Any, int]] = {}  # id(graph) -> (weakref, seq)
        self._loaded: dict[int, Any] = {}  # id(graph) -> weakref

    @staticmethod
    def _ref(g: Any) -> Any:
        try:
            return weakref.ref(g)
        except TypeError:
            return None

    def origin(self, obj: Any) -> tuple[str, int | None]:
        """(TRACED | FROM_PASS | LOADED, the producing pass's seq for FROM_PASS)."""
        g = graph_of(obj)
        hit = self._produced.get(id(g))
        if hit is not None and hit[0] is not None and hit[0]() is g:
            return FROM_PASS, hit[1]
        ref = self._loaded.get(id(g))
        if ref is not None and ref() is g:
            return LOADED, None
        return TRACED, None

    def produced(self, obj: Any, seq: int) -> None:
        g = graph_of(obj)
        ref = self._ref(g)
        if ref is not None:
            self._produced[id(g)] = (ref, seq)
            self._prune()

    def loaded(self, obj: Any) -> None:
        g = graph_of(obj)
        ref = self._ref(g)
        if ref is not None:
            self._loaded[id(g)] = ref
            self._produced.pop(id(g), None)

    def _prune(self) -> None:
        # dead entries would let a new object at a reused address inherit a lineage; they are
        # also checked on lookup, this only bounds the tables
        if len(self._produced) > 4096:
            self._produced = {k: v for k, v in self._produced.items() if v[0]() is not None}
        if len(self._loaded) > 4096:
            self._loaded = {k: v for k, v in self._loaded.items() if v() is not None}


def module_path(gm: Any) -> str | None:
    """The module path every module-called node of a graph shares (`layers.1`), from
    `nn_module_stack` (make_fx and Dynamo both set it); None where the nodes share none, or the
    graph holds no such meta. Dynamo's keys (`L['self'].layers[1]`, `L__self___layers_1`) are
    reduced to the dotted path torch prints in the stack's values."""
    paths: list[list[str]] | None = None
    graph = graph_of(gm)
    for node in getattr(graph, "nodes", ()):
        stack = getattr(node, "meta", {}).get("nn_module_stack")
        if not stack or getattr(node, "op", "") in ("placeholder", "output"):
            continue
        fqns = [_fqn(v) for v in stack.values()]
        path = max((f for f in fqns if f), key=len, default="")
        parts = [p for p in path.split(".") if p]
        if paths is None:
            paths = [parts]
        else:
            common = paths[0]
            n = 0
            while n < min(len(common), len(parts)) and common[n] == parts[n]:
                n += 1
            paths = [common[:n]]
        if paths and not paths[0]:
            return None
    if not paths or not paths[0]:
        return None
    return ".".join(paths[0])


def _fqn(v: Any) -> str:
    """The FQN of one nn_module_stack entry: `(fqn, type)` in both make_fx and Dynamo."""
    fqn = v[0] if isinstance(v, tuple) and v else v
    if not isinstance(fqn, str):
        return ""
    # Dynamo writes `L['self'].layers[1].attn` or `L['self']._modules['layers']...`
    for prefix in ("L['self'].", "L['self']", "self."):
        if fqn.startswith(prefix):
            fqn = fqn[len(prefix) :]
    fqn = fqn.replace("_modules['", "").replace("']", "").replace("[", ".").replace("]", "")
    return fqn.strip(".")


def _no_session() -> Session | None:
    return None


# the capture of this process (`session.current`, handed over by `install`: the session imports
# this module, so this module does not import it back)
_current: Callable[[], Session | None] = _no_session


def install(current: Callable[[], Session | None]) -> None:
    """Mark graphs that GraphPickler.loads returns as loaded (a precompiled or broadcast graph) in
    the session `current()` returns."""
    global _current
    _current = current
    import_hooks.when_imported("torch.fx._graph_pickler", _hook_pickler)


def _hook_pickler(module: Any) -> None:
    import inspect

    cls = getattr(module, "GraphPickler", None)
    raw = inspect.getattr_static(cls, "loads", None) if cls is not None else None
    if cls is None or raw is None or getattr(raw, "_gti_original", None) is not None:
        return
    # a staticmethod in 2.11 and 2.13; kept whatever kind it is, so callers see the same signature
    kind = type(raw) if isinstance(raw, (staticmethod, classmethod)) else None
    fn = raw.__func__ if kind is not None else raw

    def loads(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        _mark_loaded(result)
        return result

    loads.__name__ = getattr(fn, "__name__", "loads")
    wrapped = kind(loads) if kind is not None else loads
    wrapped._gti_original = raw  # type: ignore[union-attr]  # a marker on the function object
    cls.loads = wrapped


def _mark_loaded(result: Any) -> None:
    sess = _current()
    if sess is None:
        return
    with sess.recorded("graph loaded"):  # never lets an error reach the caller of loads
        for obj in result if isinstance(result, (tuple, list)) else (result,):
            if hasattr(graph_of(obj), "nodes"):
                sess.lineage.loaded(obj)
