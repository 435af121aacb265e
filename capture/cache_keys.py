"""The FX graph cache key of each compile, as torch computes it, for the compile's `gti_codegen`.

Inductor's FX graph cache files a compile's code under a key taken from the graph before the
post-grad passes run: ranks that compute one key share one entry, in a cache directory the local
ranks share by default. A post-grad pass that writes something rank-specific into the graph then
gives rank 1 rank 0's code from the cache. The capture keeps the cache off (on a warm cache no pass
runs, and a graph compiled twice on a rank would skip its passes the second time), so the key is
computed here with torch's own functions, on the same arguments at the same point: on entry to
`compile_fx.fx_codegen_and_compile`, which `_compile_fx_inner` calls right after it would have
taken the key. The cache's own switches are not part of the key (torch leaves them out), so the
key is the one the run would have used with its cache on. Nothing is read from or written to any
cache; the compile's arguments and result are untouched.

Keys are computed only where the run would have used the cache: not when the user turned it off
(`GTI_CAPTURE_CACHE_KEYS=0`, set by the launcher), forced every cache off, or compiles ahead of time.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from typing import Any, Callable

from graphtrain_inspect.capture import import_hooks, session

ENV_CACHE_KEYS = "GTI_CAPTURE_CACHE_KEYS"  # "0": the run's own FX graph cache is off: no keys

_pending = threading.local()  # the key of the compile in progress on this thread


def install() -> None:
    if os.environ.get(ENV_CACHE_KEYS, "1") == "0":
        return
    import_hooks.when_imported("torch._inductor.compile_fx", _hook_compile_fx)


def pending() -> dict[str, str] | None:
    """`{"cache_key": key}` or `{"cache_bypass": reason}` of the compile in progress on this
    thread, or None where none was taken."""
    return getattr(_pending, "key", None)


def _hook_compile_fx(module: Any) -> None:
    original = getattr(module, "fx_codegen_and_compile", None)
    if original is None or getattr(original, "_gti_original", None) is not None:
        return

    @functools.wraps(original)
    def fx_codegen_and_compile(*args: Any, **kwargs: Any) -> Any:
        key = None
        if session.current() is not None:
            with session.recorded("FX graph cache key"):  # never in the way of the compile
                key = _key_of(args, kwargs)
        before = getattr(_pending, "key", None)
        _pending.key = key
        try:
            return original(*args, **kwargs)
        finally:
            _pending.key = before

    fx_codegen_and_compile._gti_original = original  # type: ignore[attr-defined]  # a marker on the function object
    module.fx_codegen_and_compile = fx_codegen_and_compile


def _key_of(args: tuple, kwargs: dict[str, Any]) -> dict[str, str] | None:
    """torch's key for `fx_codegen_and_compile(gm, example_inputs, inputs_to_check, **graph_kwargs)`,
    or the reason torch would not cache this graph; None where torch would not look at the cache."""
    import sys

    codecache = sys.modules.get("torch._inductor.codecache")
    if codecache is None or len(args) < 2:
        return None
    hash_fn: Callable | None = getattr(codecache, "compiled_fx_graph_hash", None)
    cache = getattr(codecache, "FxGraphCache", None)
    check: Callable | None = getattr(cache, "_check_can_cache", None)
    bypass = getattr(codecache, "BypassFxGraphCache", None)
    if hash_fn is None or check is None or not _cache_in_use():
        return None
    gm, example_inputs = args[0], args[1]
    inputs_to_check = args[2] if len(args) > 2 else kwargs.get("inputs_to_check", ())
    graph_kwargs = {k: v for k, v in kwargs.items() if k not in ("inputs_to_check", "compile_region_name")}
    try:
        if len(inspect.signature(check).parameters) >= 3:
            check(gm, example_inputs, graph_kwargs)
        else:
            check(gm)
        key, _ = hash_fn(gm, example_inputs, graph_kwargs, inputs_to_check)
    except Exception as e:  # torch's own refusal to cache is an answer; anything else is raised to `recorded`
        if bypass is not None and isinstance(e, bypass):
            return {"cache_bypass": str(e)[:200]}
        raise
    return {"cache_key": key} if isinstance(key, str) else None


def _cache_in_use() -> bool:
    """What torch itself looks at besides the FX cache's switch (which the capture turned off):
    every cache forced off, a compile ahead of time (AOTInductor), a precompile's bundled cache."""
    import sys

    config = sys.modules.get("torch._inductor.config")
    if config is None or getattr(config, "force_disable_caches", False):
        return False
    virtualized = sys.modules.get("torch._inductor.virtualized")
    if virtualized is not None and getattr(virtualized.V, "aot_compilation", False):
        return False
    functorch_config = sys.modules.get("torch._functorch.config")
    return not getattr(functorch_config, "bundled_autograd_cache", False)
