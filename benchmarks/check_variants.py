"""What the capture's `gti_symbol_rows` records and the collector being off buy `check`: the same
command timed as it runs, with the records ignored, and with Python's cyclic collector left on.

    python -m benchmarks.check_variants CAPTURE... [--repeat 3] [--core 0]

Each variant is `graphtrain-inspect check CAPTURE --json -j 1` in a fresh process (on one core
with `--core`, via taskset), the logs read once before (page cache):
- `as run`: the command as users run it;
- `records ignored`: the stale-symbol check selects its rows from whole node tables, as for a
  capture made before the records (`stale_unbacked_symbol._recorded_rows` answers None);
- `collector as before`: the collector on except where the core turned it off before session 10
  (inside a diff, the stale-symbol walk, `-j`'s workers): the command's and `check_report`'s
  turning it off are undone (inspector/read/collector.py).
The variants run in turns (a load that comes and goes slows each alike). Prints per capture the
1-minute load before its first run, per variant the best and median wall time of `--repeat` runs,
and whether every report of the capture was the same document (exit 1 if not: the findings must
not depend on either).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.scale_bench import logs_of, warm

_MAIN = "from graphtrain_inspect.inspector.cli.main import main\nsys.exit(main())\n"
VARIANTS = {
    "as run": "import sys\n" + _MAIN,
    "records ignored": (
        "import sys\nfrom graphtrain_inspect.inspector.checks import stale_unbacked_symbol as s\n"
        "s._recorded_rows = lambda ctx, rank, gid: None\n" + _MAIN
    ),
    "collector as before": (
        "import contextlib, sys, types\n"
        # the modules that turned it off before this change keep the real `no_gc` they bind
        "import graphtrain_inspect.inspector.diff.graph_diff, graphtrain_inspect.inspector.checks.parallel\n"
        "import graphtrain_inspect.inspector.checks.stale_unbacked_symbol\n"
        "from graphtrain_inspect.inspector.read import collector\n"
        "collector.no_gc = contextlib.nullcontext\n"
        "import graphtrain_inspect.inspector.cli.main\n"
        "m = sys.modules['graphtrain_inspect.inspector.cli.main']\n"
        "m.gc = types.SimpleNamespace(disable=lambda: None)\n"
        "sys.exit(m.main())\n"
    ),
}


def run(code: str, capture: str, core: int | None) -> tuple[float, bytes]:
    cmd = [sys.executable, "-c", code, "check", capture, "--json", "-j", "1"]
    if core is not None and shutil.which("taskset"):
        cmd = ["taskset", "-c", str(core), *cmd]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True)
    s = time.perf_counter() - t0
    if r.returncode not in (0, 1) or b"Traceback" in r.stderr:
        raise SystemExit(f"check failed on {capture}:\n{r.stderr.decode()[-2000:]}")
    return s, r.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captures", nargs="+")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--core", type=int, default=None, help="run every check on this core (taskset)")
    args = ap.parse_args()
    same_everywhere = True
    for capture in args.captures:
        warm(logs_of(Path(capture)))
        reports: set[bytes] = set()
        print(f"{capture}  (load {os.getloadavg()[0]:.2f})")
        times: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for _ in range(args.repeat):
            for name, code in VARIANTS.items():
                s, out = run(code, capture, args.core)
                times[name].append(s)
                reports.add(out)
        for name, ts in times.items():
            print(f"  {name:16s} best {min(ts):.3f} s  median {statistics.median(ts):.3f} s  ({len(ts)} runs)")
        same = len(reports) == 1
        same_everywhere &= same
        print(f"  reports: {'the same document' if same else 'DIFFERENT'}")
    return 0 if same_everywhere else 1


if __name__ == "__main__":
    sys.exit(main())
