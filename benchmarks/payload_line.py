"""Peak memory of `ls`, `check` and `diff` on a capture whose log holds one enormous payload line.

A small real-format 2-rank capture (tests/tui_support.small_capture) gets one tab-led line of
SIZE MB (`x` bytes; payload lines start with a tab, so the scan takes it for part of the record
before it): at the end of rank 0's log, and in its middle (before its middle record). The reader
skips a payload line over logformat.PAYLOAD_LINE_LIMIT as a reading problem; the target is a peak
under 300 MB with a 500 MB line. Each command (and the TUI, headless through Textual's
run_test, until its first views loaded and the code view shown) runs in its own process; its peak RSS (ru_maxrss:
anonymous and file-backed pages, which counts mapped log pages too) is printed beside the same
commands on the capture without the line. The captures are built in a temporary directory
(about 2 x SIZE MB) and removed after.

    .venv/bin/python -m benchmarks.payload_line [--mb 500] [--keep DIR]
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks.overlong_line import print_commands, print_row

ROOT = Path(__file__).resolve().parents[1]


_TUI = """
import asyncio, json, resource, sys, time
from tests.tui_support import opened

async def main():
    t = time.perf_counter()
    async with opened(sys.argv[1], size=(160, 40)) as (app, pilot):
        await pilot.press("2")  # the code view of the first pass: a payload read
        await pilot.pause()
    print(json.dumps({"rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                      "s": round(time.perf_counter() - t, 2), "rc": 0, "err": []}))

asyncio.run(main())
"""


def tui_measured(d: Path) -> dict:
    """The TUI, headless (Textual's run_test), opened on `d` until its views loaded: its own peak RSS."""
    import json
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _TUI, str(d)], capture_output=True, text=True, env=env, cwd=ROOT)
    if out.returncode != 0:
        return {"rss_mb": -1, "s": 0.0, "rc": out.returncode, "err": out.stderr.strip().splitlines()[-1:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _with_line(base: Path, d: Path, mb: int, where: str) -> None:
    from graphtrain_inspect.capture.shared import logformat

    shutil.copytree(base, d)
    log = d / logformat.log_file_name(0)
    data = log.read_bytes()
    starts = [m.end() for m in re.finditer(rb"\n(?=[^\t])", data)]  # record lines (not payload lines)
    at = len(data) if where == "end" else starts[len(starts) // 2]  # before the middle record
    with open(log, "wb") as f:
        f.write(data[:at])
        f.write(b"\t")
        chunk = b"x" * (1 << 20)
        for _ in range(mb):
            f.write(chunk)
        f.write(b"\n")
        f.write(data[at:])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--keep", metavar="DIR", help="build the captures here and keep them")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.tui_support import small_capture

    work = Path(a.keep or tempfile.mkdtemp(prefix="gti-payload-line-"))
    base = work / "base"
    if not base.exists():
        small_capture(base)
    variants = {"base": base}
    for where in ("end", "middle"):
        d = work / where
        if not d.exists():
            _with_line(base, d, a.mb, where)
        variants[where] = d
    print(f"a {a.mb} MB tab-led payload line in rank 0's log; peak RSS (MB) and wall (s) per command")
    for name, d in variants.items():
        print_commands(name, d, width=7)
        print_row(name, "tui", tui_measured(d), width=7)
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
