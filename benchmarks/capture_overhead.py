"""Capture overhead on the sample training: compile phase (trace + pass pipeline) and later steps.

    python benchmarks/capture_overhead.py [--layers 22 110] [--steps 6]

For each size it runs the sample (`python -m graphtrain_inspect.samples.train`, one process) three ways: plain,
under `graphtrain-inspect capture` with blobs, and with `--no-blobs`. The sample reports its own
wall times (trace, pipeline, each step), so the figures exclude interpreter and torch start-up.
Prints one row per run: nodes, compile wall seconds and the ratio to plain, compile CPU seconds
of the process and that ratio (steadier on a shared machine), the CPU seconds of the blob
children (format 3: blobs are pickled by forked children while the training goes on; read from
the rank's gti_end record) and compile CPU + child CPU as a ratio to plain (the honest total: the
process's own CPU hides the children's), how long passes waited for a child (at most
GTI_CAPTURE_BLOB_CHILDREN at once) and how long the end of the process waited for the last ones,
median later-step time and its ratio, and log bytes per captured node. The load average is
printed before and after each run: on a shared machine every wall figure moves with it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_sample(layers: int, steps: int, workdir: Path, mode: str, device: str) -> dict:
    timings = workdir / f"{mode}-{layers}.json"
    train = [
        sys.executable,
        "-m",
        "graphtrain_inspect.samples.train",
        "--quiet",
        "--steps",
        str(steps),
        "--layers",
        str(layers),
        "--timings-json",
        str(timings),
        "--device",
        device,
    ]
    out = workdir / f"cap-{mode}-{layers}"
    if mode == "plain":
        cmd = train
    else:
        cmd = [
            sys.executable,
            "-m",
            "graphtrain_inspect.inspector.cli",
            "capture",
            "--out",
            str(out),
            "--pass",
            "graphtrain_inspect.samples.pipeline:PIPELINE",
            "--no-inductor",
            *(["--no-blobs"] if mode.startswith("no-blobs") else []),
            "--",
            *train,
        ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if mode.endswith("-here"):
        from graphtrain_inspect.capture.deferred_graphs import ENV_NODES

        env[ENV_NODES] = "0"  # every graph recorded in the training process, as before session 11
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{mode} run failed:\n{r.stderr[-3000:]}")
    t = json.loads(timings.read_text())
    t["compile_s"] = t["trace_s"] + t["pipeline_s"]
    # CPU seconds of the process: steadier than wall time on a shared machine.
    t["compile_cpu_s"] = t["trace_cpu_s"] + t["pipeline_cpu_s"]
    t["later_step_s"] = statistics.median(t["step_s"][1:])
    if mode != "plain":
        sys.path.insert(0, str(ROOT))
        from graphtrain_inspect.capture.shared import logformat
        from graphtrain_inspect.capture.summary import summarize

        (s,) = summarize(str(out))
        nodes = _captured_nodes(out / logformat.log_file_name(0))
        t["log_bytes"] = s.bytes
        t["bytes_per_node"] = s.bytes / nodes
        blob_dir = out / logformat.BLOB_DIR
        t["blob_bytes"] = sum(f.stat().st_size for f in blob_dir.iterdir()) if blob_dir.exists() else 0
        (end,) = [p for k, p in _payloads(out / logformat.log_file_name(0)) if k == logformat.END]
        kids = end.get("blob_children") or {}
        t["child_cpu_s"] = kids.get("cpu_s", 0.0)
        t["child_wait_s"] = kids.get("waited_s", 0.0)
        t["end_wait_s"] = kids.get("waited_at_end_s", 0.0)
        t["children"] = kids.get("forked", 0)
    return t


def _payloads(log: Path) -> list[tuple[str, object]]:
    from graphtrain_inspect.capture.shared import logformat

    out = []
    for _, line, payload in logformat.split_records(log.read_bytes()):
        env = logformat.parse_envelope_line(line)
        kind = logformat.record_kind(env)
        if kind == logformat.END:
            out.append((kind, logformat.decode_payload(payload, env)))
    return out


def _captured_nodes(log: Path) -> int:
    """Nodes of every distinct graph the log holds (the envelope's `nodes` on gti_graph records)."""
    from graphtrain_inspect.capture.shared import logformat

    total = 0
    for _, line, _ in logformat.split_records(log.read_bytes()):
        env = logformat.parse_envelope_line(line)
        if logformat.record_kind(env) == logformat.GRAPH_CODE:
            total += env["artifact"]["nodes"]
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, nargs="+", default=[22, 110], help="sample layers (~450 traced nodes each)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument(
        "--modes",
        nargs="+",
        choices=("blobs", "no-blobs", "blobs-here", "no-blobs-here"),
        default=["blobs", "no-blobs"],
        help="the capture runs after plain; `-here`: graphs recorded in the training process",
    )
    args = ap.parse_args()
    import platform

    print(
        f"# {platform.node()}, {os.cpu_count()} CPUs, device {args.device}, python {platform.python_version()}",
        flush=True,
    )
    print(
        f"{'layers':>6} {'nodes':>7} {'run':>13} {'compile s':>10} {'x plain':>8} {'cpu s':>8} {'x plain':>8} "
        f"{'child s':>8} {'+child x':>8} "
        f"{'wait s':>7} {'end s':>6} {'step ms':>8} {'x plain':>8} {'log MB':>7} {'B/node':>7} "
        f"{'blobs MB':>8}  load before/after"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for layers in args.layers:
            plain = None
            for mode in ("plain", *args.modes):
                load0 = os.getloadavg()[0]
                t = run_sample(layers, args.steps, Path(tmp), mode, args.device)
                load1 = os.getloadavg()[0]
                plain = plain or t
                child = t.get("child_cpu_s", 0.0)
                print(
                    f"{layers:>6} {t['traced_nodes']:>7} {mode:>13} {t['compile_s']:>10.2f} "
                    f"{t['compile_s'] / plain['compile_s']:>8.2f} "
                    f"{t['compile_cpu_s']:>8.2f} {t['compile_cpu_s'] / plain['compile_cpu_s']:>8.2f} "
                    f"{child:>8.2f} {(t['compile_cpu_s'] + child) / plain['compile_cpu_s']:>8.2f} "
                    f"{t.get('child_wait_s', 0.0):>7.2f} {t.get('end_wait_s', 0.0):>6.2f} "
                    f"{t['later_step_s'] * 1000:>8.1f} {t['later_step_s'] / plain['later_step_s']:>8.2f} "
                    f"{t.get('log_bytes', 0) / 1e6:>7.1f} {t.get('bytes_per_node', 0):>7.0f} "
                    f"{t.get('blob_bytes', 0) / 1e6:>8.1f}  {load0:.2f}/{load1:.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
