"""Capture overhead with Inductor's generated code kept, and bytes per kernel.

    python benchmarks/codegen_overhead.py [--blocks 8 32]

For each size it runs benchmarks/codegen_program.py (one process, torch.compile of an MLP's
forward and backward on CPU) three ways, Inductor's caches off in all three (a captured run turns
them off, so plain does too): plain; under `graphtrain-inspect capture --no-blobs` with the
generated code recorded; and the same with `GTI_CAPTURE_OUTPUT_CODE=0` (passes only). The program
times its first call (the compile) itself, so start-up is excluded; compile CPU seconds include
the C++ compiler runs (`TORCHINDUCTOR_COMPILE_THREADS=1`: no worker pool). Prints one row per run:
compile wall and CPU seconds (ratio to plain), median later step, and for the capture with code:
generated-code records, kernels, bytes of code and bytes per kernel.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(blocks: int, mode: str, work: Path) -> dict:
    timings = work / f"{mode}-{blocks}.json"
    prog = [
        sys.executable,
        str(ROOT / "benchmarks" / "codegen_program.py"),
        "--blocks",
        str(blocks),
        "--timings-json",
        str(timings),
    ]
    out = work / f"cap-{mode}-{blocks}"
    # compile in-process (no worker pool), so the C++ compiler runs are this process's children and
    # their CPU time counts: steadier than wall time on a shared machine
    env = dict(
        os.environ, OMP_NUM_THREADS="1", TORCHINDUCTOR_FORCE_DISABLE_CACHES="1", TORCHINDUCTOR_COMPILE_THREADS="1"
    )
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    if mode == "plain":
        cmd = prog
    else:
        cmd = [
            sys.executable,
            "-m",
            "graphtrain_inspect.inspector.cli",
            "capture",
            "--out",
            str(out),
            "--no-blobs",
            "--",
            *prog,
        ]
        if mode == "no-code":
            env["GTI_CAPTURE_OUTPUT_CODE"] = "0"
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{mode} run failed:\n{r.stderr[-3000:]}")
    t = json.loads(timings.read_text())
    if mode == "code":
        sys.path.insert(0, str(ROOT))
        from graphtrain_inspect.inspector.read.capture_index import open_capture
        from graphtrain_inspect.inspector.read.output_code import kernel_count, output_codes

        with open_capture(str(out)) as cap:
            ocs = output_codes(cap, 0)
            t["codes"] = len({oc.oid for oc in ocs})
            t["kernels"] = sum(kernel_count(cap, oc) for oc in ocs)
            t["code_bytes"] = sum(oc.bytes for oc in {oc.oid: oc for oc in ocs}.values())
            t["log_bytes"] = cap.log_file(0).size
    return t


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--blocks", type=int, nargs="+", default=[8, 32])
    a = p.parse_args()
    print(
        "| blocks | run | compile wall s (x plain) | compile CPU s (x plain) | later step ms | code records "
        "| kernels | code KB | B/kernel | log KB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for blocks in a.blocks:
            base = None
            for mode in ("plain", "code", "no-code"):
                t = run(blocks, mode, Path(d))
                base = base or t
                extra = ["", "", "", "", ""]
                if mode == "code":
                    k = t["kernels"] or 1
                    extra = [
                        str(t["codes"]),
                        str(t["kernels"]),
                        f"{t['code_bytes'] / 1024:.1f}",
                        f"{t['code_bytes'] / k:.0f}",
                        f"{t['log_bytes'] / 1024:.0f}",
                    ]
                print(
                    f"| {blocks} | {mode} | {t['compile_s']:.2f} ({t['compile_s'] / base['compile_s']:.2f}) "
                    f"| {t['compile_cpu_s']:.2f} ({t['compile_cpu_s'] / base['compile_cpu_s']:.2f}) | "
                    f"{t['later_s'] * 1000:.1f} | " + " | ".join(extra) + " |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
