"""Synthesize a large capture from a real one, for the TUI benchmarks (honestly: repeated records).

    python -m benchmarks.tui_synth SRC_CAPTURE OUT_DIR [--gb 1.0] [--big-lines 50000]

Every record is written with the format module (`graphtrain_inspect.capture.shared.logformat.encode_record`). Per rank:
the real header and rank table; then one pipeline whose traced graph is a 50,000-line graph made
by repeating the node lines of the source's largest graph with renamed nodes (and one pass that
changes a few of its lines); then the source's pipelines repeated, each copy with fresh graph ids
and pass numbers, until the rank's log reaches its share of the target size. The graph code and
node tables of the copies are the source's, unchanged: what a long training run that recompiles
the same step many times would write.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import time
from typing import Any

import orjson

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.inspector.read.capture_index import open_capture

_NAME_RE = re.compile(r"(?<![.\w])[A-Za-z_][A-Za-z0-9_]*\b")  # not an attribute (aten.view)


def _salt(gid: str, k: int) -> str:
    return "g" + hashlib.sha256(f"{gid}/{k}".encode()).hexdigest()[:16]


def _rename_value(v: Any, rename: dict[str, str]) -> Any:
    if isinstance(v, dict):
        if len(v) == 1 and "n" in v and isinstance(v["n"], str):
            return {"n": rename.get(v["n"], v["n"])}
        return {k: _rename_value(x, rename) for k, x in v.items()}
    if isinstance(v, list):
        return [_rename_value(x, rename) for x in v]
    return v


def big_graph(code: str, nodes: dict[str, Any], target_lines: int) -> tuple[str, dict[str, Any], int]:
    """A graph of about `target_lines` lines: the root body of `code` repeated with renamed nodes."""
    lines = code.splitlines()
    root = next(g for g in nodes["graphs"] if not g.get("path"))
    names = {r["name"] for r in root["nodes"] if r.get("op") not in ("placeholder", "output")}
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("def forward"))
    end = next(i for i in range(len(lines) - 1, -1, -1) if lines[i].strip().startswith("return "))
    body = lines[start + 1 : end]
    rows = [r for r in root["nodes"] if r.get("op") not in ("placeholder", "output")]
    head = [r for r in root["nodes"] if r.get("op") == "placeholder"]
    out_lines = ["class big(torch.nn.Module):", lines[start]]
    out_rows = list(head)
    k = 0
    while len(out_lines) < target_lines:
        rename = {n: f"{n}_r{k}" for n in names}
        sub = lambda m: rename.get(m.group(0), m.group(0))  # noqa: E731
        out_lines.extend(_NAME_RE.sub(sub, ln) if not ln.lstrip().startswith("#") else ln for ln in body)
        out_rows.extend({**_rename_value(r, rename), "name": rename.get(r["name"], r["name"])} for r in rows)
        k += 1
    last = f"{next(iter(names))}_r{k - 1}" if names else "None"
    out_lines.append(f"        return ({last},)")
    out_rows.append({"name": "output", "op": "output", "target": "output", "args": [[{"n": last}]], "kwargs": {}})
    table = {"graphs": [{"path": "", "parent_node": None, "nodes": out_rows}]}
    return "\n".join(out_lines), table, len(out_rows)


class _Writer:
    def __init__(self, path: str, rank: int, pid: int):
        self.f = open(path, "wb")
        self.rank = rank
        self.pid = pid
        self.records = 0

    def write(self, kind: str, payload: Any, meta: dict | None = None) -> None:
        self.f.write(logformat.encode_record(kind, payload, rank=self.rank, meta=meta, pid=self.pid))
        self.records += 1

    def graph(self, gid: str, code: str, nodes: Any, symbols: Any, devices: Any, n: int | None) -> None:
        meta = {"gid": gid, **({"nodes": n} if n is not None else {})}
        self.write(logformat.GRAPH_CODE, code, meta)
        self.write(logformat.NODES, {**nodes, "gid": gid}, meta)
        self.write(logformat.SYMBOLS, {**(symbols or {"shape_env": False, "symbols": {}}), "gid": gid}, {"gid": gid})
        self.write(logformat.DEVICES, {**(devices or {"literals": [], "values": []}), "gid": gid}, {"gid": gid})


def synthesize(src: str, out: str, *, gb: float = 1.0, big_lines: int = 50000, log=print) -> dict[str, Any]:
    cap = open_capture(src)
    os.makedirs(out, exist_ok=True)
    share = int(gb * (1 << 30) / max(1, len(cap.ranks)))
    info: dict[str, Any] = {"ranks": {}, "source": os.path.abspath(src)}
    for r in cap.ranks:
        t0 = time.perf_counter()
        header = cap.header(r) or {}
        path = os.path.join(out, logformat.log_file_name(r))
        w = _Writer(path, r, int(header.get("pid") or 0))
        w.write(logformat.HEADER, header)
        table = cap.rank_table(r)
        if table is not None:
            w.write(logformat.RANKS, table)
        passes = cap.passes(r)
        graphs = {
            g: (
                cap.graph_code(r, g),
                cap.payload(r, ref.records[logformat.NODES]),
                cap.symbols(r, g),
                cap.devices(r, g),
                ref.nodes,
            )
            for g, ref in cap.graphs(r).items()
        }
        # the big graph: pipeline 0, traced, and one pass that edits a few of its lines
        biggest = max(graphs, key=lambda g: len(graphs[g][0] or ""))
        code, nodes_payload, symbols, devices, _ = graphs[biggest]
        bcode, btable, bn = big_graph(code, nodes_payload, big_lines)
        bgid = logformat.graph_id(bcode, orjson.dumps(btable))
        edited = bcode.splitlines()
        for i in range(len(edited) // 3, len(edited), max(1, len(edited) // 7)):
            edited[i] = edited[i].replace("torch.ops.aten.", "torch.ops.aten_edited.", 1)
        ecode = "\n".join(edited)
        egid = logformat.graph_id(ecode, orjson.dumps(btable) + b"e")
        w.graph(bgid, bcode, btable, symbols, devices, bn)
        seq = 0
        w.write(
            logformat.PASS_START, {"seq": seq, "name": "big_rewrite", "before": bgid, "time": time.time()}, {"seq": seq}
        )
        w.graph(egid, ecode, btable, symbols, devices, bn)
        w.write(
            logformat.PASS,
            _pass_rec(r, seq, "big_rewrite", 0, True, bgid, {"out": egid}, bn, {"out": bn}),
            {"seq": seq, "status": "ok"},
        )
        seq += 1
        pipeline = 1
        k = 0
        while w.f.tell() < share:
            remap = {g: _salt(g, k) for g in graphs}
            written: set[str] = set()
            for p in passes:
                if p.status != "ok":
                    continue
                for g in [p.before, *p.after.values()]:
                    if g and g not in written and g in graphs:
                        c, nd, sy, dv, n = graphs[g]
                        w.graph(remap[g], c or "", nd or {"graphs": []}, sy, dv, n)
                        written.add(g)
                w.write(
                    logformat.PASS_START,
                    {"seq": seq, "name": p.name, "before": remap.get(p.before), "time": time.time()},
                    {"seq": seq},
                )
                nodes = p.nodes or {}
                rec = _pass_rec(
                    r,
                    seq,
                    p.name,
                    pipeline + p.pipeline,
                    p.traced,
                    remap.get(p.before),
                    {role: remap[g] for role, g in p.after.items()},
                    nodes.get("before"),
                    nodes.get("after") or {},
                )
                rec.update({"qualname": p.qualname, "source": p.source, "wall_s": p.wall_s})
                w.write(logformat.PASS, rec, {"seq": seq, "status": "ok"})
                seq += 1
            pipeline += 1 + max((p.pipeline for p in passes), default=0)
            k += 1
        w.write(
            logformat.END,
            {
                "records": w.records + 1,
                "bytes": w.f.tell(),
                "passes": seq,
                "graphs": None,
                "blobs": 0,
                "capture_errors": 0,
                "time": time.time(),
            },
        )
        size = w.f.tell()
        w.f.close()
        info["ranks"][str(r)] = {
            "log": os.path.basename(path),
            "bytes": size,
            "passes": seq,
            "copies": k,
            "big_lines": len(bcode.splitlines()),
        }
        log(
            f"rank {r}: {size / 1e6:.0f} MB, {seq} passes ({k} copies of the source's pipelines), big graph "
            f"{len(bcode.splitlines())} lines, {time.perf_counter() - t0:.1f}s"
        )
    manifest = dict(cap.manifest or {})
    manifest.update(
        {
            "status": "finished",
            "ranks": {k: {"log": v["log"], "bytes": v["bytes"]} for k, v in info["ranks"].items()},
            "synthesized_from": info["source"],
        }
    )
    with open(os.path.join(out, logformat.MANIFEST_NAME), "wb") as f:
        f.write(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    cap.close()
    return info


def _pass_rec(rank, seq, name, pipeline, traced, before, after, before_n, after_n) -> dict[str, Any]:
    return {
        "seq": seq, "name": name, "qualname": None, "source": "named", "subsystem": None, "parent": None,
        "rank": rank, "local_rank": rank, "world_size": None, "compile_id": None, "pipeline": pipeline,
        "traced": traced, "time": time.time(), "wall_s": 0.01, "status": "ok", "exception": None,
        "before": before, "after": after, "nodes": {"before": before_n, "after": after_n}, "blobs": {},
        "capture_errors": 0,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--big-lines", type=int, default=50000)
    a = ap.parse_args(argv)
    synthesize(a.src, a.out, gb=a.gb, big_lines=a.big_lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
