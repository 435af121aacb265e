"""Put first on PYTHONPATH by `graphtrain-inspect capture`: starts the capture in every process.

torchrun hands its environment (PYTHONPATH included) to every worker, so each worker imports
this at start-up. It then runs any other sitecustomize that was on the path, so the user's own
start-up code still runs.
"""

import os
import sys


def _start() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    home = os.environ.get("GTI_CAPTURE_HOME")
    try:
        import capture  # noqa: F401
    except ImportError:
        if home:
            sys.path.append(home)
    try:
        from capture import bootstrap_env

        bootstrap_env.start_from_env()
    except Exception as e:  # noqa: BLE001 - never keep the training from starting
        print(f"graphtrain-inspect: capture not started in pid {os.getpid()}: {type(e).__name__}: {e}", file=sys.stderr)
    _chain(here)


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
        print(f"Error in sitecustomize ({spec.origin}); set PYTHONVERBOSE for traceback: {type(e).__name__}: {e}", file=sys.stderr)


_start()
