"""Real captures at scale: the sample training under `graphtrain-inspect capture`, made bigger.

    python -m benchmarks.scale_captures [--out DIR] [--only NAME ...] [--list]

Each workload runs `torchrun --nproc-per-node R -m graphtrain_inspect.samples.train --layers L` on the CPU (gloo)
under capture, with torch's own TORCH_TRACE logs of the same run (`--torch-trace`). About 450
traced nodes per layer, so 22 / 110 / 220 / 440 layers give joint graphs of about 10k / 50k /
100k / 200k nodes (the passes then add a few thousand). `--inductor-passes` adds Inductor's own
joint-graph and post-grad passes to the sample's 7, which makes 27 passes per rank. The largest
workloads skip blobs and Inductor's passes: they would add ~20 minutes of GraphPickler and
pattern matching on a 2-core machine, and nothing the benchmarks read.

Prints one line per capture: its directory, ranks, passes, graph nodes, bytes and the minutes it
took. A capture already complete in DIR is kept (delete it to make it again).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "graphtrain-inspect" / "scale"


@dataclass(frozen=True)
class Workload:
    name: str
    layers: int
    ranks: int
    inductor: bool  # Inductor's passes after the sample's pipeline
    blobs: bool
    bugs: tuple[str, ...] = ()  # the sample's bug switches (graphs then differ across ranks)


WORKLOADS = [
    Workload("10k-8r", 22, 8, inductor=True, blobs=True),
    Workload("50k-2r", 110, 2, inductor=True, blobs=False),
    # a rank-baked constant makes every graph after the pass that bakes it differ across ranks:
    # rank diffs and the cross-rank checks have real work at this size
    Workload("100k-2r", 220, 2, inductor=False, blobs=False, bugs=("rank-baked",)),
    Workload("200k-2r", 440, 2, inductor=False, blobs=False),
    # issue 16's pair: ranks that differ everywhere (a rank literal from the trace on, a
    # rank-divergent pass from pass 3 on) and its clean twin; `benchmarks.check_jobs` reads them
    Workload("30k-2r-bug", 66, 2, inductor=False, blobs=False, bugs=("rank-baked", "rank-divergent")),
    Workload("30k-2r", 66, 2, inductor=False, blobs=False),
    # the same pair at 100k nodes: the diff target (two 100k-node graphs, < 1 s) and check there
    Workload("100k-2r-bug", 220, 2, inductor=False, blobs=False, bugs=("rank-baked", "rank-divergent")),
    Workload("30k-8r-bug", 66, 8, inductor=False, blobs=False, bugs=("rank-baked", "rank-divergent")),
    # the 8-rank pair at a size a 2-core machine makes in minutes (8 ranks share its cores)
    Workload("10k-8r-bug", 22, 8, inductor=False, blobs=False, bugs=("rank-baked", "rank-divergent")),
    Workload("30k-8r", 66, 8, inductor=False, blobs=False),
    # the source of a 64-rank world of 2 graph classes (`benchmarks.world_synth`): the rank literal
    # makes rank 0's and rank 1's graphs differ from the trace on
    Workload("5k-2r-bug", 11, 2, inductor=False, blobs=False, bugs=("rank-baked",)),
]


def generate(w: Workload, out: Path, torch_trace: bool = True, device: str | None = None) -> Path:
    target = out / w.name
    if (target / "manifest.json").exists():
        return target
    if target.exists():
        raise SystemExit(f"{target}: an incomplete capture from an earlier run; delete it to make it again")
    train = [
        "-m",
        "graphtrain_inspect.samples.train",
        "--quiet",
        "--steps",
        "2",
        "--layers",
        str(w.layers),
        *(["--inductor-passes"] if w.inductor else []),
        # 8 ranks shard the router's rows over every rank: one expert each at least
        "--experts",
        str(max(4, w.ranks)),
        *[a for b in w.bugs for a in ("--bug", b)],
        *(["--device", device] if device else []),
    ]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(w.ranks), *train]
    passes = [
        "--pass",
        "graphtrain_inspect.samples.pipeline:PIPELINE",
        *(["--pass", "graphtrain_inspect.samples.pipeline:INDUCTOR_PASSES"] if w.inductor else []),
    ]
    cmd = [
        sys.executable,
        "-m",
        "graphtrain_inspect.inspector.cli",
        "capture",
        "--out",
        str(target),
        *(["--torch-trace"] if torch_trace else []),
        *passes,
        *([] if w.blobs else ["--no-blobs"]),
        *([] if w.inductor else ["--no-inductor"]),
        "--",
        *torchrun,
    ]
    # one thread per rank: the ranks already share the machine's cores
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{w.name}: the capture failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    return target


def describe(path: Path) -> str:
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    cap = open_capture(str(path))
    ranks = cap.ranks
    passes = sum(len(cap.passes(r)) for r in ranks)
    largest = max((g.nodes or 0 for r in ranks for g in cap.graphs(r).values()), default=0)
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    torch_logs = sorted((path / "torch_trace").glob("*.log")) if (path / "torch_trace").exists() else []
    torch_bytes = sum(f.stat().st_size for f in torch_logs)
    return (
        f"{path}: {len(ranks)} ranks, {passes} passes, largest graph {largest:,} nodes, "
        f"{size / 1e6:,.1f} MB in all ({len(torch_logs)} torch TORCH_TRACE logs, {torch_bytes / 1e6:,.1f} MB)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="+", choices=[w.name for w in WORKLOADS])
    ap.add_argument("--list", action="store_true", help="print the workloads and exit")
    ap.add_argument("--device", help="the sample's --device (cuda: one GPU a rank, NCCL); default its own (cpu, gloo)")
    ap.add_argument(
        "--no-torch-trace",
        action="store_true",
        help="skip torch's own TORCH_TRACE logs (scale_bench and check_jobs read only the capture's)",
    )
    args = ap.parse_args()
    chosen = [w for w in WORKLOADS if not args.only or w.name in args.only]
    if args.list:
        for w in chosen:
            print(
                f"{w.name}: --layers {w.layers}, {w.ranks} ranks, inductor passes {w.inductor}, blobs "
                f"{w.blobs}, bugs {list(w.bugs)}"
            )
        return
    args.out.mkdir(parents=True, exist_ok=True)
    for w in chosen:
        t0 = time.monotonic()
        path = generate(w, args.out, torch_trace=not args.no_torch_trace, device=args.device)
        print(f"{describe(path)}; {(time.monotonic() - t0) / 60:.1f} min", flush=True)


if __name__ == "__main__":
    main()
