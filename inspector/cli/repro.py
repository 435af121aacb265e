"""`graphtrain-inspect repro DIR --finding N -o OUT [--setup MODULE:FUNC] [--trust]`

Writes OUT, a folder that reproduces finding N (as `check --json --severity info` numbers them,
from 1) with torch alone: the graph its pass received on each rank involved, the pass's source
when it is the user's, and repro.py, which runs the pass and exits 1 while the finding is there
(inspector.cli.repro_bundle). Trust as for `replay`: graphs are pickles, so the bundle is written
only from a capture signed with your key, or with `--trust`.

Exit status: 0 written; 2 when DIR cannot be read, N names no finding or one repro cannot
reproduce (already in the traced graph, generated code, a compile event), or the capture is not
trusted.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from graphtrain_inspect.inspector.cli.common import CommandError, add_capture_argument


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_capture_argument(p)
    p.add_argument(
        "--finding",
        type=int,
        required=True,
        metavar="N",
        help="the finding, numbered from 1 as check --json lists them",
    )
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="the folder to write")
    p.add_argument("--shared-graph", action="store_true", help="number the findings as check --shared-graph does")
    p.add_argument(
        "--setup",
        action="append",
        default=[],
        metavar="MODULE:FUNC",
        help="a function repro.py calls first in each rank's environment (as replay --setup), its source copied "
        "too (the sample training's own by default)",
    )
    p.add_argument(
        "--trust", action="store_true", help="write from a capture not signed with your key (pickle can run code)"
    )


def run(args: argparse.Namespace) -> int:
    from graphtrain_inspect.inspector.checks import check_report
    from graphtrain_inspect.inspector.cli.repro_bundle import write
    from graphtrain_inspect.inspector.replay.plan import open_verified

    # blobs exist only in our captures; each file read once, the bytes checked are the bytes verified
    cap = open_verified(args.dir)
    with cap:
        findings = check_report(cap, shared_graph=args.shared_graph).findings
        if not 1 <= args.finding <= len(findings):
            raise CommandError(
                f"no finding {args.finding}: {args.dir} has {len(findings)} (check --json --severity info lists them)"
            )
        f = findings[args.finding - 1]
        out = Path(args.output)
        from graphtrain_inspect.inspector.read.bundled import setup_of

        # the sample training's bug switches, set from the captured argv (unless --setup says another)
        setup = args.setup or setup_of(args.dir, cap.manifest)
        cfg = write(cap, f, out, setup=setup, trust=args.trust, number=args.finding)
    print(
        f"wrote {out}: {f.kind} at {f.node}, pass {cfg['pass']} on rank(s) {', '.join(cfg['ranks'])}; "
        f"run: python {out / 'repro.py'}"
    )
    return 0
