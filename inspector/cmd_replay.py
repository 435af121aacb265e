"""`graphtrain-inspect replay DIR --pass NAME [--rank R] [--occurrence K] [--fn MODULE:FUNC] [--batch] [--trust]`

Take the exact graph a pass received on rank R, run the pass again (or `--fn`, an edited copy or a
candidate fix) as it ran in training, and say whether the result matches what the capture
recorded, node by node; then run the checks with the replayed result in place and print the
findings that are new or gone.

* Loading a capture unpickles its graphs (pickle can run code): only captures made by this user
  on this host (per the manifest) are loaded, or ones vouched for with `--trust`; the blob's
  sha256 from the log is always verified first. A refused capture runs nothing.
* The pass runs in the captured rank's world: RANK, LOCAL_RANK, WORLD_SIZE ... and sys.argv as on
  that rank, a fake-backend torch.distributed world of the captured rank and world size with the
  captured process groups, and a tracing context holding the graph's fake mode. Process state the
  training set otherwise (flags parsed from its command line, config objects) is not recorded:
  `--setup MODULE:FUNC` runs a function first (sys.argv is the captured argv then).
* For the checks the pass is replayed on every rank (`--peers none`: only rank R), so checks that
  compare ranks compare replayed graphs.
* Without `--batch`, a Python REPL (IPython if installed) opens with `before`, `after`, `result`,
  `pass_fn`, `rerun(fn=None)`, `diff(a, b)`, `check(gm)`, `show(gm)`.

Exit status with `--batch`: 0 the result reproduces the captured after-graph, 1 it differs (or
the pass raised where training did not), 2 the graph or the pass cannot be loaded (one line says
why). torch is imported only once the capture is found loadable.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from inspector.render import Style, truncate, want_color

PROG = "graphtrain-inspect replay"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.usage = ("graphtrain-inspect replay DIR --pass NAME [--rank R] [--occurrence K] [--fn MODULE:FUNC] [--batch] [--trust] "
               "[--setup MODULE:FUNC]... [--import MODULE]...")
    p.add_argument("dir", metavar="DIR", help="capture directory (made with `graphtrain-inspect capture`, blobs on)")
    p.add_argument("--pass", dest="pass_name", required=True, metavar="NAME", help="pass name, module:qualname, or #SEQ (on the rank)")
    p.add_argument("--rank", type=int, help="replay the graph this rank's pass received (default: the lowest rank)")
    p.add_argument("--occurrence", type=int, metavar="K", help="the K-th application (0-based) of the pass on the rank (default 0)")
    p.add_argument("--fn", metavar="MODULE:FUNC", help="run this function instead of the captured pass (path/to/file.py:FUNC works too)")
    p.add_argument("--batch", action="store_true", help="no REPL: print the verdict; exit 0 reproduced, 1 differs, 2 cannot load")
    p.add_argument("--trust", action="store_true", help="load a capture made by another user or on another host (pickle can run code)")
    p.add_argument("--setup", action="append", default=[], metavar="MODULE:FUNC",
                   help="call FUNC() in the rank's environment before the pass (repeatable), e.g. to set flags the training parsed from argv")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE before loading (a library defining the graph's custom operators); repeatable")
    p.add_argument("--peers", choices=("all", "none"), default="all",
                   help="for the checks, also replay the pass on the other ranks (default all; none: only --rank)")
    p.add_argument("--no-check", action="store_true", help="do not run the checks on the result")
    p.add_argument("--limit", type=int, default=20, help="node changes to list (default 20)")
    p.add_argument("--json", action="store_true", help="with --batch: one JSON document instead of text")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colour output (default: when a terminal)")


def _fail(msg: str, code: int = 2) -> int:
    print(f"{PROG}: {msg}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    from inspector.capture_index import CaptureUnreadable, open_capture
    from inspector.replay_plan import NotFound, Refused, check_origin, peers, read_blob, select

    if args.json and not args.batch:
        return _fail("--json needs --batch")
    try:
        cap = open_capture(args.dir, source="capture")
    except CaptureUnreadable as e:
        return _fail(str(e))
    if cap.kind != "capture":
        return _fail(f"{args.dir} holds torch's own TORCH_TRACE logs, not a graphtrain-inspect capture: nothing to replay "
                     "(capture the training with `graphtrain-inspect capture`)")
    with cap:
        try:
            target = select(cap, args.pass_name, args.rank, args.occurrence)
        except NotFound as e:
            return _fail(str(e))
        rec = target.rec
        peer_recs = peers(cap, target) if (args.peers == "all" and not args.no_check) else {}
        try:
            origin = check_origin(cap, [target.rank, *peer_recs], trust=args.trust)
            # Verified before torch is even imported: a refused capture runs nothing.
            read_blob(cap, rec, rec.before, trust=args.trust, what="before")
        except Refused as e:
            return _fail(f"refused: {e}")
        if args.fn:
            problem = fn_problem(args.fn)
            if problem:
                return _fail(problem)
        if rec.source == "partitioner":
            return _fail(f"#{rec.seq} {rec.name} is the joint-graph partitioner: it takes the joint inputs and the number of "
                         "forward outputs, which the capture does not record; it cannot be replayed (its fw/bw outputs' passes can)")
        return _replay(cap, target, peer_recs, origin, args)


def _replay(cap: Any, target: Any, peer_recs: dict, origin: str, args: argparse.Namespace) -> int:
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)  # torch's own deprecations while unpickling
    import torch  # noqa: F401 - first use of torch in this command

    from inspector.replay import Replayer, ReplayError, check_delta
    from inspector.replay_plan import Refused

    st = Style(want_color(args.color) and not args.json)
    say = (lambda s="": None) if args.json else print
    rec = target.rec
    r = Replayer(cap, target, trust=args.trust, fn=args.fn, setup=args.setup, imports=args.imports)
    say(header_line(cap, target, st))
    try:
        out = r.run()
    except (ReplayError, Refused) as e:
        if args.json:
            _print_json({"verdict": "cannot-load", "reason": str(e), **_ids(target)})
        return _fail(str(e))
    except Exception as e:  # noqa: BLE001 - never a traceback: say what failed in one line
        msg = f"replay failed outside the pass: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        if args.json:
            _print_json({"verdict": "cannot-load", "reason": msg, **_ids(target)})
        return _fail(msg)
    for line in outcome_lines(r, out, origin, st, args.limit, with_fn=args.fn is not None):
        say(line)
    peer_outs: dict[int, Any] = {}
    delta = None
    if not args.no_check:
        for pr, prec in sorted(peer_recs.items()):
            try:
                peer_outs[pr] = r.run(None, prec)
            except Exception as e:  # noqa: BLE001 - ReplayError, Refused, or anything else: one line
                say(st(f"checks: rank {pr} not replayed ({type(e).__name__}: {e}); its captured output is used", "yellow"))
        try:
            delta = check_delta(cap, target, {target.rank: out, **peer_outs}, {k: v for k, v in peer_recs.items() if k in peer_outs})
        except Exception as e:  # noqa: BLE001 - the verdict stands without the checks
            say(st(f"checks could not run: {type(e).__name__}: {e}", "yellow"))
        else:
            for line in check_lines(delta, rec, st, peer_outs):
                say(line)
    if args.batch:
        if args.json:
            _print_json(outcome_json(target, out, delta, peer_outs))
        return 0 if out.reproduced else 1
    from inspector.replay_repl import start_repl

    return start_repl(r, out, peer_outs, delta, args)


def fn_problem(spec: str) -> str | None:
    """Why --fn cannot name a function, found without running anything (None if it may)."""
    import importlib.util
    import os

    mod, sep, qual = spec.rpartition(":")
    if not sep or not mod or not qual:
        return f"--fn {spec!r}: expected MODULE:FUNCTION (or path/to/file.py:FUNCTION)"
    if mod.endswith(".py") or os.sep in mod:
        return None if os.path.isfile(mod) else f"--fn {spec!r}: no such file {mod}"
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found = importlib.util.find_spec(mod)
    except (ImportError, ValueError) as e:
        found, err = None, str(e)
    else:
        err = f"no module named {mod!r}"
    return None if found is not None else f"--fn {spec!r}: cannot import {mod}: {err}"


# ---------------------------------------------------------------------------------------------
# Text


def header_line(cap: Any, target: Any, st: Style) -> str:
    rec = target.rec
    where = f"pipeline {rec.pipeline}" + (f", compile {rec.compile_id}" if rec.compile_id else "")
    occ = f", occurrence {target.occurrence} of {target.matches}" if target.matches > 1 else ""
    src = rec.source + (f"/{rec.subsystem}" if rec.subsystem else "")
    return st(f"replay #{rec.seq} {rec.name} on rank {target.rank} of {cap.world_size}  ({where}{occ}; {src})", "bold", "magenta")


def outcome_lines(r: Any, out: Any, origin: str, st: Style, limit: int, *, with_fn: bool) -> list[str]:
    import torch

    lines = []
    rec = out.rec
    ld = out.before
    if ld is not None:
        n = rec.nodes.get("before") if isinstance(rec.nodes, dict) else None
        lines.append(f"  graph   {rec.before} ({n if n is not None else '?'} nodes) from {ld.blob.path[:22]}...gpkl: "
                     f"sha256 verified, {origin}; loaded in {ld.seconds:.2f}s with torch {torch.__version__}"
                     + (f" (captured with {r.captured_torch})" if r.captured_torch and r.captured_torch != torch.__version__ else ""))
        if ld.standins:
            lines.append(st(f"          stand-ins for the training's __main__ classes in node metadata: {', '.join(ld.standins[:4])}", "dim"))
    w = out.world
    if w is not None:
        from inspector.replay_plan import describe_env

        env = describe_env(w.env) or "no torchrun variables (a single-process run)"
        pg = w.process_group or "not initialized (as in training)"
        argv = (" ".join(w.argv[:8]) + (" ..." if len(w.argv) > 8 else "")) if w.argv else "(not recorded)"
        lines.append(f"  world   {env}; torch.distributed: {pg}; argv: {truncate(argv, 100)}")
        for note in w.notes:
            lines.append(st(f"          {note}", "dim"))
    for note in r.notes:
        lines.append(st(f"  note    {note}", "yellow"))
    if r.setup:
        lines.append(f"  setup   {', '.join(r.setup)}")
    pf = out.pass_fn
    if pf is not None:
        res = f"{out.view.tables.node_count} nodes" if out.view is not None else "raised"
        lines.append(f"  ran     {pf.description} in {out.run_s:.2f}s -> {res}")
        for note in pf.notes:
            lines.append(st(f"          {note}", "dim"))
    if out.reproduced:
        lines.append(st("REPRODUCED", "bold", "green") + f"  {out.reason}")
    else:
        lines.append(st("DIFFERS", "bold", "red") + f"  {out.reason}")
        if out.exc_text and out.exception is not None:
            for l in out.exc_text.rstrip().splitlines()[-8:]:
                lines.append(st(f"  | {l}", "red"))
        lines.extend(diff_lines(out.diff, st, limit))
        if not with_fn and out.exception is None:
            lines.append(st("  hint: a pass that reads process state the training set outside its environment (flags parsed from "
                            "its command line, config objects) sees defaults here: set it with --setup MODULE:FUNC "
                            "(sys.argv is the captured argv)", "dim"))
    return lines


def diff_lines(d: Any, st: Style, limit: int) -> list[str]:
    if d is None or d.empty:
        return []
    out = []
    changes = list(d.changes())
    for ch in changes[:limit]:
        colour = {"added": "green", "removed": "red", "changed": "yellow"}.get(ch.status, "")
        prefix = f"[{ch.subgraph}] " if ch.subgraph else ""
        out.append("  " + st(truncate(prefix + ch.summary(), 220), colour))
    if len(changes) > limit:
        out.append(st(f"  ... {len(changes) - limit} more node changes (--limit N, or diff(after, result) in the REPL)", "dim"))
    return out


def _finding_line(tag: str, f: Any, st: Style, colour: str) -> str:
    node = (f"{f.subgraph}:" if f.subgraph else "") + (f.node or "-")
    ranks = ",".join(str(x) for x in f.ranks) if f.ranks else "-"
    return "  " + st(f"{tag:<5}", colour) + f" {f.severity.upper():<7} {f.kind:<22} {truncate(node, 28):<28} ranks {ranks:<6} " + truncate(f.message, 140)


def check_lines(delta: Any, rec: Any, st: Style, peer_outs: dict) -> list[str]:
    ranks = ", ".join(str(r) for r in delta.replaced) or "none"
    ranks = ("ranks " if len(delta.replaced) > 1 else "rank ") + ranks
    here = [f for f in delta.kept if f.introduced_by == rec.name]
    head = (f"checks  (replayed result of {ranks} in place; findings present in the pass's output): "
            f"{len(delta.new)} new, {len(delta.gone)} gone, {len(delta.kept)} still there")
    if here:
        head += f" ({len(here)} of them introduced by {rec.name})"
    lines = [st(head, "bold")]
    for f in delta.gone:
        lines.append(_finding_line("gone", f, st, "green"))
    for f in delta.new:
        lines.append(_finding_line("new", f, st, "red"))
    for f in here[:10]:
        lines.append(_finding_line("still", f, st, "yellow"))
    if len(here) > 10:
        lines.append(st(f"  ... {len(here) - 10} more still introduced by {rec.name}", "dim"))
    for n in delta.notes:
        lines.append(st(f"  note: {n}", "dim"))
    return lines


# ---------------------------------------------------------------------------------------------
# JSON


def _ids(target: Any) -> dict[str, Any]:
    rec = target.rec
    return {"pass": rec.name, "seq": rec.seq, "rank": target.rank, "occurrence": target.occurrence, "before": rec.before, "after": rec.after}


def outcome_json(target: Any, out: Any, delta: Any, peer_outs: dict) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "verdict": out.verdict,
        "reason": out.reason,
        **_ids(target),
        "result": out.view.gid if out.view is not None else None,
        "nodes": out.view.tables.node_count if out.view is not None else None,
        "exception": {"type": type(out.exception).__name__, "message": str(out.exception)[:2000]} if out.exception is not None else None,
        "diff": out.diff.to_json() if out.diff is not None else None,
        "peers": {str(r): o.verdict for r, o in peer_outs.items()},
        "environment": out.world.env if out.world is not None else None,
    }
    if delta is not None:
        doc["checks"] = {
            "replaced_ranks": delta.replaced,
            "new": [f.to_json() for f in delta.new],
            "gone": [f.to_json() for f in delta.gone],
            "kept": [f.to_json() for f in delta.kept],
        }
    return doc


def _print_json(doc: dict) -> None:
    import orjson

    sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n")
