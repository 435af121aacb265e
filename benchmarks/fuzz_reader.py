"""Fuzz the capture reader and the commands on a real capture: random damage, many times.

    python -m benchmarks fuzz-reader --capture DIR [--seconds 300] [--seed 1] [--commands-every 5]

Without --capture it first captures the sample training (2 CPU ranks, `--steps 2`, ~30 s), and
without --torch-trace it writes a TORCH_TRACE log of a small torch.compile (~30 s). Each
iteration damages, in turn, rank 0's capture log or the TORCH_TRACE log with 1-3 random mutations
(tests/reader_mutations.py: truncation,
byte flips, deleted and duplicated lines, inserted garbage / stray envelopes / enormous lines, and
one run in five JSON edits with the md5 made to match), reads it back and compares every record
before the damage with the original. Every --commands-every iterations it also runs `ls`,
`ls --verify`, `check --json` and `diff` in this process on the damaged capture: any exception
there is a traceback a user would see.

Prints the numbers for the notes: inputs tried (by kind), records before the damage and how many
were lost, reading problems reported, commands run, crashes (each with the mutations, to replay).
Exit status 1 if anything crashed or a record before the damage was lost.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter

from benchmarks.timing import GTI, ROOT, machine_line, project_env
from graphtrain_inspect.capture.shared import logformat
from tests.reader_mutations import GARBAGE, Baseline, mutate


def capture_sample(out: str) -> None:
    env = {**project_env(), "OMP_NUM_THREADS": "1"}
    cmd = [
        *GTI,
        "capture",
        "--out",
        out,
        "--pass",
        "graphtrain_inspect.samples.pipeline:PIPELINE",
        "--no-inductor",
        "--",
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        "-m",
        "graphtrain_inspect.samples.train",
        "--steps",
        "2",
        "--quiet",
    ]
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)


def torch_trace_log(out: str) -> str:
    """A real TORCH_TRACE log: torch.compile of a small training step, one process (~30 s)."""
    env = {**project_env(), "OMP_NUM_THREADS": "1", "TORCH_TRACE": out, "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}
    subprocess.run(
        [sys.executable, "-m", "tests.programs.compile_step"], cwd=ROOT, env=env, check=True, capture_output=True
    )
    return next(n for n in sorted(os.listdir(out)) if n.endswith(".log"))


def random_ops(rng: random.Random, b: Baseline, json_records: int, json_share: float = 0.2) -> list[tuple]:
    if json_records and rng.random() < json_share:
        return [
            (
                "json",
                rng.randrange(json_records),
                rng.randrange(400),
                rng.choice(
                    [None, True, -1, 2**64, 1.5, "x", "../../etc/passwd", [], {}, [1, "x"], {"n": 5}, "g" + "0" * 16]
                ),
            )
            for _ in range(rng.randint(1, 3))
        ]
    n = len(b.data)
    lines = b.data.count(b"\n")
    starts = [r.offset for r in b.records]
    heads = [b.data.count(b"\n", 0, s) for s in starts]

    def pos() -> int:
        return rng.randrange(n + 1) if rng.random() < 0.5 else max(0, rng.choice(starts) + rng.randint(-4, 300))

    def line() -> int:
        return rng.randrange(lines + 1) if rng.random() < 0.5 else rng.choice(heads) + rng.randint(0, 1)

    def garbage() -> bytes:
        k = rng.random()
        if k < 0.5:
            return rng.choice(GARBAGE)
        if k < 0.9:
            return bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
        return b"x" * rng.randint(1 << 16, 1 << 21)  # an enormous line

    ops = []
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["truncate", "flip", "delete_line", "dup_line", "insert"])
        if kind == "truncate":
            ops.append((kind, pos()))
        elif kind == "flip":
            ops.append((kind, pos(), rng.randint(1, 255)))
        elif kind in ("delete_line", "dup_line"):
            ops.append((kind, line()))
        else:
            ops.append((kind, pos(), garbage()))
    return ops


def run_commands(work: str) -> list[str]:
    """ls, ls --verify, check --json, diff on the damaged capture, in this process; the crashes
    (a pass that does not exist, in a TORCH_TRACE log, is an ordinary exit 2)."""
    from graphtrain_inspect.inspector import cli

    crashes = []
    for argv in (
        ["ls", work, "--color", "never"],
        ["ls", work, "--verify", "--json"],
        ["check", work, "--json"],
        ["diff", work, "--pass", "place_devices", "--ranks", "0,1", "--color", "never"],
        ["diff", work, "--pass", "#1", "--color", "never"],
    ):
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = cli.main(argv)
        except SystemExit as e:  # argparse
            code = e.code
        except Exception as e:  # noqa: BLE001 - what we are looking for
            crashes.append(f"{' '.join(argv[:1] + argv[2:])}: {type(e).__name__}: {e}")
            continue
        if code not in (0, 1, 2):
            crashes.append(f"{argv[0]}: exit {code}")
    return crashes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capture", help="a capture directory (default: capture the sample first)")
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--iterations", type=int, default=0, help="stop after this many (0: by time)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--commands-every", type=int, default=5)
    ap.add_argument(
        "--torch-trace",
        metavar="DIR",
        help="also damage the TORCH_TRACE log in DIR (default: make one with torch.compile)",
    )
    ap.add_argument("--no-torch-trace", action="store_true", help="only the capture")
    ap.add_argument(
        "--json-share", type=float, default=0.2, help="share of inputs damaged by JSON edits with the md5 kept right"
    )
    args = ap.parse_args()
    print(machine_line(), flush=True)
    tmp = tempfile.mkdtemp(prefix="gti-fuzz-")
    cap_dir = args.capture
    if not cap_dir:
        cap_dir = os.path.join(tmp, "sample")
        print(f"capturing the sample training into {cap_dir} ...", flush=True)
        capture_sample(cap_dir)
    targets = []
    b = Baseline(cap_dir, rank=0)
    targets.append(("capture", b, b.work_dir(os.path.join(tmp, "w-capture"))))
    if not args.no_torch_trace:
        tt = args.torch_trace
        if not tt:
            tt = os.path.join(tmp, "torch_trace")
            print(f"writing a TORCH_TRACE log of torch.compile into {tt} ...", flush=True)
        name = (
            torch_trace_log(tt)
            if not args.torch_trace
            else next(n for n in sorted(os.listdir(tt)) if n.endswith(".log"))
        )
        bt = Baseline(tt, rank=0, name=name)
        targets.append(("torch_trace", bt, bt.work_dir(os.path.join(tmp, "w-torch"))))
    for label, t, _ in targets:
        print(f"{label}: {t.path} ({len(t.data)} bytes, {len(t.records)} records)", flush=True)
    per_target: Counter = Counter()
    rng = random.Random(args.seed)
    kinds: Counter = Counter()
    totals = Counter()
    crashes: list[str] = []
    lost: list[str] = []
    t0 = time.perf_counter()
    i = 0
    while (args.iterations and i < args.iterations) or (
        not args.iterations and time.perf_counter() - t0 < args.seconds
    ):
        label, b, work = targets[i % len(targets)]
        json_records = sum(
            1
            for r in b.records
            if isinstance(r.payload, (dict, list)) and logformat.KINDS.get(r.kind, "json") == "json"
        )
        ops = random_ops(rng, b, json_records, args.json_share)
        for op in ops:
            kinds[op[0]] += 1
        per_target[label] += 1
        damaged = mutate(b.data, ops)
        res = b.check(work, damaged, semantic=ops[0][0] != "json")
        totals["inputs"] += 1
        totals["records_before_damage"] += res.before
        totals["records_kept"] += res.kept
        totals["read_errors"] += res.errors
        totals["records_in_damaged_logs"] += res.records_after
        totals["unreadable"] += res.unreadable is not None
        if res.crash is not None:
            crashes.append(f"{label} reader: {type(res.crash).__name__}: {res.crash}  ops={_short(ops)}")
        if res.lost:
            lost.append(f"{label} {res.lost[:3]}  ops={_short(ops)}")
        if res.unnamed_errors:
            crashes.append(f"{label} error not naming the file: {res.unnamed_errors[0]}  ops={_short(ops)}")
        if args.commands_every and i % args.commands_every == 0:
            totals["command_runs"] += 5
            for c in run_commands(work):
                crashes.append(f"{label} command {c}  ops={_short(ops)}")
        i += 1
    dt = time.perf_counter() - t0
    print(
        f"inputs tried: {totals['inputs']} damaged logs in {dt:.0f} s (seed {args.seed}): "
        f"{dict(per_target)}; mutations: {dict(sorted(kinds.items()))}"
    )
    print(
        f"records before the damage: {totals['records_before_damage']}, read back exactly: {totals['records_kept']}, "
        f"lost: {totals['records_before_damage'] - totals['records_kept']} ({len(lost)} inputs)"
    )
    print(
        f"reading problems reported: {totals['read_errors']} (one line each, naming the file); "
        f"inputs with no readable record left (one-line refusal, exit 2): {totals['unreadable']}"
    )
    print(f"commands run on damaged captures (ls, ls --verify, check --json, diff x2): {totals['command_runs']}")
    print(f"crashes: {len(crashes)}")
    for c in crashes[:20] + lost[:20]:
        print("  " + c)
    return 1 if crashes or lost else 0


def _short(ops: list[tuple]) -> str:
    return repr([tuple(x[:40] + b"..." if isinstance(x, bytes) and len(x) > 40 else x for x in op) for op in ops])


if __name__ == "__main__":
    sys.exit(main())
