"""Peak memory of `ls`, `check`, `diff` and the TUI on a capture whose log holds one enormous line.

    python -m benchmarks long-lines [--mb 500] [--keep DIR]

A small real-format 2-rank capture (tests/tui_support.small_capture) gets, in copies of it, a line
of SIZE MB in rank 0's log:
- `garbage`: `x` bytes at the end, without a newline;
- `envelope`: a glog envelope prefix followed by JSON that never ends, at the end (what a writer
  killed mid-record, or someone hostile, leaves); the reader's limit on a record's first line is
  `ENVELOPE_LINE_LIMIT` (1 MB);
- `payload-end`, `payload-middle`: one tab-led line (payload lines start with a tab, so the scan
  takes it for part of the record before it) at the end, and before the middle record; the reader
  skips a payload line over `logformat.PAYLOAD_LINE_LIMIT` as a reading problem.
Each command runs in its own process (the TUI headless through Textual's run_test, until its first
views loaded and the code view shown); one row each: its peak RSS (ru_maxrss: anonymous and
file-backed pages, which counts mapped log pages too), wall, exit status and first error line,
beside the same commands on the capture without the line. The target: a peak under 300 MB with a
500 MB line. The captures (about 4 x SIZE MB) are built in a temporary directory and removed after.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks.timing import ROOT, cli, machine_line, timed

_TUI = """
import asyncio, json, resource, sys, time
from tests.tui_support import opened

async def main():
    async with opened(sys.argv[1], size=(160, 40)) as (app, pilot):
        await pilot.press("2")  # the code view of the first pass: a payload read
        await pilot.pause()

asyncio.run(main())
"""

GLOG_PREFIX = b'I1124 00:00:00.000000 1 x.py:1] {"gti_pass": {"name": "'


def measured(cmd: list[str]) -> dict:
    """`timed(cmd)` with the first line of its stderr (the one-line reading problem, if any)."""
    with tempfile.TemporaryFile() as err:
        r = timed(cmd, stderr=err)
        err.seek(0)
        r["err"] = err.read().decode(errors="replace").strip().splitlines()[:1]
    return r


def print_row(name: str, what: str, r: dict) -> None:
    err = (r["err"] or [""])[0][:110]
    print(f"{name:14} {what:6} rss {r['rss_mb']:6.0f} MB  {r['s']:6.2f} s  rc {r['rc']}  {err}", flush=True)


def _append_line(base: Path, d: Path, mb: int, head: bytes, where: str) -> None:
    """A copy of `base` whose rank 0 log holds `head` and `mb` MB of `x`: at its end without a
    newline, or (a payload line) as a tab-led line before its middle record or at its end."""
    from graphtrain_inspect.capture.shared import logformat

    shutil.copytree(base, d)
    log = d / logformat.log_file_name(0)
    data = log.read_bytes()
    starts = [m.end() for m in re.finditer(rb"\n(?=[^\t])", data)]  # record lines (not payload lines)
    at = starts[len(starts) // 2] if where == "middle" else len(data)
    chunk = b"x" * (1 << 20)
    with open(log, "wb") as f:
        f.write(data[:at])
        f.write(head)
        for _ in range(mb):
            f.write(chunk)
        if head == b"\t":
            f.write(b"\n")
        f.write(data[at:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--keep", metavar="DIR", help="build the captures here and keep them")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.tui_support import small_capture

    work = Path(a.keep or tempfile.mkdtemp(prefix="gti-long-lines-"))
    base = work / "base"
    if not base.exists():
        small_capture(base)
    variants = {"base": base}
    for name, head, where in (
        ("garbage", b"x", "end"),
        ("envelope", GLOG_PREFIX, "end"),
        ("payload-end", b"\t", "end"),
        ("payload-middle", b"\t", "middle"),
    ):
        d = work / name
        if not d.exists():
            _append_line(base, d, a.mb, head, where)
        variants[name] = d
    print(machine_line())
    print(f"a {a.mb} MB line in rank 0's log; peak RSS (MB), wall (s), exit status per command")
    try:
        for name, d in variants.items():
            for args in (["ls", str(d)], ["check", str(d)], ["diff", str(d), "--pass", "shard_rows", "--ranks", "0,1"]):
                print_row(name, args[0], measured(cli(*args)))
            print_row(name, "tui", measured([sys.executable, "-c", _TUI, str(d)]))
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
