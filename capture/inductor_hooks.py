"""Inductor's own passes: every GraphTransformObserver application, and the joint-graph partitioners.

Installed as post-import hooks, so nothing here imports torch before the training does. The
capture launcher turns Inductor's FX/AOT caches off: on a warm cache no pass runs at all.
"""

from __future__ import annotations

from typing import Any, Callable

from graphtrain_inspect.capture import import_hooks, session
from graphtrain_inspect.capture.wrap import outputs_of, pass_qualname, rebind_references

PARTITIONERS = ("min_cut_rematerialization_partition", "default_partition")


def install() -> None:
    import_hooks.when_imported("torch.fx.passes.graph_transform_observer", _hook_observer)
    import_hooks.when_imported("torch._functorch.partitioners", _hook_partitioners)


def _hook_observer(module: Any) -> None:
    cls = getattr(module, "GraphTransformObserver", None)
    if cls is None:
        return
    for method in ("apply_gm_pass", "apply_graph_pass"):
        original = getattr(cls, method, None)
        if original is None or getattr(original, "_gti_original", None) is not None:
            continue
        setattr(cls, method, _observed(original))


def _observed(original: Callable) -> Callable:
    def apply(self: Any, pass_fn: Callable) -> Any:
        sess = session.current()
        gm = getattr(self, "gm", None)
        if sess is None or gm is None:
            return original(self, pass_fn)
        return sess.run_pass(
            str(getattr(self, "passname", None) or getattr(pass_fn, "__name__", "pass")),
            pass_qualname(pass_fn),
            "inductor",
            gm,
            lambda: original(self, pass_fn),
            outputs_of(gm),
            subsystem=getattr(self, "subsystem", None),
        )

    apply._gti_original = original  # type: ignore[attr-defined]  # a marker on the function object
    apply.__name__ = original.__name__
    apply.__doc__ = original.__doc__
    return apply


def _hook_partitioners(module: Any) -> None:
    for name in PARTITIONERS:
        original = getattr(module, name, None)
        if original is None or getattr(original, "_gti_original", None) is not None:
            continue
        wrapper = _partitioner(original, name)
        setattr(module, name, wrapper)
        rebind_references(original, wrapper)


def _partitioner(original: Callable, name: str) -> Callable:
    import functools

    @functools.wraps(original)
    def partition(joint_module: Any, *args: Any, **kwargs: Any) -> Any:
        sess = session.current()
        if sess is None:
            return original(joint_module, *args, **kwargs)

        def outputs(result: Any) -> dict[str, Any]:
            fw, bw = result[0], result[1]
            return {"fw": fw, "bw": bw}

        return sess.run_pass(
            name,
            pass_qualname(original),
            "partitioner",
            joint_module,
            lambda: original(joint_module, *args, **kwargs),
            outputs,
        )

    partition._gti_original = original  # type: ignore[attr-defined]  # a marker on the function object
    return partition
