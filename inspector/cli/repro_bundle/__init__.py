"""`graphtrain-inspect repro`'s bundle: a folder that reproduces one finding with torch alone.

    write(cap, finding, out_dir, setup=[...])

It holds, for each rank involved, the graph the finding's pass received (its GraphPickler blob,
sha256-verified as replay verifies it) and its readable code, the pass's `module:qualname` with
its source copied under src/ when it is the user's (not torch's, not an installed library's: the
pass's module and the modules of its package it imports), repro.json (what to run, each rank's
environment, what the finding is) and repro.py (repro.py.in), which loads the graphs, runs the
pass in a fake one-process world of each rank and exits 1 while the finding is there.

Trust as for replay (inspector.replay.plan.check_origin): a blob is a pickle, so a bundle is
written only from a capture this user trusts, and its README says so.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import sysconfig
from importlib.resources import files
from pathlib import Path
from typing import Any

from graphtrain_inspect.inspector.errors import CommandError

KINDS = ("rank-divergent-graph", "rank-baked-constant", "device-baked", "stale-unbacked-symbol")


def involved_ranks(f: Any) -> list[int]:
    """The ranks whose graphs show the finding: two to compare, one for a per-rank fact."""
    ranks = sorted(f.ranks)
    if f.kind == "stale-unbacked-symbol":
        return ranks[:1]
    return ranks[:2] if len(ranks) > 1 else ranks


def pass_records(cap: Any, f: Any, ranks: list[int]) -> dict[int, Any]:
    """The finding's introducing pass application on each rank (the same stage as on the lowest)."""
    from graphtrain_inspect.inspector.read.stages import StageIndex

    index = StageIndex(cap)
    lowest = min(f.ranks)
    st = next((s for s in index.by_rank.get(lowest, []) if s.seq == f.introduced_seq), None)
    if st is None:
        raise CommandError(f"the finding's pass #{f.introduced_seq} is not among rank {lowest}'s passes")
    across = index.across(st.key)
    missing = [r for r in ranks if r not in across]
    if missing:
        raise CommandError(f"{st.key.label()} did not run on rank(s) {missing}: nothing to reproduce there")
    return {r: across[r].pass_rec for r in ranks}


def _library_dirs() -> list[str]:
    import importlib.util as iu

    dirs = {sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib")}
    torch_spec = iu.find_spec("torch")
    if torch_spec is not None and torch_spec.origin:
        dirs.add(os.path.dirname(os.path.dirname(torch_spec.origin)))
    return [os.path.realpath(d) for d in dirs]


def source_roots(cap: Any) -> list[str]:
    """Where the training found its own modules: its working directory (`python -m`, and the
    current directory a pass module beside the script is imported from) and the folder of each
    script it ran (`torchrun train.py` puts it first on sys.path), from the manifest and the ranks'
    argv. A pass module there is the user's own, not installed where `repro` runs."""
    from graphtrain_inspect.inspector.replay.plan import rank_argv

    manifest = cap.manifest if isinstance(getattr(cap, "manifest", None), dict) else {}
    cwd = manifest.get("cwd") if isinstance(manifest.get("cwd"), str) else None
    words: list[str] = [w for w in (manifest.get("command") or []) if isinstance(w, str)]
    for r in getattr(cap, "ranks", []):
        words.extend(rank_argv(cap, r) or [])
    roots = [cwd] if cwd else []
    for w in words:
        if w.endswith(".py"):
            script = w if os.path.isabs(w) or not cwd else os.path.join(cwd, w)
            roots.append(os.path.dirname(script))
    return [r for r in dict.fromkeys(os.path.realpath(r) for r in roots) if os.path.isdir(r)]


def _find_spec(name: str, roots: list[str]) -> Any:
    """The module's spec where the training found it (`roots`, each level looked up by path
    alone: no package's code runs), else as this process finds it (an installed module)."""
    from importlib.machinery import PathFinder

    search: list[str] = list(roots)
    spec = None
    for i, _ in enumerate(parts := name.split(".")):
        spec = PathFinder.find_spec(".".join(parts[: i + 1]), search) if search else None
        if spec is None:
            return importlib.util.find_spec(name)
        search = list(spec.submodule_search_locations or [])
    return spec


def copy_sources(module: str, out: Path, roots: list[str] | None = None) -> list[str]:
    """The pass's module and the modules of its top-level package it imports (transitively),
    under out/src/, with empty package __init__ files; [] when the module is a library's. The
    module is looked for where the training found it (`roots`, `source_roots`) before this
    process's sys.path."""
    top = module.split(".")[0]
    libs = _library_dirs()
    todo, done, copied = [module], set(), []
    while todo:
        name = todo.pop()
        if name in done:
            continue
        done.add(name)
        try:
            spec = _find_spec(name, roots or [])
        except (ImportError, ValueError):
            continue
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        origin = os.path.realpath(spec.origin)
        if any(origin.startswith(d + os.sep) for d in libs):
            continue  # torch's or an installed library's: the user has it
        is_pkg = spec.submodule_search_locations is not None
        rel = Path(*name.split(".")) / "__init__.py" if is_pkg else Path(*name.split(".")).with_suffix(".py")
        dest = out / "src" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        text = Path(origin).read_text(encoding="utf-8")
        dest.write_text("" if is_pkg and name != module else text, encoding="utf-8")
        copied.append(str(rel))
        for parent in rel.parents[1:-1] if is_pkg else rel.parents[:-1]:
            init = out / "src" / parent / "__init__.py"
            if not init.exists():
                init.write_text("", encoding="utf-8")
        pkg = name if is_pkg else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                todo.extend(a.name for a in node.names if a.name.split(".")[0] == top)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = pkg.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
                if base.split(".")[0] == top:
                    todo.append(base)
                    todo.extend(f"{base}.{a.name}" for a in node.names)
    return copied


def importable(module: str) -> str:
    """The module's name here: a capture made before our packages moved under graphtrain_inspect.*
    (the bundled ones) names the sample's passes samples.passes.X (as replay, inspector.replay.load);
    our package's module of that name is the one, even where a folder `samples` is importable too."""
    from graphtrain_inspect.inspector.replay.load import FLAT_PACKAGES

    if module.split(".")[0] in FLAT_PACKAGES:
        try:
            if importlib.util.find_spec(f"graphtrain_inspect.{module}") is not None:
                return f"graphtrain_inspect.{module}"
        except (ImportError, ValueError):
            pass
    return module


def write(cap: Any, f: Any, out: Path, *, setup: list[str], trust: bool, number: int) -> dict[str, Any]:
    from graphtrain_inspect.inspector.read.bundled import sample_of
    from graphtrain_inspect.inspector.read.source_lines import source_text
    from graphtrain_inspect.inspector.replay.plan import (
        capture_dir,
        check_origin,
        distributed_initialized,
        is_file_spec,
        rank_argv,
        rank_environment,
        read_blob,
    )

    if f.kind not in KINDS or f.layer != "graph":
        raise CommandError(f"finding {number} is {f.kind} ({f.layer}): repro reproduces {', '.join(KINDS)} in graphs")
    if f.introduced_by in (None, "trace") or f.introduced_seq is None:
        where = source_text(f.source) or "the model code"
        raise CommandError(
            f"finding {number} is already in the traced graph: no pass made it, so there is no pass to reproduce "
            f"(it comes from {where})"
        )
    ranks = involved_ranks(f)
    why_trusted = check_origin(cap, ranks, trust=trust)  # Refused: its one line, nothing written
    recs = pass_records(cap, f, ranks)
    first = recs[ranks[0]]
    if not first.qualname:
        raise CommandError(f"#{first.seq} {first.name} has no recorded module:qualname: nothing to import")
    if is_file_spec(first.qualname):
        raise CommandError(
            f"#{first.seq} {first.name}: the capture names the pass by a file path ({first.qualname}); a bundle "
            "names a pass only as a module"
        )
    # as replay reads them: listed in the signature, one link, on the capture's filesystem (unless
    # --trust); all of them before anything is written
    blobs = {r: read_blob(cap, rec, rec.before, trust=trust) for r, rec in recs.items()}
    out.mkdir(parents=True, exist_ok=True)
    per_rank: dict[str, Any] = {}
    for r, rec in recs.items():
        (out / f"rank{r}.gpkl").write_bytes(blobs[r].data)
        for suffix, gid in (("before", rec.before), ("after_captured", rec.after.get("out"))):
            code = cap.graph_code(r, gid) if gid else None
            if code is not None:
                (out / f"rank{r}_{suffix}.py").write_text(code, encoding="utf-8")
        h = cap.header(r) or {}
        per_rank[str(r)] = {
            "env": rank_environment(cap, r),
            "argv": rank_argv(cap, r),
            "distributed": distributed_initialized(cap, r),
            "world_size": h["world_size"] if isinstance(h.get("world_size"), int) else cap.world_size,
            "own_device": cap.own_device(r, rec.before),
        }
    module, _, qual = first.qualname.rpartition(":")
    module = importable(module)
    roots = source_roots(cap)
    copied = copy_sources(module, out, roots)
    for spec in setup:
        copy_sources(spec.rpartition(":")[0], out, roots)
    ev = f.evidence or {}
    cfg = {
        "kind": f.kind,
        "message": f.message,
        "node": f.node,
        "nodes": {str(k): v for k, v in (ev.get("nodes") or {}).items()} if isinstance(ev.get("nodes"), dict) else {},
        "subgraph": (f.subgraph or "").replace(":", "."),
        "target": ev.get("target") if isinstance(ev.get("target"), str) else None,
        "literal": ev.get("value") if isinstance(ev.get("value"), (int, float, str)) else None,
        "symbol": ev.get("symbol"),
        "pass": f"{module}:{qual}",
        "pass_name": first.name,
        "setup": list(setup),
        "ranks": per_rank,
        "capture": capture_dir(cap),
        "sample": sample_of(capture_dir(cap)),  # a bundled capture: named as --sample NAME
        "finding": f.to_json(),
    }
    (out / "repro.json").write_text(json.dumps(cfg, indent=2, default=str) + "\n", encoding="utf-8")
    (out / "repro.py").write_text(files(__name__).joinpath("repro.py.in").read_text(encoding="utf-8"), encoding="utf-8")
    (out / "README.md").write_text(_readme(cfg, copied, why_trusted), encoding="utf-8")
    return cfg


def _readme(cfg: dict[str, Any], copied: list[str], why_trusted: str) -> str:
    ranks = ", ".join(cfg["ranks"])
    src = "\n".join(f"- src/{c}" for c in copied) or "- none: the pass is a library's (install it)"
    capture = f"`--sample {cfg['sample']}` (bundled with graphtrain-inspect)" if cfg.get("sample") else cfg["capture"]
    return f"""# Reproduce: {cfg["kind"]} at {cfg["node"]}

{cfg["message"]}

The pass `{cfg["pass"]}` run on the graph it received on rank(s) {ranks} of the capture
{capture}. With torch installed (the capture's version or one that loads its graphs):

    python repro.py        # exit 1 while the finding is there, 0 once it is gone

- `rank<R>.gpkl`: the pass's input graph on rank R (torch.fx GraphPickler); `rank<R>_before.py`
  its code, `rank<R>_after_captured.py` what the pass produced in training.
- `repro.json`: the pass, each rank's environment (RANK, WORLD_SIZE ..., its command line), the
  finding; `setup` lists functions run first (process state the training set: flags, configs).
- the pass's source, copied because it is not torch's or an installed library's:
{src}

**Trust.** The `.gpkl` files are pickles: loading one can run any code its author put there. This
bundle was written from a capture its writer trusted ({why_trusted}). Run it only if you trust
whoever sent it, as you would run their code.
"""
