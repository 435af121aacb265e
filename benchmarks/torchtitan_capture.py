"""Capture's cost on torchtitan's graph_trainer pass pipeline (its compile phase), 2 real gloo ranks.

    python -m benchmarks torchtitan-capture [--repeat 2] [--modes plain blobs no-blobs] [--base CHECKOUT] [--pin]

Runs graph_trainer's llama3 debug model with the CPU config of `samples/torchtitan.py --model llama3
--world 2 --real` (FSDP x TP on a (1, 2) mesh, the three passes that cannot run on a CPU disabled,
one training step) under real `torchrun --nproc-per-node 2` on gloo: plain, under `graphtrain-inspect
capture` with blobs, and with `--no-blobs`. Needs the `torchtitan` extra.

What is timed: torchtitan's own `apply_graph_passes` (the 7 passes of `compile_time_passes(...)`,
what torchtitan logs as "All 7 graph passes took"). The ranks run this module as their entry point
(`--worker`): it wraps `apply_graph_passes` where graph_trainer's trainer calls it, without editing
torchtitan, and writes per rank the wall time, the process CPU time (steadier on a shared
machine) and the peak RSS after the passes. Under capture the rank's `gti_end` record adds the
CPU time of the blob children, how long passes waited for one (`wait s`) and how long the end of
the process waited for the last ones (`end s`). Each row: the slower rank's pipeline wall and its
ratio to plain (same repeat), both ranks' CPU summed and that ratio, CPU plus children's CPU as
a ratio (the honest total: the children's work is not gone, it runs beside or after the
passes), peak RSS of the larger rank after its passes, the step's loss (`--debug.seed 0`: the
same in every run, capture changes nothing the training computes), the load average before/after.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.timing import ROOT, base_env, compiled, machine_line, timed

ENV_OUT = "GTI_BENCH_TIMINGS"  # the directory a worker writes rank<R>.json into
ENV_STEPS = "GTI_BENCH_STEP_TIMERS"  # "1": the worker times the capture's steps (--step-timers)
ENV_PROFILE = "GTI_BENCH_PROFILE"  # "1": each rank's passes under cProfile, rank<R>.prof beside its timings
ENV_PIN = "GTI_BENCH_PIN"  # "1": each rank on a core of its own (LOCAL_RANK), its forked children with it (--pin)


# -- the worker (each torchrun rank) ------------------------------------------------------------


def worker(argv: list[str]) -> None:
    if os.environ.get(ENV_PIN) == "1":
        # before anything starts a thread; a forked blob child inherits the rank's core
        os.sched_setaffinity(0, {int(os.environ.get("LOCAL_RANK", "0")) % (os.cpu_count() or 1)})
    from graphtrain_inspect.samples import torchtitan_cpu

    torchtitan_cpu.use_cpu_device()  # before torchtitan reads its device type at import
    from torchtitan.experiments.graph_trainer import trainer

    original = trainer.apply_graph_passes
    out = os.environ[ENV_OUT]
    steps = _time_capture_steps() if os.environ.get(ENV_STEPS) == "1" else None

    prof = None
    if os.environ.get(ENV_PROFILE) == "1":
        import cProfile

        prof = cProfile.Profile()

    def timed(*args, **kwargs):
        import gc

        gc0 = [g["collections"] for g in gc.get_stats()]
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            if prof is not None:
                return prof.runcall(original, *args, **kwargs)
            return original(*args, **kwargs)
        finally:
            if prof is not None:
                prof.dump_stats(os.path.join(out, f"rank{os.environ.get('RANK', '0')}.prof"))
            rec = {
                "wall_s": time.perf_counter() - t0,
                "cpu_s": time.process_time() - c0,
                "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                # the cyclic collector's collections during the passes, by generation
                "gc": [g["collections"] - n for g, n in zip(gc.get_stats(), gc0)],
                **({"steps": steps} if steps is not None else {}),
            }
            with open(os.path.join(out, f"rank{os.environ.get('RANK', '0')}.json"), "w") as f:
                json.dump(rec, f)

    trainer.apply_graph_passes = timed
    torchtitan_cpu.main(argv)


# The capture's steps in the training process, timed (`--step-timers`): what a rank's passes pay.
_STEPS = {
    "fork (Children.start)": ("graphtrain_inspect.capture.blob_children", "Children", "start"),
    "fingerprint walk": ("graphtrain_inspect.capture.graph_tables", "TableCache", "fingerprint_of"),
    "fork safety walk": ("graphtrain_inspect.capture.blob_children", None, "fork_unsafe"),
    "node sites noted": ("graphtrain_inspect.capture.pass_sites", None, "_caller_site"),
    "wait for a child slot": ("graphtrain_inspect.capture.session_children", "SessionChildren", "_room_for_child"),
    "polls and flushes": ("graphtrain_inspect.capture.session_children", "SessionChildren", "_poll_children"),
    "records made here": ("graphtrain_inspect.capture.session", "Session", "_graph_records"),
    "pass begin, all": ("graphtrain_inspect.capture.session", "Session", "begin"),
    "pass end, all": ("graphtrain_inspect.capture.session", "Session", "end"),
}


def _time_capture_steps() -> dict[str, list[float]]:
    """Wrap each step of _STEPS: {step: [calls, wall s, process CPU s]}, filled as the passes run
    (the flush thread's polls included: process CPU counts every thread)."""
    import importlib

    totals: dict[str, list[float]] = {}
    for label, (module, cls, name) in _STEPS.items():
        owner = importlib.import_module(module)
        owner = getattr(owner, cls) if cls else owner
        fn = getattr(owner, name)
        total = totals[label] = [0, 0.0, 0.0]

        def wrapped(*a, _fn=fn, _t=total, **k):
            w, c = time.perf_counter(), time.process_time()
            try:
                return _fn(*a, **k)
            finally:
                _t[0] += 1
                _t[1] += time.perf_counter() - w
                _t[2] += time.process_time() - c

        setattr(owner, name, wrapped)
    return totals


# -- the driver ----------------------------------------------------------------------------------


def commands(work: Path, mode: str) -> list[str]:
    from graphtrain_inspect.samples import torchtitan as sample

    tok, data = sample.make_assets(str(work / "assets"))
    args = argparse.Namespace(
        model="llama3",
        world=2,
        out=str(work / f"cap-{mode}"),
        assets=str(work / "assets"),
        bug=None,
        real=True,
        steps=1,
    )
    bindir = os.path.dirname(sys.executable)
    cmd = sample.command(args, tok, data, sys.executable, os.path.join(bindir, "graphtrain-inspect"))
    cmd[cmd.index("graphtrain_inspect.samples.torchtitan_cpu")] = "benchmarks.torchtitan_capture"
    launch = cmd[cmd.index("--") + 1 :]
    i = launch.index("benchmarks.torchtitan_capture") + 1
    launch.insert(i, "--worker")
    launch += ["--debug.seed", "0"]  # the same initial weights in every run: the step's loss must agree
    if mode == "plain":
        return launch
    cap = cmd[: cmd.index("--")]
    return [*cap, *(["--no-blobs"] if mode.startswith("no-blobs") else []), "--", *launch]


def run(
    work: Path,
    mode: str,
    blob_children: int | None = None,
    step_timers: bool = False,
    base: Path | None = None,
    pin: bool = False,
) -> dict:
    """One run of `mode`; with `base`, the capture's code is that checkout's (a git worktree of an
    earlier commit), the worker and this driver this checkout's."""
    timings = work / f"t-{mode}"
    timings.mkdir(exist_ok=True)
    for f in timings.iterdir():
        f.unlink()
    cap = work / f"cap-{mode}"
    if cap.exists():
        import shutil

        shutil.rmtree(cap)
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_HOME=str(work / "assets" / "hf"),
        **{ENV_OUT: str(timings)},
    )
    if blob_children is not None:
        env["GTI_CAPTURE_BLOB_CHILDREN"] = str(blob_children)
    if step_timers and mode != "plain":
        env[ENV_STEPS] = "1"
    if pin:
        env[ENV_PIN] = "1"
    if mode.endswith("-here"):
        from graphtrain_inspect.capture.deferred_graphs import ENV_NODES  # no torch: the driver's import

        env[ENV_NODES] = "0"  # every graph recorded in the training process
    if base is not None:
        env["PYTHONPATH"] = base_env(base, work / "base")["PYTHONPATH"]
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    r = timed(commands(work, mode), env=env, stderr=subprocess.STDOUT)
    output = r["out"].decode(errors="replace")
    total = r["s"]
    ranks = sorted(timings.glob("rank*.json"))
    if r["rc"] != 0 or len(ranks) != 2:
        raise SystemExit(f"{mode} run failed (rc {r['rc']}):\n{output[-3000:]}")
    per = [json.loads(f.read_text()) for f in ranks]
    losses = re.findall(r"loss:\s+([-0-9.]+)", output)
    t = {
        "wall_s": max(p["wall_s"] for p in per),
        "cpu_s": sum(p["cpu_s"] for p in per),
        "maxrss_mb": max(p["maxrss_mb"] for p in per),
        "total_s": total,
        "loss": losses[0] if losses and len(set(losses)) == 1 else "/".join(sorted(set(losses))) or "?",
        "child_cpu_s": 0.0,
        "wait_s": 0.0,
        "end_s": 0.0,
        "log_mb": 0.0,
        "blob_mb": 0.0,
        "steps": [p.get("steps") for p in per],
        "gc": [p.get("gc") for p in per],
    }
    if mode != "plain":
        from graphtrain_inspect.capture.shared import logformat

        for rank in (0, 1):
            end = _end_record(cap / logformat.log_file_name(rank))
            if end.get("capture_errors"):
                raise SystemExit(f"{mode}: rank {rank} recorded {end['capture_errors']} capture errors in {cap}")
            kids = end.get("blob_children") or {}
            t["child_cpu_s"] += kids.get("cpu_s", 0.0)
            t["wait_s"] = max(t["wait_s"], kids.get("waited_s", 0.0))
            t["end_s"] = max(t["end_s"], kids.get("waited_at_end_s", 0.0))
            t["log_mb"] += (cap / logformat.log_file_name(rank)).stat().st_size / 1e6
        blobs = cap / logformat.BLOB_DIR
        t["blob_mb"] = sum(f.stat().st_size for f in blobs.iterdir()) / 1e6 if blobs.exists() else 0.0
    return t


def _end_record(log: Path) -> dict:
    from graphtrain_inspect.capture.shared import logformat

    for _, line, payload in logformat.split_records(log.read_bytes()):
        env = logformat.parse_envelope_line(line)
        if logformat.record_kind(env) == logformat.END:
            return logformat.decode_payload(payload, env)
    raise SystemExit(f"{log}: no gti_end record")


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each mode, interleaved")
    ap.add_argument(
        "--modes",
        nargs="+",
        choices=("plain", "blobs", "no-blobs", "blobs-here", "no-blobs-here"),
        default=["plain", "blobs", "no-blobs"],
        help="`-here`: graphs recorded in the training process (GTI_CAPTURE_DEFER_NODES=0)",
    )
    ap.add_argument(
        "--blob-children", type=int, help="GTI_CAPTURE_BLOB_CHILDREN for the capture runs (default: the capture's)"
    )
    ap.add_argument("--work", help="where the assets and captures go (default: a temporary directory)")
    ap.add_argument(
        "--step-timers", action="store_true", help="time the capture's steps in each rank's passes (prints a line each)"
    )
    ap.add_argument(
        "--pin",
        action="store_true",
        help="each rank on a core of its own, its blob children on that core too: on a machine with "
        "as many cores as ranks, the ranks no longer take each other's core, and a rank's children "
        "take turns with it instead of running beside the other rank",
    )
    ap.add_argument(
        "--base",
        type=Path,
        help="a checkout of an earlier commit (git worktree): each capture mode runs again with its code, right after",
    )
    args = ap.parse_args()
    compiled(ROOT)  # the capture imports some modules in the first pass: from bytecode, as installed

    import torch

    print(
        f"{machine_line()}, torch {torch.__version__}, "
        f"2 gloo ranks (torchrun), graph_trainer llama3 debug model (SDPA), 7 passes"
        f"{f', GTI_CAPTURE_BLOB_CHILDREN={args.blob_children}' if args.blob_children else ''}",
        flush=True,
    )
    print(
        f"{'rep':>3} {'run':>13} {'passes s':>9} {'x plain':>8} {'cpu s':>7} {'x plain':>8} {'child s':>8} "
        f"{'+child x':>8} "
        f"{'wait s':>7} {'end s':>6} {'RSS MB':>7} {'log MB':>7} {'blobs MB':>8} {'run s':>6} {'loss':>8}  "
        "load before/after",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        for rep in range(args.repeat):
            plain = None
            runs = [(m, None) for m in args.modes]
            if args.base:
                runs = [r for m in args.modes for r in ((m, None), *([(m, args.base)] if m != "plain" else []))]
            for mode, base in runs:
                load0 = os.getloadavg()[0]
                t = run(work, mode, args.blob_children, args.step_timers, base, args.pin)
                load1 = os.getloadavg()[0]
                plain = plain or t
                label = f"{mode} base" if base else mode
                print(
                    f"{rep:>3} {label:>13} {t['wall_s']:>9.2f} {t['wall_s'] / plain['wall_s']:>8.2f} "
                    f"{t['cpu_s']:>7.2f} "
                    f"{t['cpu_s'] / plain['cpu_s']:>8.2f} {t['child_cpu_s']:>8.2f} "
                    f"{(t['cpu_s'] + t['child_cpu_s']) / plain['cpu_s']:>8.2f} "
                    f"{t['wait_s']:>7.2f} {t['end_s']:>6.2f} {t['maxrss_mb']:>7.0f} {t['log_mb']:>7.1f} "
                    f"{t['blob_mb']:>8.1f} "
                    f"{t['total_s']:>6.1f} {t['loss']:>8}  {load0:.2f}/{load1:.2f}",
                    flush=True,
                )
                print(f"      collections in the passes (gen 0/1/2), per rank: {t['gc']}", flush=True)
                for rank, steps in enumerate(t["steps"]):
                    if steps:  # calls, wall ms, CPU ms of each step in the rank's passes
                        cells = [f"{k} {n:.0f}x {w * 1000:.0f}/{c * 1000:.0f} ms" for k, (n, w, c) in steps.items()]
                        print(f"      rank {rank} steps (calls, wall/CPU): " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
