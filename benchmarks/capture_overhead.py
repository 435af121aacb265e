"""What the capture costs the training: the sample's compile phase, Inductor's generated code, and
the records the capture makes for each new node table.

    python -m benchmarks capture-overhead [--layers 22 110] [--steps 6] [--modes blobs no-blobs]
    python -m benchmarks codegen-overhead [--blocks 4 16]
    python -m benchmarks record-cost CAPTURE [--repeat 5]
    python -m benchmarks torch-trace-cost [--runs 2]

`capture-overhead`: for each size the sample (`python -m graphtrain_inspect.samples.train`, one
process) runs plain, then under `graphtrain-inspect capture` in each mode (`blobs`, `no-blobs`;
`-here`: every graph recorded in the training process). The sample reports its own wall and CPU
times (trace, pipeline, each step), so the figures exclude interpreter and torch start-up. One
row per run: nodes, compile wall seconds and the ratio to plain, compile CPU seconds of the
process and that ratio (steadier on a shared machine), the CPU seconds of the blob children (read
from the rank's gti_end record) and compile CPU + child CPU as a ratio to plain, how long passes
waited for a child and how long the end of the process waited for the last ones, median
later-step time and its ratio, log bytes per captured node; the load average before and after.

`codegen-overhead`: an MLP's forward and backward compiled by Inductor (CPU, C++ kernels; the
`codegen-program` below, one process), three ways, Inductor's caches off in all three: plain;
captured (`--no-blobs`) with the generated code kept; and with `GTI_CAPTURE_OUTPUT_CODE=0` (passes
only). The program times its first call (the compile), C++ compiler runs included in its CPU
(`TORCHINDUCTOR_COMPILE_THREADS=1`). One row per run, and for the capture with code its records,
kernels, bytes of code and bytes per kernel.

`record-cost`: on a capture's own rank 0 tables, each step the capture runs on a new node table
(the table's normalized digest, its lines split once, the row digests with their refs, the
stale-symbol rows and their scope events), best of `--repeat`, each record's size as a share of
the table's bytes; then what reading each row-digest record costs whole and with its refs left
undecoded.

`torch-trace-cost`: what keeping torch's own TORCH_TRACE logs (`capture --torch-trace`) costs on a
real compiled run: the FSDP2 + torch.compile program (2 CPU ranks, gloo, 3 steps) captured with
and without it, `--runs` times each; one line per capture: its wall seconds, the capture's bytes
and those of `DIR/torch_trace`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.timing import GTI, machine_line, project_env, timed

# -- capture-overhead ----------------------------------------------------------------------


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
            *GTI,
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
    env = {**project_env(), "OMP_NUM_THREADS": "1"}
    if mode.endswith("-here"):
        from graphtrain_inspect.capture.deferred_graphs import ENV_NODES

        env[ENV_NODES] = "0"  # every graph recorded in the training process
    r = timed(cmd, env=env)
    if r["rc"] != 0:
        raise SystemExit(f"{mode} run failed (exit {r['rc']})")
    t = json.loads(timings.read_text())
    t["compile_s"] = t["trace_s"] + t["pipeline_s"]
    # CPU seconds of the process: steadier than wall time on a shared machine.
    t["compile_cpu_s"] = t["trace_cpu_s"] + t["pipeline_cpu_s"]
    t["later_step_s"] = statistics.median(t["step_s"][1:])
    if mode != "plain":
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


def overhead_main() -> None:
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
    print(f"{machine_line()}, device {args.device}", flush=True)
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


# -- codegen-overhead ----------------------------------------------------------------------


def run_codegen(blocks: int, mode: str, work: Path) -> dict:
    timings = work / f"{mode}-{blocks}.json"
    prog = [
        sys.executable,
        "-m",
        "benchmarks.capture_overhead",
        "codegen-program",
        "--blocks",
        str(blocks),
        "--timings-json",
        str(timings),
    ]
    out = work / f"cap-{mode}-{blocks}"
    # compile in-process (no worker pool), so the C++ compiler runs are this process's children and
    # their CPU time counts: steadier than wall time on a shared machine
    env = {
        **project_env(),
        "OMP_NUM_THREADS": "1",
        "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1",
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
    }
    if mode == "plain":
        cmd = prog
    else:
        cmd = [
            *GTI,
            "capture",
            "--out",
            str(out),
            "--no-blobs",
            "--",
            *prog,
        ]
        if mode == "no-code":
            env["GTI_CAPTURE_OUTPUT_CODE"] = "0"
    r = timed(cmd, env=env)
    if r["rc"] != 0:
        raise SystemExit(f"{mode} run failed (exit {r['rc']})")
    t = json.loads(timings.read_text())
    if mode == "code":
        from graphtrain_inspect.inspector.read.capture_index import open_capture
        from graphtrain_inspect.inspector.read.output_code import kernel_count, output_codes

        with open_capture(str(out)) as cap:
            ocs = output_codes(cap, 0)
            t["codes"] = len({oc.oid for oc in ocs})
            t["kernels"] = sum(kernel_count(cap, oc) for oc in ocs)
            t["code_bytes"] = sum(oc.bytes for oc in {oc.oid: oc for oc in ocs}.values())
            t["log_bytes"] = cap.log_file(0).size
    return t


def codegen_main() -> None:
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
                t = run_codegen(blocks, mode, Path(d))
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


def codegen_program() -> None:
    """The program `codegen-overhead` runs: an MLP of N blocks, forward and backward compiled by
    Inductor (CPU, C++ kernels), timed by itself (the first call is the compile)."""
    import resource

    import torch

    def cpu() -> float:
        """CPU seconds of this process and its finished children (the C++ compiler runs)."""
        ch = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + ch.ru_utime + ch.ru_stime

    class Block(torch.nn.Module):
        def __init__(self, d: int):
            super().__init__()
            self.a = torch.nn.Linear(d, 2 * d)
            self.b = torch.nn.Linear(2 * d, d)
            self.norm = torch.nn.LayerNorm(d)

        def forward(self, x):
            return x + self.b(torch.nn.functional.gelu(self.a(self.norm(x))) * 0.5)

    p = argparse.ArgumentParser()
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--timings-json", required=True)
    a = p.parse_args(sys.argv[2:])
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[Block(64) for _ in range(a.blocks)])
    step = torch.compile(lambda x: net(x).square().mean())
    x = torch.randn(32, 64)
    t0, c0 = time.perf_counter(), cpu()
    step(x).backward()
    compile_s, compile_cpu_s = time.perf_counter() - t0, cpu() - c0
    later = []
    for _ in range(5):
        t = time.perf_counter()
        step(x).backward()
        later.append(time.perf_counter() - t)
    with open(a.timings_json, "w") as f:
        json.dump({"compile_s": compile_s, "compile_cpu_s": compile_cpu_s, "later_s": statistics.median(later)}, f)


# -- record-cost ---------------------------------------------------------------------------


def record_cost_main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    import orjson

    from graphtrain_inspect.capture.shared import logformat, rank_tokens, row_digests, symbol_rows
    from graphtrain_inspect.inspector.read import row_digests as digest_records
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    print(machine_line(), flush=True)
    cap = open_capture(args.capture)
    rank = cap.ranks[0]
    log, table = cap.log_file(rank), cap.rank_table(rank)
    names = ("digest", "split", "row digests", "of which refs", "symbol rows", "symbol scopes")
    total = dict.fromkeys(names, 0.0)
    total_mb = total_dig_mb = total_rows_mb = total_scopes_mb = 0.0
    read_whole = read_lazy = 0.0
    for gid, ref in cap.graphs(rank).items():
        rec = ref.records.get(logformat.NODES)
        text = log.payload_bytes(rec) if log is not None and rec is not None else None
        if text is None:
            continue
        best = dict.fromkeys(names, float("inf"))
        rows = digests = None
        tables = orjson.loads(text)  # the table as the capture holds it: row dicts
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            rank_tokens.table_norm(text, table, cap.own_device(rank, gid))
            t1 = time.perf_counter()
            lines = text.split(b"\n")
            subs = logformat.node_table_rows(lines, text)
            t2 = time.perf_counter()
            digests = row_digests.row_digests_payload(gid, lines, subs, graphs=tables["graphs"])
            t3 = time.perf_counter()
            row_digests.row_refs(tables["graphs"])
            t3r = time.perf_counter()
            rows = symbol_rows.symbol_rows_payload(gid, text, tables, subs)
            t4 = time.perf_counter()
            kept = symbol_rows.kept_graphs(text, tables, subs)
            t5 = time.perf_counter()
            scopes = symbol_rows.scopes_payload(gid, kept or [], cap.symbols(rank, gid) or {})
            t6 = time.perf_counter()
            for name, s in zip(names, (t1 - t0, t2 - t1, t3 - t2, t3r - t3, t4 - t3r, t6 - t5)):
                best[name] = min(best[name], s)
        scopes_mb = len(orjson.dumps(scopes)) / 1e6
        total_scopes_mb += scopes_mb
        drec = ref.records.get(logformat.ROW_DIGESTS)
        if drec is not None and log is not None:
            whole = lazy = float("inf")
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                orjson.loads(log.payload_bytes(drec))
                t1 = time.perf_counter()
                digest_records.payload_and_refs(log, drec)
                t2 = time.perf_counter()
                whole, lazy = min(whole, t1 - t0), min(lazy, t2 - t1)
            read_whole += whole
            read_lazy += lazy
        mb, rows_mb = len(text) / 1e6, len(rows or b"") / 1e6
        dig_mb = len(orjson.dumps(digests)) / 1e6 if digests is not None else 0.0
        for name in names:
            total[name] += best[name]
        total_mb += mb
        total_dig_mb += dig_mb
        total_rows_mb += rows_mb
        steps = "  ".join(f"{name} {best[name] * 1000:7.2f} ms" for name in names)
        print(
            f"{gid}  {ref.nodes if hasattr(ref, 'nodes') else '':>7}  {mb:7.2f} MB  {steps}"
            f"  digests {dig_mb:5.2f} MB ({dig_mb / mb:.1%}), symbol rows {rows_mb:5.2f} MB ({rows_mb / mb:.0%}),"
            f" scopes {scopes_mb * 1000:6.1f} KB"
        )
    if total_mb:
        steps = ", ".join(
            f"{name} {total[name] * 1000:.1f} ms ({total_mb / total[name]:.0f} MB/s)" for name in names if total[name]
        )
        print(
            f"total {total_mb:.1f} MB: {steps}; row digests {total_dig_mb:.1f} MB ({total_dig_mb / total_mb:.1%}),"
            f" symbol rows {total_rows_mb:.1f} MB ({total_rows_mb / total_mb:.0%}),"
            f" scope events {total_scopes_mb * 1000:.0f} KB written"
        )
        print(
            f"reading the row-digest records: whole {read_whole * 1000:.1f} ms,"
            f" refs left undecoded {read_lazy * 1000:.1f} ms"
        )


# -- torch-trace-cost ---------------------------------------------------------------------------


def _bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def torch_trace_cost_main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    print(machine_line(), flush=True)
    env = {**project_env(), "OMP_NUM_THREADS": "1"}
    program = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    program += ["-m", "tests.programs.fsdp2_compile", "--steps", "3"]
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(1, args.runs + 1):
            for extra in ([], ["--torch-trace"]):
                out = Path(tmp) / f"run{run}{'-tt' if extra else ''}"
                cmd = [*GTI, "capture", "--out", str(out)]
                r = timed([*cmd, *extra, "--", *program], env=env)
                print(
                    f"run {run} {'--torch-trace' if extra else 'plain'}: exit {r['rc']}, {r['s']:.1f} s, "
                    f"capture {_bytes(out):,} B, torch_trace {_bytes(out / 'torch_trace'):,} B",
                    flush=True,
                )


if __name__ == "__main__":
    if sys.argv[1:2] == ["codegen-program"]:
        codegen_program()
    else:
        overhead_main()
