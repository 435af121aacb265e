"""The capture's walks over a graph in the training process, timed on real graphs loaded from a
capture's blobs: the fingerprint (`TableCache.fingerprint_of`, twice per pass: what tells an
unchanged graph from a changed one) and the node table with every row cached (`node_tables` of a
graph it has seen).

    python -m benchmarks.fingerprint_cost CAPTURE [--repeat 30] [--base CHECKOUT]

CAPTURE: a capture with blobs (for graph_trainer's graphs: the `cap-blobs` folder that `python -m
benchmarks.torchtitan_capture_cost --modes blobs --work DIR` leaves in DIR; torchtitan's graph
passes are imported so its graphs load). Prints one line per blob: its nodes, the best of
`--repeat` walks and of `--repeat // 3` cached tables, in ms. With `--base`: the same again with
an earlier commit's capture code (a git worktree), in a fresh process.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from pathlib import Path


def _load(path: Path):
    from graphtrain_inspect.inspector.replay.load import load_blob
    from graphtrain_inspect.inspector.replay.plan import Blob

    return load_blob(Blob("bench", "bench", str(path), path.read_bytes())).gm


def measure(capture: Path, repeat: int) -> None:
    from graphtrain_inspect.capture import graph_tables

    try:  # graph_trainer's own ops and passes, so its graphs load
        from graphtrain_inspect.samples import torchtitan_cpu

        torchtitan_cpu.use_cpu_device()
        import torchtitan.experiments.graph_trainer  # noqa: F401
    except ImportError:
        pass
    logging.disable(logging.WARNING)  # DeviceMesh's unpickling warnings
    for blob in sorted((capture / "blobs").glob("*.gpkl")):
        gm = _load(blob)
        nodes = sum(len(m.graph.nodes) for _, m, _ in graph_tables.iter_graph_modules(gm))
        cache = graph_tables.TableCache()
        walk = min(_timed(cache.fingerprint_of, gm) for _ in range(repeat))
        cache.node_tables(gm)
        tables = min(_timed(cache.node_tables, gm) for _ in range(max(1, repeat // 3)))
        print(f"{blob.name[:12]} nodes {nodes:>6}  walk {walk * 1e3:6.2f} ms  cached tables {tables * 1e3:6.2f} ms")


def _timed(fn, *args) -> float:
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", type=Path)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--base", type=Path, help="an earlier commit's checkout (git worktree), measured after")
    args = ap.parse_args()
    print("# this code")
    measure(args.capture, args.repeat)
    if args.base:
        import tempfile

        from benchmarks.scale_bench import ROOT, base_env

        print(f"# {args.base}")
        with tempfile.TemporaryDirectory() as work:
            env = base_env(args.base, Path(work))
            env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(ROOT)])  # the base's package first
            cmd = [sys.executable, "-m", "benchmarks.fingerprint_cost", str(args.capture), "--repeat", str(args.repeat)]
            out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=True).stdout
            print(out.split("\n", 1)[1], end="")


if __name__ == "__main__":
    main()
