"""`compare BASE NEW` on two large captures, on one core: the whole command, and its graph part.

    python -m benchmarks.compare_bench [BASE [NEW]] [--repeat 3] [--work DIR]

BASE defaults to the 30k-node 2-rank scale capture (`python -m benchmarks.scale_captures --only
30k-2r`). NEW defaults to another run of it as `benchmarks.world_synth` writes one: every record
the source's, each process-group name renamed (a second job names its groups otherwise; its own
devices and its graphs are the same), the digests its capture would have written, torch's own logs
of the run linked beside them. A NEW given is
compared as it is (the `30k-2r-bug` capture: every pass after the planted divergence differs).

Prints one JSON line per measurement, each the best of `--repeat` runs with the 1-minute load
average read before it and the CPU seconds it took (`cpu_s`: on a shared machine the wall time
counts the others' work too), the process pinned to one core (`os.sched_setaffinity`):
* `graphs_s`: the two captures opened, their stages paired and every paired graph on every pair
  of ranks said the same or changed (`TwoRuns.compare`), in this process;
* `command_s`: `graphtrain-inspect compare BASE NEW --json -j 1` as a fresh process (the checks
  on both runs included), and `command_no_check_s` with `--no-check`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.scale_bench import cli, logs_of, timed, warm
from benchmarks.scale_captures import DEFAULT_OUT


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


def best_of(repeat: int, fn) -> dict:
    runs = []
    for _ in range(repeat):
        load = os.getloadavg()[0]
        got = fn()
        got["load"] = load
        runs.append(got)
    return min(runs, key=lambda r: r["s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base", nargs="?", default=str(DEFAULT_OUT / "30k-2r"))
    ap.add_argument("new", nargs="?", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", default=None, help="where the synthesized second run is written (default: a temp dir)")
    args = ap.parse_args()
    if not Path(args.base, "manifest.json").exists():
        raise SystemExit(f"{args.base}: no capture (python -m benchmarks.scale_captures --only 30k-2r makes it)")
    _one_core()
    work = Path(args.work or tempfile.mkdtemp(prefix="gti-compare-"))
    new = args.new
    if new is None:
        from benchmarks.world_synth import synthesize

        new = str(work / "second-run")
        if not Path(new, "manifest.json").exists():
            synthesize(args.base, new, 2, log=lambda *_: None)
        # torch's own logs of the run too (the checks read its compile events), as they were
        trace = Path(args.base, "torch_trace")
        if trace.is_dir() and not Path(new, "torch_trace").exists():
            os.symlink(trace.resolve(), Path(new, "torch_trace"))
    warm(logs_of(Path(args.base)) + logs_of(Path(new)))
    g = best_of(args.repeat, lambda: graphs_s(args.base, new))
    print(json.dumps({"base": args.base, "new": new, "graphs_s": round(g["s"], 3), "load": g["load"], **g}))
    for name, extra in (("command_s", []), ("command_no_check_s", ["--no-check"])):
        cmd = ["taskset", "-c", str(min(os.sched_getaffinity(0)))] if _has_taskset() else []
        cmd += cli("compare", args.base, new, "--json", "-j", "1", *extra)
        t = best_of(args.repeat, lambda: _with_cpu(cmd))
        print(json.dumps({name: round(t["s"], 3), "cpu_s": round(t["cpu_s"], 3), "load": t["load"]}))


def _with_cpu(cmd: list[str]) -> dict:
    """`timed(cmd)` and the CPU seconds (user and system) the process took: on a shared machine the
    wall time counts the other work too, the CPU time only this command's."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    got = timed(cmd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    got["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return got


def _has_taskset() -> bool:
    from shutil import which

    return which("taskset") is not None


if __name__ == "__main__":
    main()
