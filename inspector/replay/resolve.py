"""Finding the pass to replay: the function named by the record's `module:qualname` (through the
registry the capture wrapped, so a functools.partial's bound configuration is kept), one given as
`fn`, or an Inductor pass by subsystem and name (`inductor_pass`); the ones that cannot be re-run
raise CannotReplay saying why. Imports torch."""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import inspect
import os
import re
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator

import torch
import torch.fx

from graphtrain_inspect.inspector.errors import CannotReplay, ReplayError
from graphtrain_inspect.inspector.replay.load import FLAT_PACKAGES
from graphtrain_inspect.inspector.replay.plan import is_file_spec

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.read.capture_records import PassRecord


@dataclass
class PassFn:
    """A callable and how the training called it."""

    fn: Callable
    call: str  # "gm_inputs": fn(gm, example_inputs); "gm": fn(gm); "graph": fn(gm.graph)
    description: str
    inductor: tuple[str, str | None] | None = None  # (pass name, subsystem): run through GraphTransformObserver
    notes: list[str] = field(default_factory=list)


def cwd_in_capture(capture_dir: str | None) -> bool:
    """Whether the current directory is the capture's folder or inside it."""
    if capture_dir is None:
        return False
    real, root = os.path.realpath(os.getcwd()), os.path.realpath(capture_dir)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


@contextlib.contextmanager
def user_code_path(capture_dir: str | None = None) -> Iterator[None]:
    """While the user's own code is imported (`--fn`, `--setup`, the pass the capture names), the
    current directory is searched first, as `python -m` does, unless it is inside the capture
    (whose files are not the user's code). sys.path is put back afterwards: the tool's own lazy
    imports never search it."""
    cwd = os.getcwd()
    added = not cwd_in_capture(capture_dir) and cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        yield
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)


def import_target(spec: str, *, named_by_capture: bool = False, capture_dir: str | None = None) -> Any:
    """`module:qualname` or `path/to/file.py:qualname` -> the object. Raises ReplayError.
    `named_by_capture`: the spec comes from the capture, not the user's command line: only a
    module is imported (installed, or the user's own in the current directory), never a file path
    the capture names, nor a module of the capture's folder (`capture_dir`)."""
    mod_name, sep, qual = spec.strip().rpartition(":")
    if not sep or not mod_name or not qual:
        raise ReplayError(f"{spec!r}: expected MODULE:FUNCTION (or path/to/file.py:FUNCTION)")
    if named_by_capture and is_file_spec(spec):
        raise CannotReplay(
            f"the capture names the pass by a file path ({spec}): replay imports a pass the capture names only "
            "as an installed module, never from a path it gives; give the function with --fn path/to/file.py:FUNC"
        )
    try:
        if is_file_spec(spec):
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
            with user_code_path(capture_dir):
                try:
                    module = importlib.import_module(mod_name)
                except ModuleNotFoundError as e:
                    # a capture made before our packages moved under graphtrain_inspect.* names the
                    # sample's passes as samples.passes...; a module of that name here is preferred
                    parts = mod_name.split(".")
                    if parts[0] not in FLAT_PACKAGES or e.name not in {
                        ".".join(parts[:i]) for i in range(1, len(parts) + 1)
                    }:
                        raise
                    module = importlib.import_module(f"graphtrain_inspect.{mod_name}")
    except ReplayError:
        raise
    except Exception as e:
        raise ReplayError(f"cannot import {mod_name}: {type(e).__name__}: {e}") from e
    if "<locals>" in qual or "<lambda>" in qual:
        raise CannotReplay(
            f"{spec} is defined inside a function (a closure or lambda): it has no importable name; "
            "give an equivalent module-level function with --fn MODULE:FUNC"
        )
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


def named_pass(rec: "PassRecord", registry: str | None, capture_dir: str | None = None) -> PassFn:
    """The recorded `module:qualname` (a --pass or record_pass function): a module, imported as
    `import_target` imports what a capture names."""
    if not rec.qualname:
        raise CannotReplay(
            f"#{rec.seq} {rec.name} has no recorded module:qualname (a record_pass block or a callable "
            "without a name); give the function with --fn MODULE:FUNC"
        )
    fn = _unwrap(import_target(rec.qualname, named_by_capture=True, capture_dir=capture_dir))
    notes: list[str] = []
    desc = rec.qualname
    if registry:
        # Prefer the registry's entry: a functools.partial there carries the configuration the
        # training bound (torchtitan-style `partial(pass, cfg=...)`).
        try:
            reg = import_target(registry, named_by_capture=True, capture_dir=capture_dir)
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


def user_fn(spec: str | Callable, rec: "PassRecord", capture_dir: str | None = None) -> PassFn:
    """`--fn MODULE:FUNC`, a file path, or a callable (REPL): called the way the captured pass was."""
    fn = import_target(spec, capture_dir=capture_dir) if isinstance(spec, str) else spec
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


def inductor_pass(rec: "PassRecord", gm: torch.fx.GraphModule, capture_dir: str | None = None) -> PassFn:
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
    own = _inductor_closure(rec, gm)
    if own is not None:
        return own
    m = re.fullmatch(r"pass_pattern_(\d+)", name)
    if qual.endswith(":PatternMatcherPass.apply") or m:
        return _pattern_pass(rec, gm, m)
    if not qual:
        raise CannotReplay(
            f"#{rec.seq} {name} ({sub}): the capture recorded no module:qualname (a functools.partial or a "
            "callable object in a config slot); give the function with --fn MODULE:FUNC"
        )
    if "<locals>" in qual or "<lambda>" in qual:
        raise CannotReplay(
            f"#{rec.seq} {name} ({sub}) is {qual}, a closure inside an Inductor function: it has no "
            "importable name; give an equivalent function with --fn MODULE:FUNC"
        )
    mod_name, _, attr = qual.partition(":")
    if "." in attr:
        raise CannotReplay(
            f"#{rec.seq} {name} ({sub}) is the method {qual} of an object the capture did not record; "
            "give an equivalent function with --fn MODULE:FUNC"
        )
    fn = _unwrap(import_target(qual, named_by_capture=True, capture_dir=capture_dir))
    return PassFn(fn, graph_or_gm(fn), qual, (name, sub))


def _inductor_closure(rec: "PassRecord", gm: torch.fx.GraphModule) -> PassFn | None:
    """The three of Inductor's own closures replay knows (group_batch_fusion_passes, pre- and
    post-grad, and reinplace_inplaceable_ops), as Inductor makes them; None for any other pass."""
    name, sub, qual = rec.name, rec.subsystem, rec.qualname or ""
    key = (sub, name)
    if key == ("pre_grad_passes", "group_batch_fusion_passes") or (
        key == ("post_grad_passes", "post_grad_custom_pre_pass") and not qual
    ):
        from torch._inductor.fx_passes.group_batch_fusion import group_batch_fusion_passes

        pre = sub == "pre_grad_passes"
        fn = functools.partial(group_batch_fusion_passes, pre_grad=pre)
        notes = (
            []
            if pre
            else [
                "the recorded pass has no name: taken to be Inductor's own group_batch_fusion_passes(pre_grad=False), "
                "which runs under that name (a custom pass in config.post_grad_custom_pre_pass would have its own)"
            ]
        )
        return PassFn(
            fn,
            "graph",
            f"torch._inductor.fx_passes.group_batch_fusion:group_batch_fusion_passes(pre_grad={pre})",
            (name, sub),
            notes,
        )
    if key == ("post_grad_passes", "reinplace_inplaceable_ops"):
        from torch._inductor.fx_passes.reinplace import reinplace_inplaceable_ops
        from torch._inductor.fx_utils import FakeTensorUpdater

        fn = functools.partial(reinplace_inplaceable_ops, FakeTensorUpdater(gm))
        return PassFn(
            fn,
            "graph",
            "torch._inductor.fx_passes.reinplace:reinplace_inplaceable_ops",
            (name, sub),
            [
                "its FakeTensorUpdater is made from the graph as received "
                "(Inductor makes it at the start of post_grad_passes)"
            ],
        )
    return None


def _pattern_pass(rec: "PassRecord", gm: torch.fx.GraphModule, m: "re.Match[str] | None") -> PassFn:
    """A pattern-matcher pass: `pass_pattern_<i>` of the joint or post-grad subsystem (`m`), or one
    named by its module attribute or its module's pattern table."""
    name, sub = rec.name, rec.subsystem
    modname = _INDUCTOR_MODULES.get(sub or "")
    if modname is None:
        raise CannotReplay(
            f"#{rec.seq} {name}: a pattern-matcher pass of subsystem {sub!r}, which replay does not know"
        )
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
    return PassFn(
        obj.apply,
        "graph",
        f"{modname}:{name} (PatternMatcherPass.apply)",
        (name, sub),
        ["patterns registered by this process's Inductor config (the capture does not record the config)"],
    )


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


def resolve_pass(
    rec: "PassRecord",
    registry: str | None,
    gm: torch.fx.GraphModule | None,
    fn: Any = None,
    capture_dir: str | None = None,
) -> PassFn:
    """The pass to run: `fn` (the user's), else the one the capture names (`capture_dir`: the
    capture's folder, never searched for it)."""
    if fn is not None:
        return user_fn(fn, rec, capture_dir)
    if rec.source == "partitioner":
        raise CannotReplay(
            f"#{rec.seq} {rec.name} is the joint-graph partitioner: it takes the joint inputs and the number "
            "of forward outputs, which the capture does not record; replay its fw/bw outputs' passes instead"
        )
    if rec.source == "inductor":
        if gm is None:
            raise ReplayError("internal: Inductor passes are resolved against the loaded graph")
        return inductor_pass(rec, gm, capture_dir)
    if rec.source == "torch":
        raise CannotReplay(
            f"{rec.name} is a stage synthesized from torch's own TORCH_TRACE logs: there is no pass to run"
        )
    return named_pass(rec, registry, capture_dir)
