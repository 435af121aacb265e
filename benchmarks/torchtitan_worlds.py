"""torchtitan's graph_trainer in simulated worlds: wall time and peak memory of the capture
(`python -m graphtrain_inspect.samples.torchtitan --model M --world N`: default rank choice,
--stop-after-passes) and of `check` on it, for each model and world. One line each; the figures in
BENCHMARKS.md come from here. Needs the torchtitan extra.

    python benchmarks/torchtitan_worlds.py                          # llama3 and moe, 8 and 64 ranks
    python benchmarks/torchtitan_worlds.py --models llama3 --worlds 8 --keep /tmp/tt-bench
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from simulated_worlds import check_peak, du, timed  # the same measurements as the 3-D sample's


def one(model: str, world: int, base: str, assets: str) -> None:
    out = os.path.join(base, f"{model}-w{world}")
    cmd = [
        sys.executable,
        "-m",
        "graphtrain_inspect.samples.torchtitan",
        "--model",
        model,
        "--world",
        str(world),
        "--out",
        out,
        "--assets",
        assets,
    ]
    code, wall, _rss, _ = timed(cmd)
    try:
        with open(os.path.join(out, "manifest.json")) as f:
            sim = json.load(f)["simulated"]
    except (OSError, KeyError, ValueError) as e:
        print(f"{model:6s} world {world:3d}  capture failed (exit {code}): {e}", flush=True)
        return
    per = list(sim["per_rank"].values())
    size = du(out)
    c_wall, c_rss, summary = check_peak(out)
    n = len(sim["ranks"])
    print(
        f"{model:6s} world {world:3d}  exit {code}  ranks run {n} ({sim['ranks']})  capture {wall:6.1f} s "
        f"({sim['at_once']} at once; per rank "
        f"{min(p['wall_s'] for p in per):.0f}-{max(p['wall_s'] for p in per):.0f} s, "
        f"peak {max(p['max_rss_mb'] for p in per):.0f} MB)  bytes {size / 1e6:6.1f} MB  "
        f"check {c_wall:5.1f} s, peak {c_rss} MB: {summary.get('error')} errors, {summary.get('warning')} warnings",
        flush=True,
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="llama3,moe")
    ap.add_argument("--worlds", default="8,64")
    ap.add_argument("--keep", metavar="DIR", help="keep the captures here")
    args = ap.parse_args()
    base = args.keep or tempfile.mkdtemp(prefix="gti-ttworlds-")
    os.makedirs(base, exist_ok=True)
    assets = os.path.join(base, "assets")
    print(
        f"# {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} at the start; torchtitan graph_trainer, "
        f"simulated, default rank choice, --stop-after-passes",
        flush=True,
    )
    try:
        for model in args.models.split(","):
            for world in (int(x) for x in args.worlds.split(",")):
                one(model, world, base, assets)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        print(f"# load {os.getloadavg()[0]:.2f} at the end", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
