"""cProfile of one `graphtrain-inspect` command, run in this process: where its time goes.

    python -m benchmarks.profile_command [--top 40] -- diff DIR --pass NAME --ranks 0,1 --nodes

Prints the command's wall time unprofiled first (a fresh process), then the profile sorted by
cumulative and by own time. Profiled times run longer than wall time (cProfile's overhead is per
call, so it inflates Python loops most); read them as shares. Used for the 100k-node profiles in
BENCHMARKS.md (issue 16).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import subprocess
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cli = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cli:
        ap.error("give the command's arguments after --")
    from benchmarks.scale_bench import ROOT, compiled

    compiled(ROOT)  # the bytecode a user's install has (see scale_bench.compiled)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "graphtrain_inspect.inspector.cli", *cli], stdout=subprocess.DEVNULL, check=False
    )
    print(f"wall {time.perf_counter() - t0:.2f} s (fresh process, unprofiled)")

    from graphtrain_inspect.inspector.cli.main import main as cli_main

    prof = cProfile.Profile()
    with contextlib.redirect_stdout(io.StringIO()):
        prof.enable()
        try:
            cli_main(cli)
        finally:
            prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("cumulative").print_stats(args.top)
    stats.sort_stats("tottime").print_stats(args.top // 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
