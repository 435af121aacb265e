"""`graphtrain-inspect replay DIR --pass NAME [--rank R] [--occurrence K] [--fn MODULE:FUNC] [--batch] [--trust]`

Take the exact graph a pass received on rank R, run the pass again (or `--fn`, an edited copy or a
candidate fix) as it ran in training, and say whether the result matches what the capture
recorded, node by node; then run the checks with the replayed result in place and print the
findings that are new or gone.

* Loading a capture unpickles its graphs (pickle can run code): only captures signed with this
  user's key are loaded, or ones vouched for with `--trust`; each file is read once and the bytes
  parsed are the bytes verified, and the blob's sha256 from the log is always checked. A refused
  capture runs nothing. A pass the capture names is imported only as a module, never from a path
  it gives.
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

from graphtrain_inspect.capture.shared.terminal_text import Style, want_color
from graphtrain_inspect.inspector.cli.common import CommandError, add_capture_argument
from graphtrain_inspect.inspector.replay.report import (
    check_lines,
    header_line,
    outcome_ids,
    outcome_json,
    outcome_lines,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_capture_argument(p)
    p.add_argument(
        "--pass",
        dest="pass_name",
        required=True,
        metavar="NAME",
        help="pass name, module:qualname, or #SEQ (on the rank)",
    )
    p.add_argument("--rank", type=int, help="replay the graph this rank's pass received (default: the lowest rank)")
    p.add_argument(
        "--occurrence", type=int, metavar="K", help="the K-th application (0-based) of the pass on the rank (default 0)"
    )
    p.add_argument(
        "--fn",
        metavar="MODULE:FUNC",
        help="run this function instead of the captured pass (path/to/file.py:FUNC works too)",
    )
    p.add_argument(
        "--batch", action="store_true", help="no REPL: print the verdict; exit 0 reproduced, 1 differs, 2 cannot load"
    )
    p.add_argument(
        "--trust",
        action="store_true",
        help="load a capture made by another user or on another host (pickle can run code)",
    )
    p.add_argument(
        "--setup",
        action="append",
        default=[],
        metavar="MODULE:FUNC",
        help="call FUNC() in the rank's environment before the pass (repeatable), e.g. to set flags the training "
        "parsed from argv (a bundled sample's own set-up by default)",
    )
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE before loading (a library defining the graph's custom operators); repeatable",
    )
    p.add_argument(
        "--peers",
        choices=("all", "none"),
        default="all",
        help="for the checks, also replay the pass on the other ranks (default all; none: only --rank)",
    )
    p.add_argument("--no-check", action="store_true", help="do not run the checks on the result")
    p.add_argument("--limit", type=int, default=20, help="node changes to list (default 20)")
    p.add_argument("--json", action="store_true", help="with --batch: one JSON document instead of text")
    p.add_argument(
        "--color", choices=("auto", "always", "never"), default="auto", help="colour output (default: when a terminal)"
    )


def run(args: argparse.Namespace) -> int:
    from graphtrain_inspect.inspector.errors import Refused
    from graphtrain_inspect.inspector.replay.plan import check_origin, open_verified, peers, read_blob, select

    if args.json and not args.batch:
        raise CommandError("--json needs --batch")
    # each file read once: the bytes parsed here are the bytes check_origin verifies
    cap = open_verified(args.dir)
    if not args.setup:
        from graphtrain_inspect.inspector.read.bundled import setup_of

        # the sample training replays as it was trained: its bug switches set from the captured argv
        args.setup = setup_of(args.dir, cap.manifest)
    if cap.kind != "capture":
        raise CommandError(
            f"{args.dir} holds torch's own TORCH_TRACE logs, not a graphtrain-inspect capture: nothing to replay "
            "(capture the training with `graphtrain-inspect capture`)"
        )
    with cap:
        target = select(cap, args.pass_name, args.rank, args.occurrence)  # NotFound: `main` says why
        rec = target.rec
        peer_recs = peers(cap, target) if (args.peers == "all" and not args.no_check) else {}
        try:
            origin = check_origin(cap, [target.rank, *peer_recs], trust=args.trust)
            # Verified before torch is even imported: a refused capture runs nothing.
            read_blob(cap, rec, rec.before, trust=args.trust, what="before")
        except Refused as e:
            raise CommandError(f"refused: {e}") from e
        if args.fn:
            from graphtrain_inspect.inspector.replay.plan import capture_dir

            problem = fn_problem(args.fn, capture_dir(cap))
            if problem:
                raise CommandError(problem)
        if rec.source == "partitioner":
            raise CommandError(
                f"#{rec.seq} {rec.name} is the joint-graph partitioner: it takes the joint inputs and the number of "
                "forward outputs, which the capture does not record; it cannot be replayed (its fw/bw "
                "outputs' passes can)"
            )
        return _replay(cap, target, peer_recs, origin, args)


def _replay(cap: Any, target: Any, peer_recs: dict, origin: str, args: argparse.Namespace) -> int:
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)  # torch's own deprecations while unpickling
    import torch  # noqa: F401 - first use of torch in this command

    from graphtrain_inspect.inspector.errors import Refused, ReplayError
    from graphtrain_inspect.inspector.replay.replayer import Replayer, check_delta

    st = Style(want_color(args.color) and not args.json)
    say = (lambda s="": None) if args.json else print
    rec = target.rec
    r = Replayer(cap, target, trust=args.trust, fn=args.fn, setup=args.setup, imports=args.imports)
    say(header_line(cap, target, st))
    try:
        out = r.run()
    except (ReplayError, Refused) as e:
        if args.json:
            _print_json({"verdict": "cannot-load", "reason": str(e), **outcome_ids(target)})
        raise CommandError(str(e)) from e
    except Exception as e:
        msg = f"replay failed outside the pass: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        if args.json:
            _print_json({"verdict": "cannot-load", "reason": msg, **outcome_ids(target)})
        raise CommandError(msg) from e
    for line in outcome_lines(r, out, origin, st, args.limit, with_fn=args.fn is not None):
        say(line)
    peer_outs: dict[int, Any] = {}
    delta = None
    if not args.no_check:
        for pr, prec in sorted(peer_recs.items()):
            try:
                peer_outs[pr] = r.run(None, prec)
            except Exception as e:  # noqa: BLE001 - ReplayError, Refused, or anything else: one line
                say(
                    st(
                        f"checks: rank {pr} not replayed ({type(e).__name__}: {e}); its captured output is used",
                        "yellow",
                    )
                )
        try:
            delta = check_delta(
                cap, target, {target.rank: out, **peer_outs}, {k: v for k, v in peer_recs.items() if k in peer_outs}
            )
        except Exception as e:  # noqa: BLE001 - the verdict stands without the checks
            say(st(f"checks could not run: {type(e).__name__}: {e}", "yellow"))
        else:
            for line in check_lines(delta, rec, st, peer_outs):
                say(line)
    if args.batch:
        if args.json:
            _print_json(outcome_json(target, out, delta, peer_outs))
        return 0 if out.reproduced else 1
    from graphtrain_inspect.inspector.replay.repl import start_repl

    return start_repl(r, out, peer_outs, delta, args)


def fn_problem(spec: str, capture_dir: str | None = None) -> str | None:
    """Why --fn cannot name a function, found without running anything (None if it may). A
    module is looked up as replay imports it (inspector.replay.resolve.user_code_path), sys.path
    left as it was."""
    import importlib.util
    import os

    from graphtrain_inspect.inspector.replay.plan import is_file_spec
    from graphtrain_inspect.inspector.replay.resolve import cwd_in_capture, user_code_path

    mod, sep, qual = spec.rpartition(":")
    if not sep or not mod or not qual:
        return f"--fn {spec!r}: expected MODULE:FUNCTION (or path/to/file.py:FUNCTION)"
    if is_file_spec(spec):
        return None if os.path.isfile(mod) else f"--fn {spec!r}: no such file {mod}"
    with user_code_path(capture_dir):
        try:
            found = importlib.util.find_spec(mod.partition(".")[0])  # a parent package's code is not run
        except (ImportError, ValueError) as e:
            found, err = None, str(e)
        else:
            err = f"no module named {mod!r}"
    if found is None and cwd_in_capture(capture_dir):
        err += " (the current directory is the capture's, whose modules are not imported: give a file path)"
    return None if found is not None else f"--fn {spec!r}: cannot import {mod}: {err}"


# ---------------------------------------------------------------------------------------------
# Text


def _print_json(doc: dict) -> None:
    import orjson

    sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n")
