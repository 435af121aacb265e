"""Inside a simulated rank (`capture --simulate-world N`): torch.distributed backed by torch's fake
process group, whatever backend the script asks for, and an early stop once the passes ran.

torch ships the fake backend for exactly this (`torch.testing._internal.distributed.fake_pg`,
registered as backend "fake" when imported; torch 2.11 and 2.13): a process group of any size that
hallucinates collectives without talking to anyone, so one process can be rank 37 of 512. The
script's own `init_process_group("nccl"/"gloo", ...)` is redirected to it with the rank and world
size of the environment the launcher gave this process; `init_device_mesh` and `new_group` build
their sub-groups on it exactly as in the real job (same calls in the same order give the same
group names: checked against an 8-process gloo run). On 2.13 DeviceMesh skips device setup on a
fake world, so a `cuda` mesh builds on a CPU-only machine.

Nothing here runs unless the launcher set GTI_SIMULATE_WORLD; the user's script is not edited.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

ENV_WORLD = "GTI_SIMULATE_WORLD"  # N: the simulated world size
ENV_STOP = "GTI_SIMULATE_STOP"  # "1": end the process at its first optimizer step after a pass ran

# What the stop looked like, for the end record (`gti_end.stopped_after_passes`).
STOPPED: dict[str, Any] = {}


def active() -> bool:
    return bool(os.environ.get(ENV_WORLD))


def install() -> None:
    """Called by the bootstrap in every simulated rank, before the script imports torch."""
    from graphtrain_inspect.capture import import_hooks

    import_hooks.when_imported("torch.distributed.distributed_c10d", _patch_c10d)
    if os.environ.get(ENV_STOP) == "1":
        import_hooks.when_imported("torch.optim.optimizer", _install_stop)


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def _patch_c10d(c10d: Any) -> None:
    """Rebind init_process_group and new_group in distributed_c10d right after its body ran, so
    `torch.distributed`'s star import and device_mesh's `from ... import` bind the wrappers."""
    original_init = c10d.init_process_group
    if getattr(original_init, "_gti_simulated", False):
        return

    @functools.wraps(original_init)
    def init_process_group(backend: Any = None, init_method: Any = None, timeout: Any = None, world_size: int = -1,
                           rank: int = -1, store: Any = None, *args: Any, **kwargs: Any) -> Any:
        # torch's fake backend registers itself on import; FakeStore is the store it expects.
        try:
            from torch.testing._internal.distributed.fake_pg import FakeStore
        except ImportError as e:  # a real rendezvous would wait forever for peers that never come
            raise RuntimeError(f"graphtrain-inspect --simulate-world: torch {_torch_version()} has no fake process-group "
                               f"backend (torch.testing._internal.distributed.fake_pg: {e})") from e

        r = _env_int("RANK", 0)
        n = _env_int(ENV_WORLD, _env_int("WORLD_SIZE", 1))
        # A device_id would bind a real accelerator (absent on a CPU-only machine); group_name,
        # pg_options and the like are kept only if the fake backend can take them.
        kwargs.pop("device_id", None)
        kwargs.pop("pg_options", None)
        kw = {"timeout": timeout} if timeout is not None else {}
        if "group_name" in kwargs:
            kw["group_name"] = kwargs["group_name"]
        global REQUESTED_BACKEND
        REQUESTED_BACKEND = None if backend is None else str(backend)
        return original_init("fake", world_size=n, rank=r, store=FakeStore(), **kw)

    init_process_group._gti_simulated = True  # type: ignore[attr-defined]
    c10d.init_process_group = init_process_group

    original_new_group = c10d.new_group

    @functools.wraps(original_new_group)
    def new_group(*args: Any, **kwargs: Any) -> Any:
        # An explicit backend ("gloo" for a CPU side group) would try to rendezvous for real.
        if kwargs.get("backend") is not None:
            kwargs["backend"] = None
        if len(args) >= 3 and args[2] is not None:
            args = (*args[:2], None, *args[3:])
        return original_new_group(*args, **kwargs)

    new_group._gti_simulated = True  # type: ignore[attr-defined]
    c10d.new_group = new_group


REQUESTED_BACKEND: str | None = None


def describe() -> dict[str, Any]:
    """For the header: what this process pretends to be."""
    return {
        "world_size": _env_int(ENV_WORLD, 0),
        "local_world_size": _env_int("LOCAL_WORLD_SIZE", 1),
        # the accelerator index this rank has in the real job (torchrun's LOCAL_RANK), kept for
        # graphs traced on CPU here whose device table says `cpu`
        "device_index": _env_int("LOCAL_RANK", 0),
        "stop_after_passes": os.environ.get(ENV_STOP) == "1",
        "requested_backend": REQUESTED_BACKEND,
    }


def _torch_version() -> str:
    return str(getattr(sys.modules.get("torch"), "__version__", "?"))


def _install_stop(optim_module: Any) -> None:
    register = getattr(optim_module, "register_optimizer_step_pre_hook", None)
    if register is None:
        return
    register(_stop_hook)


def _stop_hook(optimizer: Any, args: Any, kwargs: Any) -> None:
    """The first optimizer step after at least one captured pass: the compile phase is over (the
    step's forward and backward, and any torch.compile of them, ran). What follows on a fake
    backend computes garbage, so end here: the end record says so, and the exit status is 0."""
    from graphtrain_inspect.capture import session

    s = session.current()
    if s is None or s.passes == 0:
        return
    STOPPED.update({"at": "first optimizer step", "passes": s.passes})
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass
    session.stop()
    os._exit(0)
