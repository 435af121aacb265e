"""Inductor's generated code: the wrapper and kernels of every graph Inductor compiles, as written.

Observed, never changed: `GraphLowering.save_output_code` is the hook torch itself calls with the
final wrapper code (torch.compile, `compile_fx`, regional Inductor, an FX-cache hit, a compile in a
subprocess); the schedulings' `define_kernel` (C++, Triton and every SIMD backend) are wrapped to
note which post-grad FX nodes each kernel computes, from the scheduler nodes' `origins`, the same
data torch's provenance tracking uses (which we do not turn on: it adds comments to the code).
Both wrappers call the original with the same arguments and return its result.

Per compile: one `gti_output_code` record per distinct code (`oid` = "o" + sha256[:16]) and one
`gti_codegen` record linking it to the post-grad graph (its gid, snapshotted like a pass output:
written only if no pass recorded it) and the compile id, with each kernel's FX nodes and the
compile's FX graph cache key (capture/cache_keys.py).
"""

from __future__ import annotations

import functools
import hashlib
import threading
import time
from typing import Any

from graphtrain_inspect.capture import cache_keys, import_hooks, session
from graphtrain_inspect.capture.shared import logformat

ENV_OUTPUT_CODE = "GTI_CAPTURE_OUTPUT_CODE"  # "0": leave the generated code out (to measure what it costs)

_SCHEDULINGS = (
    ("torch._inductor.codegen.cpp", "CppScheduling"),
    ("torch._inductor.codegen.simd", "SIMDScheduling"),
    ("torch._inductor.codegen.triton", "TritonScheduling"),
)

_pending = threading.local()  # kernel name -> FX node names, for the compile in progress


def install() -> None:
    import_hooks.when_imported("torch._inductor.graph", _hook_graph)
    for module, cls in _SCHEDULINGS:
        import_hooks.when_imported(module, functools.partial(_hook_scheduling, name=cls))


def _hook_graph(module: Any) -> None:
    cls = getattr(module, "GraphLowering", None)
    if cls is None or not hasattr(cls, "save_output_code"):
        return  # a torch without the hook: nothing to observe
    previous = cls.__dict__.get("save_output_code")
    if getattr(previous, "_gti_original", None) is not None:
        return
    chained = previous.__func__ if isinstance(previous, staticmethod) else previous

    def save_output_code(code: str) -> None:
        try:
            _record(code)
        except Exception:  # noqa: BLE001 - _record reports its own errors; never in the way
            pass
        finally:
            if chained is not None:
                chained(code)

    save_output_code._gti_original = chained or True  # type: ignore[attr-defined]  # a marker on the function object
    cls.save_output_code = staticmethod(save_output_code)


def _hook_scheduling(module: Any, name: str) -> None:
    cls = getattr(module, name, None)
    original = cls.__dict__.get("define_kernel") if cls is not None else None
    if cls is None or original is None or getattr(original, "_gti_original", None) is not None:
        return

    def define_kernel(self: Any, *args: Any, **kwargs: Any) -> Any:
        kernel_name = original(self, *args, **kwargs)
        if session.current() is not None:
            with session.recorded("output code: kernel origins"):  # never in the way of the compile
                nodes = args[1] if len(args) > 1 else kwargs.get("nodes", kwargs.get("node_schedule"))
                _note_kernel(kernel_name, nodes)
        return kernel_name

    define_kernel._gti_original = original  # type: ignore[attr-defined]  # a marker on the function object
    define_kernel.__name__ = original.__name__
    define_kernel.__doc__ = original.__doc__
    cls.define_kernel = define_kernel


def _note_kernel(kernel_name: Any, nodes: Any) -> None:
    if not isinstance(kernel_name, str):
        return
    names: list[str] = []
    for n in nodes or ():
        get_nodes = getattr(n, "get_nodes", None)  # node schedules also hold markers
        for sn in get_nodes() if get_nodes is not None else ():
            for o in getattr(getattr(sn, "node", None), "origins", None) or ():
                nm = getattr(o, "name", None)
                if isinstance(nm, str) and nm not in names:
                    names.append(nm)
    kernels = getattr(_pending, "kernels", None)
    if kernels is None:
        kernels = _pending.kernels = {}
    known = kernels.setdefault(kernel_name, [])
    known.extend(n for n in names if n not in known)


def _current_gm() -> Any:
    """The FX graph Inductor is lowering (the post-grad graph), or None outside a lowering."""
    import sys

    virtualized = sys.modules.get("torch._inductor.virtualized")
    if virtualized is None:
        return None
    try:
        graph = virtualized.V.graph
    except Exception:  # noqa: BLE001 - no graph handler set (cache hit, subprocess result)
        return None
    return getattr(graph, "module", None)


def _record(code: Any) -> None:
    sess = session.current()
    kernels = getattr(_pending, "kernels", None) or {}
    _pending.kernels = {}
    if sess is None or not isinstance(code, str):
        return
    with sess.recorded("output code"), sess.lock, session.QuietModes():
        gm = _current_gm()
        gid = sess.snapshot(gm, None, "output code") if gm is not None and hasattr(gm, "graph") else None
        oid = "o" + hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        written = sess.__dict__.setdefault("_gti_output_codes", set())
        if oid not in written:
            written.add(oid)
            sess._write(logformat.OUTPUT_CODE, code, {"oid": oid, "graph": gid})
        sess._write(
            logformat.CODEGEN,
            {
                "oid": oid,
                "graph": gid,
                "compile_id": session.compile_id_str(),
                "kernels": kernels,
                "bytes": len(code.encode("utf-8", "surrogatepass")),
                "time": time.time(),
                **(cache_keys.pending() or {}),
            },
            {"oid": oid, "graph": gid},
        )
