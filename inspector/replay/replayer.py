"""Replay one captured pass: load the graph it received, run it again as it ran in training, and
compare the result with what the capture recorded.

    r = Replayer(open_capture(DIR), select(cap, "concretize_symbolic_shapes", 1, None))
    out = r.run()                      # Outcome: reproduced?, diff, exception, timings
    out = r.run(fn=my_fixed_pass)      # an edited copy or a candidate fix
    r.check_outcome(out)               # findings new or gone, compared with the capture

Loading: the before-graph's blob is verified and unpickled (GraphPickler) into a fresh
FakeTensorMode with its own ShapeEnv, after importing the operator libraries its node table names
(`device_mesh` ops need `torch.distributed._ops.device_mesh`, registered after DeviceMesh's opaque
type). Trust and the sha256 are checked first (inspector.replay_plan); this module is reached only
for captures that may be loaded.

Running "as in training": the captured rank's environment variables (RANK, LOCAL_RANK, WORLD_SIZE,
the manifest's TORCH_*/NCCL_* ...) and `sys.argv`; where the rank had torch.distributed
initialized (its rank table lists groups), a single-process world with the "fake" backend of the
captured rank and world size, with the captured process groups recreated under their captured
names, so `dist.get_rank()` answers as on that rank (and stays uninitialized where it was); a
TracingContext holding the graph's fake mode (and Inductor's `V.fake_mode` for Inductor passes).
Everything is restored afterwards.

The pass is the function named by the record's `module:qualname` (through the registry the
capture wrapped when it holds a functools.partial of it, so bound configuration is kept), or the
one given with `fn`. Inductor's passes are resolved by subsystem and name (see `inductor_pass`);
the ones that cannot be re-run say why.

This module imports torch; nothing outside the replay modules imports it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import inspect
import os
import re
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator

import orjson
import torch
import torch.fx

from graphtrain_inspect.capture import graph_tables, logformat
from graphtrain_inspect.inspector.errors import CannotReplay, ReplayError
from graphtrain_inspect.inspector.read.graphmodel import GraphTables
from graphtrain_inspect.inspector.replay.plan import (
    Blob,
    Refused,
    Target,
    distributed_initialized,
    major_minor,
    op_namespaces,
    rank_argv,
    rank_environment,
    read_blob,
    torch_versions,
)

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.read.capture_index import Capture, PassRecord
    from graphtrain_inspect.inspector.diff.graph_diff import GraphDiff


# ---------------------------------------------------------------------------------------------
# Loading a blob


# Operator namespaces whose libraries are registered by importing these modules, in order.
OP_LIBRARIES: dict[str, tuple[str, ...]] = {
    # DeviceMesh must be an opaque type before the device_mesh ops' schemas are inferred.
    "device_mesh": ("torch.distributed.tensor", "torch.distributed._ops.device_mesh"),
    "_dtensor": ("torch.distributed.tensor",),
    "_c10d_functional": ("torch.distributed._functional_collectives",),
    "_c10d_functional_autograd": ("torch.distributed._functional_collectives",),
    "c10d_functional": ("torch.distributed._functional_collectives",),
    "symm_mem": ("torch.distributed._symmetric_memory",),
}


def import_op_libraries(namespaces: set[str], extra: list[str] = ()) -> list[str]:
    """Import what registers the graph's operator namespaces; returns notes on what failed."""
    notes = []
    mods: list[str] = []
    for ns in sorted(namespaces):
        mods.extend(m for m in OP_LIBRARIES.get(ns, ()) if m not in mods)
    mods.extend(m for m in extra if m not in mods)
    for m in mods:
        try:
            importlib.import_module(m)
        except Exception as e:  # noqa: BLE001 - reported; loading says more if it matters
            notes.append(f"could not import {m}: {type(e).__name__}: {e}")
    for ns in sorted(namespaces):
        if ns in OP_LIBRARIES or ns in extra:
            continue
        if not _namespace_loaded(ns):
            notes.append(f"operator namespace torch.ops.{ns} is not registered yet; if loading fails, "
                         f"import its library with --import MODULE")
    return notes


def _namespace_loaded(ns: str) -> bool:
    try:
        return bool(list(getattr(torch.ops, ns)))
    except Exception:  # noqa: BLE001
        return False


@dataclass
class Loaded:
    gm: torch.fx.GraphModule
    shape_env: Any
    fake_mode: Any
    seconds: float
    blob: Blob
    standins: list[str] = field(default_factory=list)  # __main__ classes replaced by stand-ins


def new_fake_mode() -> Any:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    return FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)


def load_blob(blob: Blob, *, captured_torch: str | None = None) -> Loaded:
    """Unpickle a verified blob into a fresh fake mode (each blob its own: loads() overwrites the
    mode's ShapeEnv). Raises ReplayError with one line saying why it could not be loaded."""
    from graphtrain_inspect.capture import blobs

    fm = new_fake_mode()
    t0 = time.perf_counter()
    standins: list[str] = []
    try:
        with _main_standins(standins):
            obj = blobs.pickler().loads(blob.data, fm)
    except Exception as e:  # noqa: BLE001 - any failure is explained in one line
        raise ReplayError(explain_load_error(e, blob, captured_torch)) from e
    if isinstance(obj, tuple) and len(obj) == 2:
        gm, shape_env = obj
    else:
        gm, shape_env = obj, None
    if not isinstance(gm, torch.fx.GraphModule):
        raise ReplayError(f"blob {blob.path} holds a {type(gm).__name__}, not a GraphModule")
    if shape_env is None:
        shape_env = fm.shape_env
    return Loaded(gm, shape_env, fm, time.perf_counter() - t0, blob, sorted(set(standins)))


_STANDINS: dict[tuple[str, str], type] = {}


def _standin(module: str, name: str) -> type:
    key = (module, name)
    cls = _STANDINS.get(key)
    if cls is None:
        cls = type(name.rpartition(".")[2], (), {"__module__": module, "__qualname__": name, "_gti_standin": True,
                                                  "__doc__": "Stands in for a class of the training's __main__ module (replay cannot import it)."})
        _STANDINS[key] = cls
    return cls


# Our packages' names before they installed under one namespace (graphtrain_inspect.*): blobs of
# older captures (the bundled ones among them) name classes as capture.blobs.
_FLAT_PACKAGES = ("capture", "inspector", "samples", "tui")


@contextlib.contextmanager
def _main_standins(found: list[str]) -> Iterator[None]:
    """Classes of the training's `__main__` (a model class in node metadata such as
    `fwd_nn_module_stack`) cannot be imported by another program: stand-ins take their place.
    Anything else that cannot be imported still fails the load."""
    from torch.fx import _graph_pickler as gp

    base = getattr(gp, "_GraphUnpickler", None)
    if base is None:
        yield
        return

    class _Unpickler(base):  # type: ignore[misc, valid-type]
        def find_class(self, module: str, name: str) -> Any:
            try:
                return super().find_class(module, name)
            except (AttributeError, ImportError):
                if module.split(".")[0] in _FLAT_PACKAGES:
                    # a blob written before the packages moved under graphtrain_inspect.*
                    return super().find_class(f"graphtrain_inspect.{module}", name)
                if module != "__main__":
                    raise
                found.append(f"{module}.{name}")
                return _standin(module, name)

    gp._GraphUnpickler = _Unpickler
    try:
        yield
    finally:
        gp._GraphUnpickler = base


def explain_load_error(e: BaseException, blob: Blob, captured_torch: str | None) -> str:
    here = torch.__version__
    versions = ""
    if captured_torch and major_minor(captured_torch) != major_minor(here):
        versions = f" (captured with torch {captured_torch}, loading with torch {here}: blobs are not portable across torch versions)"
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    if "CUDA" in msg and ("deserialize" in msg or "is_available" in msg):
        return (f"cannot load {blob.path}: the graph holds real CUDA tensor constants (not fake tensors), and loading "
                f"them needs a GPU; this machine has none{versions}")
    m = re.search(r"_OpNamespace' '([\w.]+)' object has no attribute '(\w+)'|No such operator ([\w:.]+)", msg)
    if m:
        op = m.group(3) or f"{m.group(1)}.{m.group(2)}"
        return (f"cannot load {blob.path}: operator {op} is not registered in this process; import the library that "
                f"defines it with --import MODULE{versions}")
    if isinstance(e, (ModuleNotFoundError, AttributeError, ImportError)):
        return f"cannot load {blob.path}: {type(e).__name__}: {msg}{versions}"
    return f"cannot load {blob.path}: {type(e).__name__}: {msg[:300]}{versions}"


# ---------------------------------------------------------------------------------------------
# Finding the pass


@dataclass
class PassFn:
    """A callable and how the training called it."""

    fn: Callable
    call: str  # "gm_inputs": fn(gm, example_inputs); "gm": fn(gm); "graph": fn(gm.graph)
    description: str
    inductor: tuple[str, str | None] | None = None  # (pass name, subsystem): run through GraphTransformObserver
    notes: list[str] = field(default_factory=list)


def import_target(spec: str) -> Any:
    """`module:qualname` or `path/to/file.py:qualname` -> the object. Raises ReplayError."""
    mod_name, sep, qual = spec.strip().rpartition(":")
    if not sep or not mod_name or not qual:
        raise ReplayError(f"{spec!r}: expected MODULE:FUNCTION (or path/to/file.py:FUNCTION)")
    try:
        if mod_name.endswith(".py") or os.sep in mod_name:
            path = os.path.abspath(mod_name)
            if not os.path.isfile(path):
                raise ReplayError(f"{spec!r}: no such file {mod_name}")
            name = "gti_replay_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
            s = importlib.util.spec_from_file_location(name, path)
            if s is None or s.loader is None:
                raise ReplayError(f"{spec!r}: cannot import {mod_name}")
            module = importlib.util.module_from_spec(s)
            sys.modules[name] = module
            s.loader.exec_module(module)
        else:
            # As `python -m` does: modules of the current directory are importable.
            if os.getcwd() not in sys.path and "" not in sys.path:
                sys.path.insert(0, os.getcwd())
            try:
                module = importlib.import_module(mod_name)
            except ModuleNotFoundError as e:
                # a capture made before our packages moved under graphtrain_inspect.* names the
                # sample's passes as samples.passes...; a module of that name here is preferred
                parts = mod_name.split(".")
                if parts[0] not in _FLAT_PACKAGES or e.name not in {".".join(parts[:i]) for i in range(1, len(parts) + 1)}:
                    raise
                module = importlib.import_module(f"graphtrain_inspect.{mod_name}")
    except ReplayError:
        raise
    except Exception as e:  # noqa: BLE001 - an import that fails is one line, not a traceback
        raise ReplayError(f"cannot import {mod_name}: {type(e).__name__}: {e}") from e
    if "<locals>" in qual or "<lambda>" in qual:
        raise CannotReplay(f"{spec} is defined inside a function (a closure or lambda): it has no importable name; "
                           "give an equivalent module-level function with --fn MODULE:FUNC")
    obj: Any = module
    for part in qual.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ReplayError(f"{mod_name} has no attribute {qual!r}") from None
    return obj


def _unwrap(fn: Any) -> Any:
    # A capture wrapper (only inside a captured process) delegates to the original.
    while getattr(fn, "_gti_original", None) is not None:
        fn = fn._gti_original
    return fn


def _first_param(fn: Any) -> inspect.Parameter | None:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    return params[0] if params else None


def _positional_count(fn: Any) -> int | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return 99
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def graph_or_gm(fn: Any) -> str:
    """Whether an Inductor pass function takes the Graph or the GraphModule (first parameter)."""
    p = _first_param(fn)
    if p is None:
        return "gm"
    ann = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", str(p.annotation))
    if "GraphModule" in ann:
        return "gm"
    if "Graph" in ann or p.name in ("graph", "g", "fx_graph"):
        return "graph"
    return "gm"


def named_pass(rec: "PassRecord", registry: str | None) -> PassFn:
    """The recorded `module:qualname` (a --pass or record_pass function)."""
    if not rec.qualname:
        raise CannotReplay(f"#{rec.seq} {rec.name} has no recorded module:qualname (a record_pass block or a callable "
                           "without a name); give the function with --fn MODULE:FUNC")
    fn = _unwrap(import_target(rec.qualname))
    notes: list[str] = []
    desc = rec.qualname
    if registry:
        # Prefer the registry's entry: a functools.partial there carries the configuration the
        # training bound (torchtitan-style `partial(pass, cfg=...)`).
        try:
            reg = import_target(registry)
        except ReplayError:
            reg = None
        items = list(reg.values()) if isinstance(reg, dict) else list(reg) if isinstance(reg, (list, tuple)) else []
        hits = [x for x in items if isinstance(x, functools.partial) and _unwrap(x.func) is fn]
        if hits:
            p = hits[0]
            fn = functools.partial(fn, *p.args, **p.keywords)
            desc = f"{rec.qualname} as bound in {registry} (functools.partial)"
            if len(hits) > 1:
                notes.append(f"{registry} holds {len(hits)} partials of {rec.qualname}; using the first")
    return PassFn(fn, "gm_inputs" if (_positional_count(fn) or 0) >= 2 else "gm", desc, notes=notes)


def user_fn(spec: str | Callable, rec: "PassRecord") -> PassFn:
    """`--fn MODULE:FUNC`, a file path, or a callable (REPL): called the way the captured pass was."""
    fn = import_target(spec) if isinstance(spec, str) else spec
    if not callable(fn):
        raise ReplayError(f"{spec!r} is a {type(fn).__name__}, not a function")
    desc = spec if isinstance(spec, str) else (getattr(fn, "__qualname__", None) or repr(fn))
    if rec.source == "inductor":
        return PassFn(fn, graph_or_gm(fn), str(desc), inductor=(rec.name, rec.subsystem))
    return PassFn(fn, "gm_inputs" if (_positional_count(fn) or 0) >= 2 else "gm", str(desc))


_INDUCTOR_MODULES = {
    "pre_grad_passes": "torch._inductor.fx_passes.pre_grad",
    "joint_graph_passes": "torch._inductor.fx_passes.joint_graph",
    "post_grad_passes": "torch._inductor.fx_passes.post_grad",
}


def inductor_pass(rec: "PassRecord", gm: torch.fx.GraphModule) -> PassFn:
    """One of Inductor's own passes (recorded through GraphTransformObserver), by subsystem and name.

    Re-runnable: module-level pass functions (`post_grad:remove_noop_ops`, `remove_assert_ops`,
    `joint_graph:constant_fold_uniform_value`, `stable_topological_sort` ...), the pattern-matcher
    passes `pass_pattern_<i>` of the joint and post-grad subsystems (their patterns registered by
    the module's `lazy_init`, with the default Inductor config of this process), the pre-grad
    pattern passes named by their module attribute, and three of Inductor's own closures:
    pre-grad `group_batch_fusion_passes`, post-grad `post_grad_custom_pre_pass` without a name
    (Inductor's `group_batch_fusion_passes(pre_grad=False)`) and `reinplace_inplaceable_ops`.
    Not re-runnable: other closures and lambdas (no importable name), custom passes installed in
    config slots as objects without a name, and the partitioner (see `partitioner_pass`).
    """
    name, sub, qual = rec.name, rec.subsystem, rec.qualname or ""
    modname = _INDUCTOR_MODULES.get(sub or "")
    key = (sub, name)
    if key == ("pre_grad_passes", "group_batch_fusion_passes") or (key == ("post_grad_passes", "post_grad_custom_pre_pass") and not qual):
        from torch._inductor.fx_passes.group_batch_fusion import group_batch_fusion_passes

        pre = sub == "pre_grad_passes"
        fn = functools.partial(group_batch_fusion_passes, pre_grad=pre)
        notes = [] if pre else ["the recorded pass has no name: taken to be Inductor's own group_batch_fusion_passes(pre_grad=False), "
                                "which runs under that name (a custom pass in config.post_grad_custom_pre_pass would have its own)"]
        return PassFn(fn, "graph", f"torch._inductor.fx_passes.group_batch_fusion:group_batch_fusion_passes(pre_grad={pre})", (name, sub), notes)
    if key == ("post_grad_passes", "reinplace_inplaceable_ops"):
        from torch._inductor.fx_passes.reinplace import reinplace_inplaceable_ops
        from torch._inductor.fx_utils import FakeTensorUpdater

        fn = functools.partial(reinplace_inplaceable_ops, FakeTensorUpdater(gm))
        return PassFn(fn, "graph", "torch._inductor.fx_passes.reinplace:reinplace_inplaceable_ops", (name, sub),
                      ["its FakeTensorUpdater is made from the graph as received (Inductor makes it at the start of post_grad_passes)"])
    m = re.fullmatch(r"pass_pattern_(\d+)", name)
    if qual.endswith(":PatternMatcherPass.apply") or m:
        if modname is None:
            raise CannotReplay(f"#{rec.seq} {name}: a pattern-matcher pass of subsystem {sub!r}, which replay does not know")
        mod = importlib.import_module(modname)
        obj = None
        if m and sub in ("joint_graph_passes", "post_grad_passes"):
            pats = getattr(mod, "pass_patterns", None)
            if isinstance(pats, (list, tuple)) and int(m.group(1)) < len(pats):
                obj = pats[int(m.group(1))]
        if obj is None:
            cand = getattr(mod, name, None)
            if cand is not None and hasattr(cand, "apply"):
                obj = cand
        if obj is None:
            for table in ("PRE_GRAD_PATTERNS", "POST_GRAD_PATTERNS"):
                cand = (getattr(mod, table, None) or {}).get(name)
                if cand is not None and hasattr(cand, "apply"):
                    obj = cand
                    break
        if obj is None:
            raise CannotReplay(f"#{rec.seq} {name} ({sub}): no pattern-matcher pass of that name in {modname}")
        lazy = getattr(mod, "lazy_init", None)
        if callable(lazy):
            _lazy_init(lazy, gm)
        return PassFn(obj.apply, "graph", f"{modname}:{name} (PatternMatcherPass.apply)", (name, sub),
                      ["patterns registered by this process's Inductor config (the capture does not record the config)"])
    if not qual:
        raise CannotReplay(f"#{rec.seq} {name} ({sub}): the capture recorded no module:qualname (a functools.partial or a "
                           "callable object in a config slot); give the function with --fn MODULE:FUNC")
    if "<locals>" in qual or "<lambda>" in qual:
        raise CannotReplay(f"#{rec.seq} {name} ({sub}) is {qual}, a closure inside an Inductor function: it has no "
                           "importable name; give an equivalent function with --fn MODULE:FUNC")
    mod_name, _, attr = qual.partition(":")
    if "." in attr:
        raise CannotReplay(f"#{rec.seq} {name} ({sub}) is the method {qual} of an object the capture did not record; "
                           "give an equivalent function with --fn MODULE:FUNC")
    fn = _unwrap(import_target(qual))
    return PassFn(fn, graph_or_gm(fn), qual, (name, sub))


def _lazy_init(lazy: Callable, gm: torch.fx.GraphModule) -> None:
    dev = None
    for n in gm.graph.find_nodes(op="placeholder"):
        v = n.meta.get("val")
        if isinstance(v, torch.Tensor):
            dev = v.device
            break
    try:
        lazy(dev)
    except TypeError:
        lazy()


def resolve_pass(rec: "PassRecord", registry: str | None, gm: torch.fx.GraphModule | None, fn: Any = None) -> PassFn:
    if fn is not None:
        return user_fn(fn, rec)
    if rec.source == "partitioner":
        raise CannotReplay(f"#{rec.seq} {rec.name} is the joint-graph partitioner: it takes the joint inputs and the number "
                           "of forward outputs, which the capture does not record; replay its fw/bw outputs' passes instead")
    if rec.source == "inductor":
        if gm is None:
            raise ReplayError("internal: Inductor passes are resolved against the loaded graph")
        return inductor_pass(rec, gm)
    if rec.source == "torch":
        raise CannotReplay(f"{rec.name} is a stage synthesized from torch's own TORCH_TRACE logs: there is no pass to run")
    return named_pass(rec, registry)


# ---------------------------------------------------------------------------------------------
# The captured rank's world


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
    made = [str(dist.group.WORLD.group_name)] if hasattr(dist.group.WORLD, "group_name") else []
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
                    notes.append(f"process group {name!r} recreated as {got!r}: passes resolving {name!r} will not find it")
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
def rank_world(cap: "Capture", rank: int, fake_mode: Any, *, inductor: bool = False, setup: list[str] = (),
               distributed: bool = True) -> Iterator[World]:
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
            fn = import_target(spec)
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - the user's setup failed: one line
                raise ReplayError(f"--setup {spec} raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e
        yield w
    finally:
        stack.close()
        sys.argv = saved_argv
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# ---------------------------------------------------------------------------------------------
# Running and comparing


@dataclass
class GraphView:
    """A live graph as a capture would record it: node tables, code, symbols, devices."""

    gid: str
    tables: GraphTables
    code: str
    symbols: dict[str, Any] | None
    devices: dict[str, Any] | None


def graph_view(gm: torch.fx.GraphModule, *, shape_env: Any = None, devices_like: dict | None = None, prefix: str = "r") -> GraphView:
    """Turn a live GraphModule into what the capture stores (capture.graph_tables), so the
    inspector's diffs and checks read it like a captured graph. `devices_like`: the captured
    device table whose own device / local rank this graph's table takes (the replay process
    itself computes on the CPU)."""
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes(), torch.no_grad():
        code = graph_tables.readable_code(gm)
        raw = graph_tables.node_tables(gm)
        tables_json = logformat.encode_node_table(raw)
        payload = orjson.loads(tables_json)  # exactly what a capture's reader sees
        env = shape_env if shape_env is not None else graph_tables.find_shape_env(gm)
        try:
            symbols = orjson.loads(orjson.dumps(graph_tables.symbol_map(gm, raw, env), option=orjson.OPT_NON_STR_KEYS))
        except Exception:  # noqa: BLE001
            symbols = None
        try:
            devices = orjson.loads(orjson.dumps(graph_tables.device_table(gm), option=orjson.OPT_NON_STR_KEYS))
            if devices_like:
                for k in ("own_device", "local_rank", "cuda_visible_devices"):
                    if k in devices_like:
                        devices[k] = devices_like[k]
        except Exception:  # noqa: BLE001
            devices = None
    gid = prefix + logformat.graph_id(code, tables_json)[1:]
    tables = GraphTables.from_payload(gid, payload, source="table")
    return GraphView(gid, tables, code, symbols, devices)


@dataclass
class Outcome:
    """One replay of the pass on one rank."""

    rank: int
    rec: "PassRecord"
    pass_fn: PassFn | None
    before: Loaded | None
    result: torch.fx.GraphModule | None = None
    view: GraphView | None = None  # the result as a capture would record it
    exception: BaseException | None = None
    exc_text: str | None = None
    run_s: float = 0.0
    world: World | None = None
    diff: "GraphDiff | None" = None  # captured after-graph vs the result
    verdict: str = "differs"  # reproduced | differs
    reason: str = ""  # one line
    renamed: int = 0  # aligned, equal nodes whose FX names differ

    @property
    def reproduced(self) -> bool:
        return self.verdict == "reproduced"


def run_pass(pf: PassFn, gm: torch.fx.GraphModule) -> Any:
    if pf.inductor is not None:
        from torch.fx.passes.graph_transform_observer import GraphTransformObserver

        obs = GraphTransformObserver(gm, pf.inductor[0], subsystem=pf.inductor[1])
        # As the capture did: a GraphModule returned by the pass is its output, else `gm`.
        return obs.apply_graph_pass(pf.fn) if pf.call == "graph" else obs.apply_gm_pass(pf.fn)
    if pf.call == "graph":
        return pf.fn(gm.graph)
    if pf.call == "gm_inputs":
        return pf.fn(gm, example_inputs(gm))
    return pf.fn(gm)


def example_inputs(gm: torch.fx.GraphModule) -> list[Any]:
    """The graph's inputs as the pass saw them in training: its placeholders' fake values."""
    out = []
    for n in gm.graph.find_nodes(op="placeholder"):
        out.append(n.meta.get("val", n.meta.get("example_value")))
    return out


def result_graph(result: Any, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """What the capture takes as the pass's output: a returned GraphModule, else `gm` mutated."""
    if isinstance(result, torch.fx.GraphModule):
        return result
    if isinstance(result, (tuple, list)):
        for r in result:
            if isinstance(r, torch.fx.GraphModule):
                return r
    return gm


_CLASS_LINE = re.compile(r"^class \S+\(torch\.nn\.Module\):$")


def code_lines(code: str) -> list[str]:
    from graphtrain_inspect.inspector.diff.graph_diff import normalize_code

    lines = normalize_code(code)
    # The class line names the GraphModule's Python class (`<lambda>`, `GraphModuleImpl`): not the graph.
    return [l for l in lines if not _CLASS_LINE.match(l)]


def compare(cap: "Capture", rec: "PassRecord", out: Outcome, role: str = "out") -> None:
    """Fill in the verdict: the result against the captured after-graph, node by node."""
    from graphtrain_inspect.inspector.diff.graph_diff import diff_tables

    if rec.status != "ok" or not rec.after:
        cap_exc = (rec.exception or {}).get("type") or "an exception"
        if out.exception is not None:
            mine = f"{type(out.exception).__module__}.{type(out.exception).__qualname__}"
            same = cap_exc in (mine, type(out.exception).__name__) or cap_exc.endswith("." + type(out.exception).__name__)
            out.verdict = "reproduced" if same else "differs"
            out.reason = (f"raised {type(out.exception).__name__} as in training" if same
                          else f"raised {type(out.exception).__name__}; in training it raised {cap_exc}")
        else:
            out.verdict = "differs"
            out.reason = f"finished; in training it raised {cap_exc}: {(rec.exception or {}).get('message', '')[:200]}"
        return
    if out.exception is not None:
        out.verdict = "differs"
        out.reason = f"raised {type(out.exception).__name__}: {str(out.exception).splitlines()[0][:300] if str(out.exception) else ''}; in training it finished"
        return
    gid = rec.after.get(role) or next(iter(rec.after.values()))
    captured = cap.node_table(rec.rank, gid)
    if captured is None or out.view is None:
        out.verdict = "differs"
        out.reason = f"the captured after-graph {gid} has no readable node table"
        return
    d = diff_tables(captured, out.view.tables, a_label=f"captured {gid}", b_label="replayed")
    out.diff = d
    out.renamed = sum(1 for sub in d.subgraphs for n in sub.nodes
                      if n.status == "same" and n.a is not None and n.b is not None and n.a.get("name") != n.b.get("name"))
    paths_a = [g.path for g in captured.graphs]
    paths_b = [g.path for g in out.view.tables.graphs]
    if d.empty and paths_a == paths_b:
        out.verdict = "reproduced"
        n = out.view.tables.node_count
        out.reason = f"the result matches the captured after-graph {gid} node for node ({n} nodes" + (
            f", {len(paths_b) - 1} nested subgraphs" if len(paths_b) > 1 else "") + ")"
        if out.renamed:
            out.reason += f"; {out.renamed} nodes carry other FX names (name counters start afresh in a loaded graph)"
    else:
        c = d.counts
        out.verdict = "differs"
        out.reason = (f"the result differs from the captured after-graph {gid}: {c['added']} nodes added, "
                      f"{c['removed']} removed, {c['changed']} changed")


# ---------------------------------------------------------------------------------------------
# The replayer


class Replayer:
    """Everything a replay needs, loaded once: the capture, the target, the verified blobs."""

    def __init__(self, cap: "Capture", target: Target, *, trust: bool = False, fn: Any = None,
                 setup: list[str] = (), imports: list[str] = (), log: Callable[[str], None] | None = None):
        self.cap = cap
        self.target = target
        self.trust = trust
        self.fn = fn
        self.setup = list(setup)
        self.imports = list(imports)
        self.log = log or (lambda s: None)
        self.captured_torch = torch_versions(cap, target.rank)
        self._blobs: dict[tuple[int, str], Blob] = {}
        self._imported: set[str] = set()
        self.notes: list[str] = []
        mm_cap, mm_here = major_minor(self.captured_torch), major_minor(torch.__version__)
        if mm_cap and mm_here and mm_cap != mm_here:
            self.notes.append(f"captured with torch {self.captured_torch}, replaying with torch {torch.__version__}: "
                              "blobs and passes may not be compatible across torch versions")

    @property
    def rank(self) -> int:
        return self.target.rank

    @property
    def rec(self) -> "PassRecord":
        return self.target.rec

    # -- loading --------------------------------------------------------------------------------

    def blob(self, rec: "PassRecord", gid: str | None, what: str) -> Blob:
        key = (rec.rank, gid or "")
        b = self._blobs.get(key)
        if b is None:
            b = self._blobs[key] = read_blob(self.cap, rec, gid, trust=self.trust, what=what)
        return b

    def prepare(self, rank: int, gid: str) -> None:
        ns = op_namespaces(self.cap, rank, gid)
        want = {n for n in ns if n not in self._imported}
        if want or (self.imports and not self._imported):
            for note in import_op_libraries(want, self.imports):
                if note not in self.notes:
                    self.notes.append(note)
            self._imported |= want | {"<extra>"}

    def load(self, rec: "PassRecord", gid: str | None, what: str = "before") -> Loaded:
        b = self.blob(rec, gid, what)
        self.prepare(rec.rank, gid or "")
        return load_blob(b, captured_torch=self.captured_torch)

    def load_before(self, rec: "PassRecord | None" = None) -> Loaded:
        rec = rec or self.rec
        return self.load(rec, rec.before, "before")

    def load_after(self, role: str = "out") -> Loaded:
        gid = self.rec.after.get(role) or next(iter(self.rec.after.values()), None)
        return self.load(self.rec, gid, "after")

    # -- running --------------------------------------------------------------------------------

    def run(self, fn: Any = None, rec: "PassRecord | None" = None, *, resolved: PassFn | None = None) -> Outcome:
        """Load a fresh copy of the before-graph of `rec` (default: the target) and run the pass
        on it in the captured rank's world. Raises ReplayError/Refused when it cannot be loaded."""
        rec = rec or self.rec
        loaded = self.load_before(rec)
        gm = loaded.gm
        use_fn = fn if fn is not None else self.fn
        out = Outcome(rec.rank, rec, None, loaded)
        inductor = rec.source == "inductor"
        with rank_world(self.cap, rec.rank, loaded.fake_mode, inductor=inductor, setup=self.setup) as world:
            out.world = world
            try:
                pf = resolved or resolve_pass(rec, self.target.target, gm, use_fn)
            except ReplayError:
                raise
            except Exception as e:  # noqa: BLE001 - e.g. an Inductor pattern pass that cannot register here
                raise ReplayError(f"cannot prepare #{rec.seq} {rec.name} to run: {type(e).__name__}: {e}") from e
            out.pass_fn = pf
            t0 = time.perf_counter()
            try:
                res = run_pass(pf, gm)
                out.result = result_graph(res, gm)
            except Exception as e:  # noqa: BLE001 - the pass's own exception is a result
                out.exception = e
                out.exc_text = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])
            out.run_s = time.perf_counter() - t0
            if out.result is not None:
                try:
                    out.view = graph_view(out.result, shape_env=loaded.shape_env, devices_like=self.cap.devices(rec.rank, rec.before) if rec.before else None)
                except Exception as e:  # noqa: BLE001
                    out.exception = e
                    out.exc_text = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])
                    out.result = None
        compare(self.cap, rec, out)
        return out

    def run_peers(self, fn: Any = None, ranks: list[int] | None = None) -> dict[int, Outcome]:
        """The same pass application replayed on other ranks (each in its own world)."""
        from graphtrain_inspect.inspector.replay.plan import peers

        outs: dict[int, Outcome] = {}
        for r, rec in sorted(peers(self.cap, self.target).items()):
            if ranks is not None and r not in ranks:
                continue
            outs[r] = self.run(fn, rec)
        return outs


# ---------------------------------------------------------------------------------------------
# Checks on the result


@dataclass
class CheckDelta:
    """Findings of the checks with the replayed outputs in place, against the captured ones."""

    new: list[Any]  # present in the pass's output after the replay, not in the capture
    gone: list[Any]  # present in the captured output, not after the replay
    kept: list[Any]  # present in both
    replaced: list[int]  # ranks whose output is the replayed one
    not_run: list[Any]
    notes: list[str]


def check_delta(cap: "Capture", target: Target, outcomes: dict[int, Outcome], peer_recs: dict[int, "PassRecord"] | None = None) -> CheckDelta:
    """Run every check on the capture cut after the pass, once as captured and once with the
    replayed results in place (ranks whose replay raised keep their captured output)."""
    from graphtrain_inspect.inspector.checks import check_report
    from graphtrain_inspect.inspector.replay.view import ReplayView, captured_view, compare_findings, cut_points

    if peer_recs is None:
        from graphtrain_inspect.inspector.replay.plan import peers

        peer_recs = peers(cap, target)
    cuts = cut_points(cap, target.rank, target.rec, peer_recs)
    notes = []
    replaced: dict[int, dict[str, GraphView]] = {}
    for r, out in sorted(outcomes.items()):
        if out.view is None:
            notes.append(f"rank {r}: the replay raised, its captured output is kept for the checks")
            continue
        role = next(iter(out.rec.after), "out")
        replaced[r] = {role: out.view}
    before = check_report(captured_view(cap, cuts))  # type: ignore[arg-type]
    after = check_report(ReplayView(cap, cuts, replaced))  # type: ignore[arg-type]
    seqs = {target.rec.seq, *(p.seq for p in peer_recs.values())}
    new, gone, kept = compare_findings(before.findings, after.findings, seqs)
    return CheckDelta(new, gone, kept, sorted(replaced), after.not_run, notes + list(after.notes))
