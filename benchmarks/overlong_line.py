"""Peak memory of `ls`, `check` and `diff` on a capture whose log ends with one enormous line.

A small real-format 2-rank capture (tests/tui_support.small_capture) gets, at the end of rank 0's
log, a line of SIZE MB without a newline: garbage (`x`), or a glog envelope prefix followed by
JSON that never ends (what a writer killed mid-record, or someone hostile, leaves). Each command
runs in its own process; its peak RSS (ru_maxrss: anonymous and file-backed pages, which counts
mapped log pages too) is printed beside the same commands on the capture without the line.

    .venv/bin/python -m benchmarks.overlong_line [--mb 500] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measured(args: list[str]) -> dict:
    """Run the command as a child of a small Python that reports the child's peak RSS."""
    code = (
        "import resource, subprocess, sys, json, time; t = time.perf_counter(); "
        "p = subprocess.run(sys.argv[1:], capture_output=True); "
        "print(json.dumps({'rc': p.returncode, 's': round(time.perf_counter() - t, 2), "
        "'rss_mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, "
        "'err': p.stderr.decode(errors='replace').strip().splitlines()[:1]}))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code, sys.executable, "-m", "graphtrain_inspect.inspector.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    ).stdout
    return json.loads(out)


def print_row(name: str, what: str, r: dict, width: int) -> None:
    """One measured command as a row: variant, command, peak RSS, wall, exit code, first error line."""
    err = (r["err"] or [""])[0][:110]
    print(f"{name:{width}} {what:6} rss {r['rss_mb']:6d} MB  {r['s']:6.2f} s  rc {r['rc']}  {err}")


def print_commands(name: str, d: Path, width: int) -> None:
    """`ls`, `check` and a rank diff of the small capture's `shard_rows` on `d`, a row each."""
    for cmd in (["ls", str(d)], ["check", str(d)], ["diff", str(d), "--pass", "shard_rows", "--ranks", "0,1"]):
        print_row(name, cmd[0], measured(cmd), width)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--keep", metavar="DIR", help="build the captures here and keep them")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from graphtrain_inspect.capture.shared import logformat
    from tests.tui_support import small_capture

    work = Path(a.keep or tempfile.mkdtemp(prefix="gti-overlong-"))
    base = work / "base"
    if not base.exists():
        small_capture(base)
    variants = {"base": base}
    for name, head in (("garbage", b"x"), ("envelope", b'I1124 00:00:00.000000 1 x.py:1] {"gti_pass": {"name": "')):
        d = work / name
        if not d.exists():
            shutil.copytree(base, d)
            with open(d / logformat.log_file_name(0), "ab") as f:
                f.write(head)
                chunk = b"x" * (1 << 20)
                for _ in range(a.mb):
                    f.write(chunk)
        variants[name] = d
    print(f"a {a.mb} MB line without a newline at the end of rank 0's log; peak RSS (MB) and wall (s) per command")
    for name, d in variants.items():
        print_commands(name, d, width=9)
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
