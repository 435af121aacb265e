"""A real 8-process gloo run of the 3-D mesh sample against the same world simulated (fake process
group, `capture --simulate-world 8 --simulate-ranks 0-7`): the same graphs on every rank and the
same findings. Prints what differs (nothing, when it holds), the times, and exits 1 on a difference.

    python benchmarks/simulated_vs_real.py [--bug tp-coordinate] [--keep DIR]
    python benchmarks/simulated_vs_real.py --nproc 2 --tp 2 --ep 1 --device cuda    # 2 GPUs, NCCL

Heavy on a small machine (8 torch processes at once for the real run): about a minute on 2 cores.
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


def capture(out: str, sample: list[str], *, simulated: bool, nproc: int = 8) -> float:
    bin_dir = os.path.dirname(sys.executable)
    if simulated:
        cmd = [
            *gti(),
            "capture",
            "--out",
            out,
            "--pass",
            PASSES,
            "--simulate-world",
            str(nproc),
            "--simulate-ranks",
            f"0-{nproc - 1}",
            "--",
            sys.executable,
            "-m",
            "graphtrain_inspect.samples.mesh3d",
            *sample,
        ]
    else:
        cmd = [
            *gti(),
            "capture",
            "--out",
            out,
            "--pass",
            PASSES,
            "--",
            os.path.join(bin_dir, "torchrun"),
            "--standalone",
            "--nproc-per-node",
            str(nproc),
            "-m",
            "graphtrain_inspect.samples.mesh3d",
            *sample,
        ]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"capture failed ({'simulated' if simulated else 'real'}): exit {r.returncode}\n{r.stderr[-3000:]}")
    return wall


def pass_graphs(cap) -> dict[int, list[tuple]]:
    """Per rank: (pass name, graph received, graphs returned) in order."""
    return {r: [(p.name, p.before, tuple(sorted(p.after.items()))) for p in cap.passes(r)] for r in cap.ranks}


def findings(out: str) -> list[dict]:
    r = subprocess.run([*gti(), "check", out, "--json", "--severity", "info"], capture_output=True, text=True)
    doc = json.loads(r.stdout)
    keep = ("kind", "severity", "introduced_by", "pass", "ranks", "graph", "node", "message", "evidence")
    return sorted(
        (({k: f.get(k) for k in keep}) for f in doc["findings"] if f.get("kind") != "incomplete-capture"),
        key=lambda f: json.dumps(f, sort_keys=True),
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bug", action="append", default=[], help="a mesh3d --bug switch (repeatable)")
    ap.add_argument("--keep", metavar="DIR", help="keep the two captures under DIR")
    ap.add_argument("--nproc", type=int, default=8)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--ep", type=int, default=2)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = ap.parse_args()
    from graphtrain_inspect.inspector import open_capture

    base = args.keep or tempfile.mkdtemp(prefix="gti-sim-vs-real-")
    os.makedirs(base, exist_ok=True)
    real, sim = os.path.join(base, "real"), os.path.join(base, "simulated")
    sample = [
        "--steps",
        "2",
        "--tp",
        str(args.tp),
        "--ep",
        str(args.ep),
        "--device",
        args.device,
        *(a for b in args.bug for a in ("--bug", b)),
    ]
    try:
        t_real = capture(real, sample, simulated=False, nproc=args.nproc)
        t_sim = capture(sim, sample, simulated=True, nproc=args.nproc)
        a, b = open_capture(real), open_capture(sim)
        ga, gb = pass_graphs(a), pass_graphs(b)
        bad = 0
        if sorted(ga) != sorted(gb):
            print(f"ranks differ: real {sorted(ga)}, simulated {sorted(gb)}")
            bad += 1
        for r in sorted(set(ga) & set(gb)):
            if ga[r] != gb[r]:
                bad += 1
                print(f"rank {r}: graphs differ\n  real      {ga[r]}\n  simulated {gb[r]}")
        fa, fb = findings(real), findings(sim)
        if fa != fb:
            bad += 1
            print(f"findings differ:\n  real      {json.dumps(fa)[:2000]}\n  simulated {json.dumps(fb)[:2000]}")
        n_graphs = len({g for r in ga for p in ga[r] for g in (p[1], *(x[1] for x in p[2]))})
        print(
            f"mesh3d {' '.join(sample)}: {args.nproc} ranks, {sum(len(v) for v in ga.values())} pass "
            f"applications, {n_graphs} distinct graph ids"
        )
        backend = "nccl" if args.device == "cuda" else "gloo"
        print(
            f"real (torchrun, {args.nproc} {backend} processes): {t_real:.1f} s; simulated ({args.nproc} "
            f"ranks, fake process group): {t_sim:.1f} s"
        )
        print(f"findings: {len(fa)} real, {len(fb)} simulated ({', '.join(sorted({f['kind'] for f in fa})) or 'none'})")
        print("SAME graphs on every rank, SAME findings" if not bad else f"{bad} DIFFERENCES")
        return 1 if bad else 0
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
