"""Simulated worlds of the 3-D mesh sample: capture time, bytes, `check` time and memory against
the number of ranks run (`capture --simulate-world N`, default rank choice, and every rank where
asked). Prints one line per world; the figures in BENCHMARKS.md come from here.

    python benchmarks/simulated_worlds.py                       # 8, 64, 512 default; 8 and 64 all ranks
    python benchmarks/simulated_worlds.py --worlds 8,64 --all 8
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

PASSES = "graphtrain_inspect.samples.mesh3d_passes:PIPELINE"


def gti() -> list[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "graphtrain-inspect")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "graphtrain_inspect.inspector.cli.main"]


def timed(cmd: list[str]) -> tuple[int, float, int, str]:
    """exit code, wall seconds, peak RSS of the child (MB), stdout."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate()
    wall = time.perf_counter() - t0
    rss = 0
    try:  # the child's own peak (RUSAGE_CHILDREN is a running maximum over all children)
        import resource

        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    except Exception:  # noqa: BLE001
        pass
    if p.returncode not in (0, 1):
        sys.stderr.write(err.decode(errors="replace")[-3000:])
    return p.returncode, wall, rss, out.decode(errors="replace")


def du(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def check_peak(out: str) -> tuple[float, int, dict]:
    """check's wall time and peak memory, measured in a fresh process of its own."""
    code = (
        "import resource, subprocess, sys, time, json; t0 = time.perf_counter(); "
        f"r = subprocess.run({gti()!r} + ['check', {out!r}, '--json'], capture_output=True); "
        "w = time.perf_counter() - t0; "
        "print(json.dumps({'wall': w, 'rss_mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, "
        "'summary': json.loads(r.stdout).get('summary', {})}))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    doc = json.loads(r.stdout)
    return doc["wall"], doc["rss_mb"], doc["summary"]


def one(world: int, all_ranks: bool, base: str, bug: list[str]) -> None:
    out = os.path.join(base, f"w{world}{'-all' if all_ranks else ''}")
    cmd = [
        *gti(),
        "capture",
        "--out",
        out,
        "--pass",
        PASSES,
        "--simulate-world",
        str(world),
        "--stop-after-passes",
        *(["--simulate-ranks", f"0-{world - 1}"] if all_ranks else []),
        "--",
        sys.executable,
        "-m",
        "graphtrain_inspect.samples.mesh3d",
        *(a for b in bug for a in ("--bug", b)),
    ]
    code, wall, _rss, _ = timed(cmd)
    with open(os.path.join(out, "manifest.json")) as f:
        sim = json.load(f)["simulated"]
    per = sim["per_rank"].values()
    size = du(out)
    c_wall, c_rss, summary = check_peak(out)
    n = len(sim["ranks"])
    print(
        f"world {world:5d}  ranks run {n:4d} ({'all' if all_ranks else 'default'}: "
        f"{sim['ranks'] if n <= 8 else str(n)})  "
        f"capture {wall:7.1f} s ({wall / n:5.2f} s/rank, {sim['at_once']} at once, rank peak "
        f"{max(p['max_rss_mb'] for p in per):.0f} MB)  "
        f"bytes {size / 1e6:7.2f} MB ({size / n / 1e3:6.1f} KB/rank)  "
        f"check {c_wall:6.2f} s, peak {c_rss} MB, findings {summary.get('error')} errors",
        flush=True,
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worlds", default="8,64,512")
    ap.add_argument("--all", default="8,64", help="worlds to run with every rank as well")
    ap.add_argument("--bug", action="append", default=["tp-coordinate"])
    ap.add_argument("--keep", metavar="DIR")
    args = ap.parse_args()
    base = args.keep or tempfile.mkdtemp(prefix="gti-simworlds-")
    os.makedirs(base, exist_ok=True)
    print(
        f"# {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; mesh3d --bug {' --bug '.join(args.bug)}; "
        "capture --stop-after-passes",
        flush=True,
    )
    try:
        alls = {int(x) for x in args.all.split(",") if x}
        for w in (int(x) for x in args.worlds.split(",")):
            one(w, False, base, args.bug)
            if w in alls:
                one(w, True, base, args.bug)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
