"""Wrapping a pass function so each call is recorded, and rebinding references to it."""

from __future__ import annotations

import functools
import sys
import types
from typing import Any, Callable

from graphtrain_inspect.capture import session

_WRAPPED = "_gti_original"


def _is_graph_module(x: Any) -> bool:
    fx = sys.modules.get("torch.fx")
    return fx is not None and isinstance(x, fx.GraphModule)


def _first_graph_module(args: tuple, kwargs: dict) -> Any:
    for a in (*args, *kwargs.values()):
        if _is_graph_module(a):
            return a
    return None


def outputs_of(gm: Any) -> Callable[[Any], dict[str, Any]]:
    """A pass returns a new GraphModule, or None / something else after mutating `gm` in place."""

    def outputs(result: Any) -> dict[str, Any]:
        if _is_graph_module(result):
            return {"out": result}
        if isinstance(result, (tuple, list)):
            for r in result:
                if _is_graph_module(r):
                    return {"out": r}
        return {"out": gm}

    return outputs


def wrap_pass(
    fn: Callable,
    *,
    name: str | None = None,
    qualname: str | None = None,
    source: str = "named",
    target: str | None = None,
) -> Callable:
    """A function that behaves exactly like `fn` and records each call made on a GraphModule."""
    if getattr(fn, _WRAPPED, None) is not None:
        return fn
    pass_name = name or getattr(fn, "__name__", None) or repr(fn)
    qual = qualname or pass_qualname(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        sess = session.current()
        if sess is None:
            return fn(*args, **kwargs)
        gm = _first_graph_module(args, kwargs)
        if gm is None:
            # not called on a graph: maybe a function that builds the pass list (torchtitan's
            # graph_trainer builds its list in compile_time_passes(...) and registered pipelines)
            return wrap_pass_list(fn(*args, **kwargs), target=target)
        return sess.run_pass(pass_name, qual, source, gm, lambda: fn(*args, **kwargs), outputs_of(gm), target=target)

    setattr(wrapper, _WRAPPED, fn)
    return wrapper


def _is_pass_entry(x: Any) -> bool:
    f = x.func if isinstance(x, functools.partial) else x
    return isinstance(f, types.FunctionType)


def _wrap_entry(x: Any, target: str | None) -> Any:
    if isinstance(x, functools.partial):
        if getattr(x.func, _WRAPPED, None) is not None:
            return x
        return functools.partial(wrap_pass(x.func, target=target), *x.args, **x.keywords)
    return wrap_pass(x, target=target)


def wrap_pass_list(result: Any, *, target: str | None = None) -> Any:
    """`result` with each pass in it wrapped, when it is a non-empty list or tuple of functions
    (or functools.partial configurations of functions): the pass list a named function built;
    anything else is returned as it is. A list is changed in place, so whoever holds it sees the
    same object; an instrumentation error leaves it untouched."""
    if type(result) not in (list, tuple) or not result or not all(_is_pass_entry(x) for x in result):
        return result
    with session.recorded(f"--pass {target}: wrapping the passes it returned") as step:
        wrapped = [_wrap_entry(x, target) for x in result]
    if step.failed:  # the training gets its list back unchanged
        return result
    if type(result) is tuple:
        return tuple(wrapped)
    result[:] = wrapped
    return result


def pass_qualname(fn: Any) -> str | None:
    mod = getattr(fn, "__module__", None)
    qn = getattr(fn, "__qualname__", None)
    return f"{mod}:{qn}" if mod and qn else None


def rebind_references(original: Any, wrapper: Any) -> int:
    """Replace `original` by `wrapper` in module-level lists, dicts and tuples of loaded modules.

    Pass registries built before the wrap (a list in the pass's own module, a dict of
    functools.partial configurations) would otherwise keep calling the unwrapped function.
    """
    count = 0
    for mod in list(sys.modules.values()):
        d = getattr(mod, "__dict__", None)
        if not isinstance(d, dict):
            continue
        for key, value in list(d.items()):
            try:
                new, n = _rebind_in(value, original, wrapper)
            except Exception:  # noqa: BLE001 - exotic containers are left alone
                continue
            if n:
                count += n
                if new is not value:
                    d[key] = new
    return count


def _swap(x: Any, original: Any, wrapper: Any) -> tuple[Any, int]:
    if x is original:
        return wrapper, 1
    if isinstance(x, functools.partial) and x.func is original:
        return functools.partial(wrapper, *x.args, **x.keywords), 1
    return x, 0


def _rebind_in(value: Any, original: Any, wrapper: Any) -> tuple[Any, int]:
    if value is original:  # `from mod import f` done before the wrap
        return wrapper, 1
    if type(value) is list:
        n = 0
        for i, x in enumerate(value):
            value[i], k = _swap(x, original, wrapper)
            n += k
        return value, n
    if type(value) is dict:
        n = 0
        for k2, x in list(value.items()):
            value[k2], k = _swap(x, original, wrapper)
            n += k
        return value, n
    if type(value) is tuple:
        items = [_swap(x, original, wrapper) for x in value]
        n = sum(k for _, k in items)
        return (tuple(x for x, _ in items), n) if n else (value, 0)
    return value, 0
