"""`--pass MODULE:QUALNAME`: wrap a named function (or a registry of them) when its module loads."""

from __future__ import annotations

import functools
import sys
from typing import Any

from graphtrain_inspect.capture import import_hooks
from graphtrain_inspect.capture.wrap import rebind_references, wrap_pass


class TargetError(ValueError):
    pass


def parse_target(text: str) -> tuple[str, str]:
    module, sep, qual = text.strip().partition(":")
    if not sep or not module or not qual or not all(p.isidentifier() for p in (*module.split("."), *qual.split("."))):
        raise TargetError(
            f"--pass {text!r}: expected MODULE:FUNCTION or MODULE:Class.method (e.g. "
            "samples.passes.dce:remove_dead_code)"
        )
    return module, qual


def _wrap_error_text(message: str) -> str:
    """A wrap error's message as it reads to a user: the wrap runs as the module finishes
    importing, so Python calls a missing name's module "partially initialized ... (most likely
    due to a circular import)"; it was not."""
    return (
        message.replace("partially initialized module", "module")
        .removesuffix(" (most likely due to a circular import)")
        .strip()
    )


def install(targets: list[str]) -> None:
    for t in targets:
        module, qual = parse_target(t)
        import_hooks.when_imported(module, functools.partial(_wrap_in, qual=qual, target=t))


def _wrap_in(module: Any, qual: str, target: str) -> None:
    from graphtrain_inspect.capture import session

    try:
        owner: Any = module
        parts = qual.split(".")
        for p in parts[:-1]:
            owner = getattr(owner, p)
        attr = parts[-1]
        raw = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr)
        if raw is None:
            raise AttributeError(f"{module.__name__} has no attribute {qual}")
        qualname = f"{module.__name__}:{qual}"
        if isinstance(raw, (staticmethod, classmethod)):
            setattr(owner, attr, type(raw)(wrap_pass(raw.__func__, name=attr, qualname=qualname, target=target)))
        elif isinstance(raw, (list, tuple, dict)):
            # A registry named directly: wrap every function in it.
            items = raw.items() if isinstance(raw, dict) else enumerate(raw)
            for _, fn in list(items):
                f = getattr(fn, "func", fn)  # functools.partial keeps its function in .func
                if callable(f) and not getattr(f, "_gti_original", None):
                    name = getattr(f, "__name__", repr(f))
                    rebind_references(
                        f,
                        wrap_pass(
                            f,
                            name=name,
                            qualname=f"{getattr(f, '__module__', '?')}:{getattr(f, '__qualname__', name)}",
                            target=target,
                        ),
                    )
        elif callable(raw):
            wrapper = wrap_pass(raw, name=attr, qualname=qualname, target=target)
            setattr(owner, attr, wrapper)
            rebind_references(raw, wrapper)
        else:
            raise TypeError(f"{target} is a {type(raw).__name__}, not a function or a list of passes")
    except Exception as e:  # noqa: BLE001 - a bad target is reported in the capture, the training runs
        if isinstance(e, AttributeError):  # recorded as the user should read it
            e = AttributeError(_wrap_error_text(str(e))).with_traceback(e.__traceback__)
        sess = session.current()
        if sess is not None:
            sess.error(f"--pass {target}", e)
        else:
            print(f"graphtrain-inspect: --pass {target}: {e}", file=sys.stderr)
