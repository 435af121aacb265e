"""Run a callback right after a module's body has executed, before anyone can import from it.

A finder at the front of sys.meta_path wraps the real loader's exec_module for the watched
module names only; every other import is untouched. This is how `--pass pkg.mod:f` rebinds
`f` before `from pkg.mod import f` elsewhere can bind the original.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
from typing import Any, Callable

Hook = Callable[[Any], None]


class _PostImportFinder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self.hooks: dict[str, list[Hook]] = {}
        self._searching = threading.local()

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.hooks or getattr(self._searching, "on", False):
            return None
        self._searching.on = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._searching.on = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _HookedLoader(spec.loader, fullname, self.hooks)
        return spec


class _HookedLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, fullname: str, hooks: dict[str, list[Hook]]) -> None:
        self._loader = loader
        self._fullname = fullname
        # Taken when the module body runs, not when it is found: `python -m pkg.mod` finds the
        # spec (runpy) and runs the code as __main__ without exec_module; the hooks then wait for
        # the module's import under its own name.
        self._all_hooks = hooks

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        # Keep the original loader visible to code that inspects module.__loader__ / __spec__.
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        for hook in self._all_hooks.pop(self._fullname, []):
            hook(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


_FINDER: _PostImportFinder | None = None


def when_imported(module_name: str, hook: Hook) -> None:
    """Call hook(module) once the module is imported; at once if it already is."""
    global _FINDER
    mod = sys.modules.get(module_name)
    if mod is not None:
        hook(mod)
        return
    if _FINDER is None:
        _FINDER = _PostImportFinder()
        sys.meta_path.insert(0, _FINDER)
    _FINDER.hooks.setdefault(module_name, []).append(hook)
