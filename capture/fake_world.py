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
import weakref
from types import FrameType
from typing import Any

ENV_WORLD = "GTI_SIMULATE_WORLD"  # N: the simulated world size
ENV_STOP = "GTI_SIMULATE_STOP"  # "1": end the process once its pass pipeline is done (see _install_stop)

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
        import_hooks.when_imported("torch.fx.graph_module", _install_first_call_stop)


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
    def init_process_group(
        backend: Any = None,
        init_method: Any = None,
        timeout: Any = None,
        world_size: int = -1,
        rank: int = -1,
        store: Any = None,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        # torch's fake backend registers itself on import; FakeStore is the store it expects.
        try:
            from torch.testing._internal.distributed.fake_pg import FakeStore
        except ImportError as e:  # a real rendezvous would wait forever for peers that never come
            raise RuntimeError(
                f"graphtrain-inspect --simulate-world: torch {_torch_version()} has no fake process-group "
                f"backend (torch.testing._internal.distributed.fake_pg: {e})"
            ) from e

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

    init_process_group._gti_simulated = True  # type: ignore[attr-defined]  # a marker on the function object
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

    new_group._gti_simulated = True  # type: ignore[attr-defined]  # a marker on the function object
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


# -- the early stop (--stop-after-passes) ---------------------------------------------------------
#
# A rank's compile phase is over at whichever comes first:
# - the first call of a graph that a named pass returned, made outside any pass: a graph trainer
#   (torchtitan's graph_trainer, the samples) traces its step, runs its pass list, then calls the
#   graph the last pass returned. Waiting for the optimizer would run that whole step on the fake
#   process group first (minutes for a real model), for nothing.
# - the first optimizer step after a pass ran: torch.compile, whose passes run inside compiling
#   the forward, then the backward at the first backward call; a graph it compiled is called by its
#   own runtime (skipped below), so its passes are all done only at the step.

# GraphModules that a named or API-marked pass returned -> that pass's name (weak: a graph the
# trainer dropped must not keep its memory, nor its id be taken for a later graph's).
_PRODUCED: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()

# Callers that run a compiled graph as part of torch.compile's own runtime, not a user's step.
_COMPILE_RUNTIME = ("torch._functorch", "torch._dynamo", "torch._inductor", "torch._higher_order_ops")


def note_produced(gm: Any, pass_name: str) -> None:
    """Called by the session for each graph a named pass returned, when the stop is on."""
    _PRODUCED[gm] = pass_name


def stop_on() -> bool:
    return os.environ.get(ENV_STOP) == "1"


def _install_first_call_stop(graph_module: Any) -> None:
    wrapped_call = getattr(graph_module, "_WrappedCall", None)
    original = None if wrapped_call is None else wrapped_call.__call__
    if wrapped_call is None or original is None or getattr(original, "_gti_simulated", False):
        return

    def __call__(self: Any, obj: Any, *args: Any, **kwargs: Any) -> Any:
        if obj in _PRODUCED:
            _maybe_stop_at_call(obj)
        return original(self, obj, *args, **kwargs)

    __call__._gti_simulated = True  # type: ignore[attr-defined]  # a marker on the function object
    wrapped_call.__call__ = __call__


def _maybe_stop_at_call(gm: Any) -> None:
    from graphtrain_inspect.capture import session

    s = session.current()
    if s is None or s.passes == 0 or s.stack:
        return  # a pass running the graph it got (to estimate, to check) is part of the pipeline
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "") in (
        "torch.fx.graph_module",
        "torch.nn.modules.module",
    ):
        frame = frame.f_back
    caller = frame.f_globals.get("__name__", "") if frame is not None else ""
    if caller.startswith(_COMPILE_RUNTIME):
        return
    _stop(s, f"first call of the graph {_PRODUCED.get(gm, '?')} returned")


def _install_stop(optim_module: Any) -> None:
    register = getattr(optim_module, "register_optimizer_step_pre_hook", None)
    if register is None:
        return
    register(_stop_hook)


def _stop_hook(optimizer: Any, args: Any, kwargs: Any) -> None:
    """The first optimizer step after at least one captured pass: the compile phase is over (the
    step's forward and backward, and any torch.compile of them, ran)."""
    from graphtrain_inspect.capture import session

    s = session.current()
    if s is None or s.passes == 0:
        return
    _stop(s, "first optimizer step")


def _stop(s: Any, at: str) -> None:
    from graphtrain_inspect.capture import session

    STOPPED.update({"at": at, "passes": s.passes})
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass
    # What follows on a fake backend computes garbage: end here; the end record says where, and
    # the exit status is 0.
    session.stop()
    os._exit(0)
