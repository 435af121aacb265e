"""The captured rank's world for a replayed pass: its environment variables and `sys.argv`, and,
where the rank had torch.distributed initialized, a single-process world with the "fake" backend of
the captured rank and world size and the captured process groups under their names. Everything is
restored afterwards. Imports torch."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import torch
import torch.fx

from graphtrain_inspect.inspector.errors import ReplayError
from graphtrain_inspect.inspector.read.capture_files import capture_dir
from graphtrain_inspect.inspector.replay.plan import (
    distributed_initialized,
    rank_argv,
    rank_environment,
)
from graphtrain_inspect.inspector.replay.resolve import import_target

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.read.capture_reader import Capture


@dataclass
class World:
    """How the rank's environment was set up for the last run (for the banner)."""

    env: dict[str, str] = field(default_factory=dict)
    argv: list[str] | None = None
    process_group: str | None = None  # "fake backend, rank 1 of 2; groups 0, 1"
    notes: list[str] = field(default_factory=list)


def _fake_backend_available() -> bool:
    try:
        import torch.distributed as dist

        if not dist.is_available():
            return False
        importlib.import_module("torch.testing._internal.distributed.fake_pg")
        return "fake" in dist.Backend.backend_list or hasattr(dist.Backend, "FAKE")
    except Exception:  # noqa: BLE001
        return False


def init_fake_world(rank: int, world_size: int, table: dict | None) -> tuple[str | None, list[str]]:
    """A single-process torch.distributed world with the fake backend, as rank `rank` of
    `world_size`, with the captured process groups recreated under their captured names."""
    notes: list[str] = []
    if not _fake_backend_available():
        return None, ["torch.distributed has no 'fake' backend here: the pass sees an uninitialized torch.distributed"]
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", rank=rank, world_size=world_size, store=FakeStore())
    world_group = dist.group.WORLD
    made = [str(world_group.group_name)] if world_group is not None and hasattr(world_group, "group_name") else []
    groups = (table or {}).get("groups") or {}
    world = getattr(c10d, "_world", None)

    def order(name: str) -> tuple:
        return (0, int(name), "") if name.isdigit() else (1, 0, name)

    for name in sorted(groups, key=order):
        g = groups[name]
        members = g.get("ranks") if isinstance(g, dict) else None
        if name in made or not isinstance(members, list):
            continue
        try:
            if name.isdigit() and world is not None and hasattr(world, "group_count"):
                world.group_count = int(name)  # torch names new groups by this counter
            kw: dict[str, Any] = {"ranks": sorted(members)}
            if "group_desc" in inspect.signature(dist.new_group).parameters and isinstance(g.get("desc"), str):
                kw["group_desc"] = g["desc"]
            pg = dist.new_group(**kw)
            got = getattr(pg, "group_name", None)
            if got != name:
                reg = getattr(torch._C._distributed_c10d, "_register_process_group", None)
                if reg is not None:
                    reg(name, pg)
                    notes.append(f"process group {name!r} recreated as {got!r} and registered under {name!r}")
                else:
                    notes.append(
                        f"process group {name!r} recreated as {got!r}: passes resolving {name!r} will not find it"
                    )
            made.append(name)
        except Exception as e:  # noqa: BLE001 - the pass may not need the group at all
            notes.append(f"could not recreate process group {name!r} {members}: {type(e).__name__}: {e}")
    desc = f"fake backend, rank {rank} of {world_size}" + (f"; groups {', '.join(made)}" if made else "")
    return desc, notes


def destroy_fake_world() -> None:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001
        pass


@contextlib.contextmanager
def rank_world(
    cap: "Capture",
    rank: int,
    fake_mode: Any,
    *,
    inductor: bool = False,
    setup: Sequence[str] = (),
    distributed: bool = True,
) -> Iterator[World]:
    """Enter the captured rank's environment for the duration of a pass (see the module docstring)."""
    w = World(env=rank_environment(cap, rank), argv=rank_argv(cap, rank))
    saved_env = {k: os.environ.get(k) for k in w.env}
    saved_argv = list(sys.argv)
    stack = contextlib.ExitStack()
    try:
        os.environ.update(w.env)
        if w.argv:
            sys.argv = list(w.argv)
        if distributed and distributed_initialized(cap, rank):
            h = cap.header(rank) or {}
            world_size = h["world_size"] if isinstance(h.get("world_size"), int) else cap.world_size
            try:
                w.process_group, notes = init_fake_world(rank, world_size, cap.rank_table(rank))
                w.notes.extend(notes)
            except Exception as e:  # noqa: BLE001
                w.notes.append(f"could not start a fake process group: {type(e).__name__}: {e}")
            stack.callback(destroy_fake_world)
        if fake_mode is not None:
            from torch._guards import TracingContext, tracing

            stack.enter_context(tracing(TracingContext(fake_mode)))
            if inductor:
                from torch._inductor.virtualized import V

                stack.enter_context(V.set_fake_mode(fake_mode))
        for spec in setup:
            fn = import_target(spec, capture_dir=capture_dir(cap))
            try:
                fn()
            except Exception as e:
                raise ReplayError(
                    f"--setup {spec} raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                ) from e
        yield w
    finally:
        stack.close()
        sys.argv = saved_argv
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
