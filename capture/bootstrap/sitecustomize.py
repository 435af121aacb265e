"""Put first on PYTHONPATH by `graphtrain-inspect capture`: starts the capture in every process.

torchrun hands its environment (PYTHONPATH included) to every worker, so each worker imports
this at start-up. It then runs any other sitecustomize that was on the path, so the user's own
start-up code still runs.
"""

import os
import sys


def _start() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        import graphtrain_inspect.capture  # noqa: F401
    except ImportError:
        # The worker's Python is not the one graphtrain-inspect is installed in: load the capture
        # package from where the launcher found it, under its own name only (nothing generic on sys.path).
        _load_capture_package(os.environ.get("GTI_CAPTURE_HOME"))
    try:
        from graphtrain_inspect.capture import bootstrap_env

        bootstrap_env.start_from_env()
    except Exception as e:  # noqa: BLE001 - never keep the training from starting
        print(f"graphtrain-inspect: capture not started in pid {os.getpid()}: {type(e).__name__}: {e}", file=sys.stderr)
    _chain(here)


def _load_capture_package(home: "str | None") -> None:
    import importlib.util
    import types

    if not home or not os.path.isfile(os.path.join(home, "__init__.py")):
        return
    ns = sys.modules.get("graphtrain_inspect")
    if ns is None:
        ns = types.ModuleType("graphtrain_inspect")
        ns.__path__ = []
        sys.modules["graphtrain_inspect"] = ns
    spec = importlib.util.spec_from_file_location(
        "graphtrain_inspect.capture", os.path.join(home, "__init__.py"), submodule_search_locations=[home]
    )
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["graphtrain_inspect.capture"] = module
    spec.loader.exec_module(module)
    setattr(ns, "capture", module)  # noqa: B010 - a module attribute made at run time


def _chain(here: str) -> None:
    import importlib.machinery
    import importlib.util

    paths = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - theirs failing is theirs; report as Python would
        print(
            f"Error in sitecustomize ({spec.origin}); set PYTHONVERBOSE for traceback: {type(e).__name__}: {e}",
            file=sys.stderr,
        )


_start()
