"""The CLI's commands on the scale captures, each a fresh process as a user runs it: `check`
against tlparse (and across `-j N`), `diff`, `report`'s page size and `compare`.

    python -m benchmarks check CAPTURE... [--jobs 1 2 4 8 16] [--repeat 3] [--no-tlparse] [--base CHECKOUT] [--json F]
    python -m benchmarks diff CAPTURE --pass NAME [--repeat 3] [--base CHECKOUT] [--base-may-differ]
    python -m benchmarks report-size CAPTURE [-j N]
    python -m benchmarks compare [BASE [NEW]] [--repeat 3] [--work DIR]

Workloads: `python -m benchmarks scale-captures --only 30k-2r-bug 30k-2r` (and 100k-2r-bug for
`diff`, the 8-rank ones for `check --jobs 8`). With `--base CHECKOUT` (a git worktree of an earlier
commit: `git worktree add /tmp/base COMMIT`) `check` and `diff` also run each command with that
checkout's code, in turns with this one's, and its output must be the same (exit 1 if not).

`check`: per capture, tlparse 0.4.3 on every rank's log one after another (its parse of the same
records), then `check CAPTURE --json -j N` for each N; each figure the best of `--repeat` runs with
the 1-minute load average read before it. The reports of every N must be the same document (exit 1
if not). Prints one JSON object per capture, then each capture's time as a multiple of the one
before it (`#` lines: give 2 ranks of a model, then 64 ranks of it).

`diff`: `diff CAPTURE --pass NAME --nodes`, the same with the text diff, and both with `--ranks
0,1`; the best of `--repeat` runs with its peak RSS. `--base-may-differ`: an earlier code whose
diffs pair rows otherwise (each code's runs must agree with each other; `same_as_base` says
whether the two codes' outputs are the same).

`report-size`: `report CAPTURE -o PAGE` on the 30k-node capture whose ranks differ at every stage;
one line: the page's bytes, its findings and diff sections, the wall seconds and the peak RSS;
exit 1 when the page is 10 MB or more.

`compare`: BASE defaults to the `30k-2r` capture, NEW to another run of it as `world-synth` writes
one (every process-group name renamed, torch's logs linked beside). On one core
(`os.sched_setaffinity`), the best of `--repeat` with its CPU seconds: `graphs_s`, the two captures
opened and every paired graph on every pair of ranks said the same or changed (`TwoRuns.compare`);
`command_s`, `compare BASE NEW --json -j 1` (both runs' checks included); `command_no_check_s` with
`--no-check`.
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

from benchmarks.scale import DEFAULT_OUT
from benchmarks.timing import base_env, best, cli, logs_of, machine_line, repeated, timed, warm

# -- check --------------------------------------------------------------------------------


def tlparse_s(exe: str, logs: list[Path], repeat: int) -> dict:
    def every_log() -> dict:
        total, rss = 0.0, 0.0
        for log in logs:
            with tempfile.TemporaryDirectory() as out:
                r = timed([exe, str(log), "-o", out, "--no-browser", "--overwrite"])
            total += r["s"]
            rss = max(rss, r["rss_mb"])
        return {"s": total, "rss_mb": rss}

    return best(repeated(repeat, every_log))


def check_bench(path: Path, jobs: list[int], repeat: int, tlparse: bool, base: dict | None = None) -> dict:
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


def check_main() -> None:
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
    base = base_env(args.base) if args.base else None
    print(machine_line(), flush=True)
    out = []
    for path in args.captures:
        r = check_bench(path, args.jobs, args.repeat, not args.no_tlparse, base)
        out.append(r)
        print(json.dumps(r, indent=1), flush=True)
    # each capture's time against the one before it, same run: give a 2-rank capture, then the
    # 64 ranks of the same model (rank classes: at most 2x)
    for prev, r in zip(out, out[1:]):
        for k, row in r.items():
            if k.startswith(("check_j", "base_check_j")) and isinstance(prev.get(k), dict):
                print(f"# {k} {r['capture']}: {row['s'] / prev[k]['s']:.2f}x the time of {prev['capture']}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


# -- diff --------------------------------------------------------------------------------


def diff_main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", type=Path)
    ap.add_argument("--pass", dest="pass_name", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--base", type=Path, help="a checkout of earlier code to time beside this one (same output required)"
    )
    ap.add_argument("--base-may-differ", action="store_true")
    args = ap.parse_args()
    print(machine_line(), flush=True)
    warm(logs_of(args.capture))
    base = base_env(args.base) if args.base else None
    variants = [("", None), ("base_", base)] if base is not None else [("", None)]
    res: dict = {"capture": str(args.capture), "pass": args.pass_name}
    for label, extra in (
        ("pass_nodes", ["--nodes"]),
        ("pass_text", []),
        ("ranks_nodes", ["--ranks", "0,1", "--nodes"]),
        ("ranks_text", ["--ranks", "0,1"]),
    ):
        runs: dict[str, list[dict]] = {p: [] for p, _ in variants}
        for _ in range(args.repeat):
            for prefix, env in variants:
                r = timed(cli("diff", str(args.capture), "--pass", args.pass_name, "--color", "never", *extra), env=env)
                if r["rc"] != 0:
                    raise SystemExit(f"{prefix}diff {label} failed (exit {r['rc']})")
                runs[prefix].append(r)
        outs = {p: {r["out"] for r in rs} for p, rs in runs.items()}
        if any(len(o) != 1 for o in outs.values()):
            raise SystemExit(f"diff {label}: the output depends on the run")
        if len(set().union(*outs.values())) != 1:
            if not args.base_may_differ:
                raise SystemExit(f"diff {label}: the output depends on the code (base)")
            res[f"{label}_same_as_base"] = False
        elif base is not None:
            res[f"{label}_same_as_base"] = True
        for prefix, rs in runs.items():
            b = min(rs, key=lambda r: r["s"])
            res[f"{prefix}{label}"] = {"s": round(b["s"], 3), "rss_mb": round(b["rss_mb"])}
    print(json.dumps(res, indent=1))


# -- report-size ----------------------------------------------------------------------

LIMIT = 10_000_000


def report_main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", type=Path)
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args()
    print(machine_line(), flush=True)
    warm(logs_of(args.capture))
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        run = timed(cli("report", str(args.capture), "-o", str(page), "-j", str(args.jobs)))
        if run["rc"] != 0:
            sys.exit(f"report exited {run['rc']}")
        text = page.read_text(encoding="utf-8")
    size = len(text.encode())
    findings = text.count('<article class="finding')
    sections = text.count('<section class="diff"')
    print(
        f"{args.capture.name}: {size / 1e6:.2f} MB, {findings} findings, {sections} diff sections; "
        f"{run['s']:.1f} s, peak RSS {run['rss_mb']:.0f} MB"
    )
    sys.exit(0 if size < LIMIT else 1)


# -- compare --------------------------------------------------------------------------------


def _one_core() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def graphs_s(base: str, new: str) -> dict:
    """A fresh process: the captures opened and every paired graph compared."""
    code = (
        "import json, time, os\n"
        "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        "t0, c0 = time.perf_counter(), time.process_time()\n"
        "from graphtrain_inspect.inspector.read.capture_index import open_capture\n"
        "from graphtrain_inspect.inspector.checks.two_runs import TwoRuns\n"
        f"runs = TwoRuns(open_capture({base!r}), open_capture({new!r}))\n"
        "stages = runs.compare()\n"
        "s, cpu = time.perf_counter() - t0, time.process_time() - c0\n"
        "st = {}\n"
        "for x in stages: st[x.status] = st.get(x.status, 0) + 1\n"
        "print(json.dumps({'s': s, 'cpu_s': cpu, 'stages': st, 'pairs': runs.ranks.pairs}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def compare_main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base", nargs="?", default=str(DEFAULT_OUT / "30k-2r"))
    ap.add_argument("new", nargs="?", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", default=None, help="where the synthesized second run is written (default: a temp dir)")
    args = ap.parse_args()
    if not Path(args.base, "manifest.json").exists():
        raise SystemExit(f"{args.base}: no capture (python -m benchmarks scale-captures --only 30k-2r makes it)")
    _one_core()
    work = Path(args.work or tempfile.mkdtemp(prefix="gti-compare-"))
    new = args.new
    if new is None:
        from benchmarks.worlds import synthesize

        new = str(work / "second-run")
        if not Path(new, "manifest.json").exists():
            synthesize(args.base, new, 2, log=lambda *_: None)
        # torch's own logs of the run too (the checks read its compile events), as they were
        trace = Path(args.base, "torch_trace")
        if trace.is_dir() and not Path(new, "torch_trace").exists():
            os.symlink(trace.resolve(), Path(new, "torch_trace"))
    warm(logs_of(Path(args.base)) + logs_of(Path(new)))
    g = best(repeated(args.repeat, lambda: graphs_s(args.base, new)))
    print(json.dumps({"base": args.base, "new": new, "graphs_s": round(g["s"], 3), "load": g["load"], **g}))
    for name, extra in (("command_s", []), ("command_no_check_s", ["--no-check"])):
        cmd = ["taskset", "-c", str(min(os.sched_getaffinity(0)))] if _has_taskset() else []
        cmd += cli("compare", args.base, new, "--json", "-j", "1", *extra)
        t = best(repeated(args.repeat, lambda: timed(cmd)))
        print(json.dumps({name: round(t["s"], 3), "cpu_s": round(t["cpu_s"], 3), "load": t["load"]}))


def _has_taskset() -> bool:
    from shutil import which

    return which("taskset") is not None
