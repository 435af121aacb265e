"""Worlds of many ranks: simulated captures (`capture --simulate-world N`) of the 3-D mesh sample
and of torchtitan's graph_trainer, a real run against its simulated twin, and a world of many ranks
written from a real capture of a few.

    python -m benchmarks worlds [--worlds 8,64,512] [--all 8,64] [--bug tp-coordinate] [--keep DIR]
    python -m benchmarks torchtitan-worlds [--models llama3,moe] [--worlds 8,64] [--keep DIR]
    python -m benchmarks simulated-vs-real [--bug tp-coordinate] [--nproc 8 --tp 2 --ep 2] [--device cuda]
    python -m benchmarks world-synth SRC_CAPTURE OUT_DIR [--ranks 64]

`worlds`: the mesh3d sample (`--bug tp-coordinate`, mesh `(N/4, 2, 2)`) captured with
`--stop-after-passes` for each world on its default ranks (and every rank for the worlds in
`--all`), then `check` in a fresh process; one line per world: ranks run, capture wall, per rank,
bytes, `check` wall and peak RSS, findings.

`torchtitan-worlds` (needs the torchtitan extra): `python -m graphtrain_inspect.samples.torchtitan
--model M --world N` (default rank choice, `--stop-after-passes`), then `check`; one line each.

`simulated-vs-real`: a real gloo (or NCCL, `--device cuda`) torchrun of the mesh3d sample against
the same world simulated on the fake process group: the same graphs on every rank and the same
findings, or what differs (exit 1). Heavy on a small machine (8 torch processes at once).

`world-synth`: rank r of the new world logs what source rank r % k logged, every record written
again with `logformat.encode_record` under the new rank, each process-group name of the source
rank replaced by one of the new rank's own, the rank table and header saying the new rank and
world size, graph ids the source's. What it lacks against a real world: each rank's mesh
coordinates are its source rank's. The 64-rank world of two graph classes that the rank-classes
figure reads is `world-synth 5k-2r-bug OUT --ranks 64`.
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
from pathlib import Path
from typing import Any

import orjson

from benchmarks.timing import cli, machine_line, timed

PASSES = "graphtrain_inspect.samples.mesh3d_passes:PIPELINE"


def gti() -> list[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "graphtrain-inspect")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "graphtrain_inspect.inspector.cli.main"]


def run(cmd: list[str]) -> tuple[int, float, float, str]:
    """exit status, wall seconds, peak RSS (MB) and stdout of a command."""
    r = timed(cmd)
    if r["rc"] not in (0, 1):
        sys.stderr.write(f"{cmd[:4]}... exit {r['rc']}\n")
    return r["rc"], r["s"], r["rss_mb"], r["out"].decode(errors="replace")


def du(path: str) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def check_peak(out: str) -> tuple[float, float, dict]:
    """`check --json`'s wall time, peak memory and summary, a fresh process of its own."""
    r = timed(cli("check", out, "--json"))
    return r["s"], r["rss_mb"], json.loads(r["out"] or b"{}").get("summary", {})


# -- worlds --------------------------------------------------------------------------------


def one_world(world: int, all_ranks: bool, base: str, bug: list[str]) -> None:
    out = os.path.join(base, f"w{world}{'-all' if all_ranks else ''}")
    cmd = [
        *gti(),
        "capture",
        "--out",
        out,
        "--pass",
        PASSES,
        "--simulate-world",
        str(world),
        "--stop-after-passes",
        *(["--simulate-ranks", f"0-{world - 1}"] if all_ranks else []),
        "--",
        sys.executable,
        "-m",
        "graphtrain_inspect.samples.mesh3d",
        *(a for b in bug for a in ("--bug", b)),
    ]
    code, wall, _rss, _ = run(cmd)
    with open(os.path.join(out, "manifest.json")) as f:
        sim = json.load(f)["simulated"]
    per = sim["per_rank"].values()
    size = du(out)
    c_wall, c_rss, summary = check_peak(out)
    n = len(sim["ranks"])
    print(
        f"world {world:5d}  ranks run {n:4d} ({'all' if all_ranks else 'default'}: "
        f"{sim['ranks'] if n <= 8 else str(n)})  "
        f"capture {wall:7.1f} s ({wall / n:5.2f} s/rank, {sim['at_once']} at once, rank peak "
        f"{max(p['max_rss_mb'] for p in per):.0f} MB)  "
        f"bytes {size / 1e6:7.2f} MB ({size / n / 1e3:6.1f} KB/rank)  "
        f"check {c_wall:6.2f} s, peak {c_rss:.0f} MB, findings {summary.get('error')} errors",
        flush=True,
    )


def worlds_main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worlds", default="8,64,512")
    ap.add_argument("--all", default="8,64", help="worlds to run with every rank as well")
    ap.add_argument("--bug", action="append", default=["tp-coordinate"])
    ap.add_argument("--keep", metavar="DIR")
    args = ap.parse_args()
    base = args.keep or tempfile.mkdtemp(prefix="gti-simworlds-")
    os.makedirs(base, exist_ok=True)
    print(
        f"{machine_line()}; mesh3d --bug {' --bug '.join(args.bug)}; capture --stop-after-passes",
        flush=True,
    )
    try:
        alls = {int(x) for x in args.all.split(",") if x}
        for w in (int(x) for x in args.worlds.split(",")):
            one_world(w, False, base, args.bug)
            if w in alls:
                one_world(w, True, base, args.bug)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


# -- torchtitan-worlds ----------------------------------------------------------------------


def one_torchtitan_world(model: str, world: int, base: str, assets: str) -> None:
    out = os.path.join(base, f"{model}-w{world}")
    cmd = [
        sys.executable,
        "-m",
        "graphtrain_inspect.samples.torchtitan",
        "--model",
        model,
        "--world",
        str(world),
        "--out",
        out,
        "--assets",
        assets,
    ]
    code, wall, _rss, _ = run(cmd)
    try:
        with open(os.path.join(out, "manifest.json")) as f:
            sim = json.load(f)["simulated"]
    except (OSError, KeyError, ValueError) as e:
        print(f"{model:6s} world {world:3d}  capture failed (exit {code}): {e}", flush=True)
        return
    per = list(sim["per_rank"].values())
    size = du(out)
    c_wall, c_rss, summary = check_peak(out)
    n = len(sim["ranks"])
    print(
        f"{model:6s} world {world:3d}  exit {code}  ranks run {n} ({sim['ranks']})  capture {wall:6.1f} s "
        f"({sim['at_once']} at once; per rank "
        f"{min(p['wall_s'] for p in per):.0f}-{max(p['wall_s'] for p in per):.0f} s, "
        f"peak {max(p['max_rss_mb'] for p in per):.0f} MB)  bytes {size / 1e6:6.1f} MB  "
        f"check {c_wall:5.1f} s, peak {c_rss:.0f} MB: {summary.get('error')} errors, {summary.get('warning')} warnings",
        flush=True,
    )


def torchtitan_worlds_main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="llama3,moe")
    ap.add_argument("--worlds", default="8,64")
    ap.add_argument("--keep", metavar="DIR", help="keep the captures here")
    args = ap.parse_args()
    base = args.keep or tempfile.mkdtemp(prefix="gti-ttworlds-")
    os.makedirs(base, exist_ok=True)
    assets = os.path.join(base, "assets")
    print(
        f"{machine_line()}; torchtitan graph_trainer, simulated, default rank choice, --stop-after-passes",
        flush=True,
    )
    try:
        for model in args.models.split(","):
            for world in (int(x) for x in args.worlds.split(",")):
                one_torchtitan_world(model, world, base, assets)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        print(f"# load {os.getloadavg()[0]:.2f} at the end", flush=True)
    return 0


# -- simulated-vs-real ----------------------------------------------------------------------


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
    r = timed(cmd)
    if r["rc"] != 0:
        sys.exit(f"capture failed ({'simulated' if simulated else 'real'}): exit {r['rc']}")
    return r["s"]


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


def vs_real_main() -> int:
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


# -- world-synth ---------------------------------------------------------------------------


def _names(table: dict[str, Any] | None, rank: int) -> dict[str, str]:
    """The source rank's group names -> this rank's: every group is taken for a group of a mesh
    dimension that the new world splits (the 2-rank sample's dp group is its world group; in a
    64-rank job each dp group has a name of its own)."""
    return {name: f"{name}.{rank}" for name in ((table or {}).get("groups") or {})}


def _rank_table(table: dict[str, Any], rank: int, world: int, names: dict[str, str]) -> dict[str, Any]:
    t = json.loads(json.dumps(table))
    t["rank"] = rank
    t["world_size"] = world
    t["groups"] = {names.get(name, name): g for name, g in (t.get("groups") or {}).items()}
    for mesh in t.get("meshes") or []:
        if isinstance(mesh, dict) and isinstance(mesh.get("group_names"), dict):
            mesh["group_names"] = {d: names.get(n, n) for d, n in mesh["group_names"].items()}
    return t


def _row_digests_again(text: bytes, nodes_of: dict[Any, tuple[bytes, Any]]) -> Any:
    """A `gti_row_digests` payload made again over its node table as written under the new
    rank's group names (a renamed row has other bytes and length), as that rank's capture would
    write it; the refs (row numbers) kept. The record as it was where its table is not known."""
    from graphtrain_inspect.capture.shared import logformat, row_digests

    old = orjson.loads(text)
    got = nodes_of.get(old.get("gid")) if isinstance(old, dict) else None
    if got is None:
        return text
    lines = got[0].split(b"\n")
    subs = logformat.node_table_rows(lines, got[0])
    new = row_digests.row_digests_payload(old["gid"], lines, subs, least=0, rewrites=got[1])
    if new is None:
        return text
    if "refs" in old:
        new["refs"] = old["refs"]
    return new


def synthesize(src: str, out: str, ranks: int, log=print) -> dict[str, Any]:
    from graphtrain_inspect.capture.shared import logformat, rank_tokens
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    cap = open_capture(src)
    sources = list(cap.ranks)
    os.makedirs(out, exist_ok=True)
    total = 0
    manifest_ranks: dict[str, Any] = {}
    for r in range(ranks):
        t0 = time.perf_counter()
        s = sources[r % len(sources)]
        table = cap.rank_table(s)
        names = _names(table, r)
        json_subs = [(orjson.dumps(a), orjson.dumps(b)) for a, b in names.items()]
        code_subs = [(f"'{a}'".encode(), f"'{b}'".encode()) for a, b in names.items()]
        log_file = cap.log_file(s)
        path = os.path.join(out, logformat.log_file_name(r))
        n = 0
        new_table: dict[str, Any] | None = None
        nodes_of: dict[Any, tuple[bytes, Any]] = {}  # gid -> its node table as written here, its rewrites
        with open(path, "wb") as f:
            for rec in cap.records(s):
                if rec.kind not in logformat.KINDS:
                    continue
                got = log_file.payload_text(rec) if log_file is not None else None
                if got is None:
                    continue
                text = got[0]
                if rec.kind == logformat.HEADER:
                    h = orjson.loads(text)
                    h.update({"rank": r, "world_size": ranks})
                    payload: Any = h
                elif rec.kind == logformat.RANKS:
                    payload = new_table = _rank_table(orjson.loads(text), r, ranks, names)
                else:
                    # group names live in the graph: its code and its node rows (a blind replace
                    # elsewhere would hit other strings, a symbol map's "0")
                    subs = {logformat.GRAPH_CODE: code_subs, logformat.NODES: json_subs}.get(rec.kind, ())
                    for a, b in subs:
                        text = text.replace(a, b)
                    payload = text if logformat.KINDS[rec.kind] == "json" else text.decode("utf-8", "surrogatepass")
                meta = {
                    k: v
                    for k, v in rec.meta.items()
                    if k not in ("name", "encoding", logformat.PAYLOAD_BYTES, rank_tokens.NORM)
                }
                if rec.kind == logformat.NODES and rank_tokens.NORM in rec.meta:
                    # the digest as this rank's capture would have written it: its own group names
                    norm = rank_tokens.table_norm(text, new_table, cap.own_device(s, rec.meta.get("gid")))
                    if norm is not None:
                        meta[rank_tokens.NORM] = norm
                        nodes_of[rec.meta.get("gid")] = (text, rank_tokens.recorded_rewrites(norm))
                elif rec.kind == logformat.NODES:
                    nodes_of[rec.meta.get("gid")] = (text, None)
                elif rec.kind == logformat.ROW_DIGESTS:
                    payload = _row_digests_again(text, nodes_of)
                compile_id = {k: rec.env[k] for k in logformat.COMPILE_ID_KEYS if k in rec.env}
                f.write(
                    logformat.encode_record(
                        rec.kind, payload, rank=r, meta=meta, compile_id=compile_id or None, pid=1000 + r
                    )
                )
                n += 1
            size = f.tell()
        total += size
        manifest_ranks[str(r)] = {
            "log": os.path.basename(path),
            "log_present": True,
            "bytes": size,
            "records": n,
            "complete": True,
            "end_record": True,
        }
        log(
            f"rank {r} (from rank {s}): {size / 1e6:.1f} MB, {n} records, {len(names)} group names renamed, "
            f"{time.perf_counter() - t0:.2f} s"
        )
    manifest = {k: v for k, v in (cap.manifest or {}).items() if k not in ("ranks", "simulated")}
    manifest.update(
        {"status": "finished", "ranks": manifest_ranks, "synthesized_from": os.path.abspath(src), "world_size": ranks}
    )
    with open(os.path.join(out, logformat.MANIFEST_NAME), "wb") as f:
        f.write(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    log(f"{ranks} ranks from {len(sources)}: {total / 1e6:.0f} MB in {out}")
    return {"ranks": ranks, "bytes": total}


def synth_main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=64)
    args = ap.parse_args()
    synthesize(args.src, args.out, args.ranks)


if __name__ == "__main__":
    sys.exit(vs_real_main())
