"""How long `pytest --collect-only` takes, as in a fresh clone and again, and what it imports.

    python -m benchmarks.collect_time [--top 12]

"fresh": the repository's own bytecode caches removed first (a fresh clone: pytest rewrites and
compiles every test module); "warm": run again. Then the heaviest imports collection makes, from
`python -X importtime` (cumulative microseconds; pytest's output capture is off so that the
timings of the test modules' imports are seen). Target (issue 23): under 10 s.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLLECT = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]


def _drop_caches() -> None:
    for d in ROOT.rglob("__pycache__"):
        if ".venv" not in d.parts:
            shutil.rmtree(d, ignore_errors=True)


def _timed(cmd: list[str], **kw) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, **kw)
    return time.perf_counter() - t, r


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    _drop_caches()
    fresh, r = _timed(COLLECT)
    warm, r = _timed(COLLECT)
    tail = (r.stdout.strip().splitlines() or [""])[-1]
    print(f"pytest --collect-only: fresh clone {fresh:.1f} s, warm {warm:.1f} s ({tail})")
    _, r = _timed([sys.executable, "-X", "importtime", *COLLECT[1:], "-s"])
    rows = []
    for line in r.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| ( *)(\S+)", line)
        if m and len(m.group(2)) <= 2:  # imported by pytest or by a test module itself
            rows.append((int(m.group(1)), m.group(3)))
    print(f"heaviest imports during collection (cumulative, {os.cpu_count()} cores):")
    for us, name in sorted(rows, reverse=True)[: args.top]:
        print(f"  {us / 1e6:6.2f} s  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
