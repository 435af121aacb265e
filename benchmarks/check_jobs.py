"""`check -j N` against tlparse 0.4.3, on the same logs, in one run: scaling with N.

    python -m benchmarks.check_jobs CAPTURE... [--jobs 1 2 4 8 16] [--repeat 3] [--no-tlparse] [--base CHECKOUT]
        [--json F]

Per capture: tlparse on every rank's log one after another (its parse of the same records), then
`graphtrain-inspect check CAPTURE --json -j N` for each N, each a fresh process as a user runs it,
the logs read once before (page cache). Each figure is the best of `--repeat` runs (the machine
may be shared: the best run is the one least slowed by other work), with the 1-minute load
average read just before it. The reports of every N must be the same document (exit 1 if not):
the findings do not depend on N. With `--base CHECKOUT` (a git worktree of an earlier commit: `git
worktree add /tmp/base COMMIT`) the same commands also run with that checkout's code, in turns
with this one's, and its reports must be the same document too (exit 1 if not).

Prints one JSON object per capture, then each capture's time as a multiple of the one before it
(`#` lines: give 2 ranks of a model, then 64 ranks of it); `--json F` also writes them all to F.
Workloads: `python -m benchmarks.scale_captures --only 30k-2r-bug 30k-2r` (and the 8-rank ones).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks.scale_bench import base_env, cli, logs_of, timed, warm


def best(runs: list[dict]) -> dict:
    return min(runs, key=lambda r: r["s"])


def tlparse_s(exe: str, logs: list[Path], repeat: int) -> dict:
    runs = []
    for _ in range(repeat):
        load = os.getloadavg()[0]
        total, rss = 0.0, 0.0
        for log in logs:
            with tempfile.TemporaryDirectory() as out:
                r = timed([exe, str(log), "-o", out, "--no-browser", "--overwrite"])
            total += r["s"]
            rss = max(rss, r["rss_mb"])
        runs.append({"s": total, "rss_mb": rss, "load": load})
    return best(runs)


def bench(path: Path, jobs: list[int], repeat: int, tlparse: bool, base: dict | None = None) -> dict:
    logs = logs_of(path)
    warm(logs)
    res: dict = {"capture": str(path), "logs": len(logs), "log_mb": round(sum(p.stat().st_size for p in logs) / 1e6, 1)}
    if tlparse:
        exe = shutil.which("tlparse") or str(Path(sys.executable).with_name("tlparse"))
        t = tlparse_s(exe, logs, repeat)
        res["tlparse_s"], res["tlparse_load"], res["tlparse_rss_mb"] = round(t["s"], 3), t["load"], round(t["rss_mb"])
    reports = {}
    for n in jobs:
        # this code and the base's in turns, so that both see the same moments of a shared machine
        runs: dict[str, list[dict]] = {"": [], "base_": []}
        for _ in range(repeat):
            for prefix, env in (("", None), ("base_", base)) if base is not None else (("", None),):
                load = os.getloadavg()[0]
                r = timed(cli("check", str(path), "--json", "-j", str(n)), env=env)
                if r["rc"] not in (0, 1):
                    raise SystemExit(f"{prefix}check -j {n} on {path} failed (exit {r['rc']})")
                runs[prefix].append({**r, "load": load})
                reports[(prefix, n)] = r["out"]
        for prefix, rs in runs.items():
            if not rs:
                continue
            b = best(rs)
            row = {
                "s": round(b["s"], 3),
                "load": b["load"],
                "rss_mb": round(b["rss_mb"]),
                "anon_mb": round(b["anon_mb"]),
            }
            if tlparse:
                row["x_faster_than_tlparse"] = round(res["tlparse_s"] / b["s"], 2)
            res[f"{prefix}check_j{n}"] = row
    if len(set(reports.values())) != 1:
        print(json.dumps(res, indent=1))
        raise SystemExit(f"{path}: check's report depends on -j or on the code (base): {sorted(reports)}")
    res["findings"] = json.loads(reports[("", jobs[0])])["summary"]["by_kind"]
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captures", nargs="+", type=Path)
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-tlparse", action="store_true")
    ap.add_argument(
        "--base", type=Path, help="a checkout of earlier code to time beside this one (its reports must be the same)"
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    base = base_env(args.base, Path(tempfile.mkdtemp(prefix="gti-base-"))) if args.base else None
    print(
        f"# {platform.node()}, {os.cpu_count()} CPUs, python {platform.python_version()}, load "
        f"{os.getloadavg()[0]:.1f}",
        flush=True,
    )
    out = []
    for path in args.captures:
        r = bench(path, args.jobs, args.repeat, not args.no_tlparse, base)
        out.append(r)
        print(json.dumps(r, indent=1), flush=True)
    # each capture's time against the one before it, same run: give a 2-rank capture, then the
    # 64 ranks of the same model (rank classes, issue 24: at most 2x)
    for prev, r in zip(out, out[1:]):
        for k, row in r.items():
            if k.startswith(("check_j", "base_check_j")) and isinstance(prev.get(k), dict):
                print(f"# {k} {r['capture']}: {row['s'] / prev[k]['s']:.2f}x the time of {prev['capture']}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
