"""A world of many ranks from a real capture of a few: rank r logs what source rank r % k logged,
under process-group names of its own. For the rank-classes benchmark (issue 24): 64 ranks of one
model whose graphs fall in as many classes as the source has distinct ranks.

    python -m benchmarks.world_synth SRC_CAPTURE OUT_DIR [--ranks 64]

Every record is the source's, written again with the format module
(`graphtrain_inspect.capture.shared.logformat.encode_record`) under the new rank: the payload text is
the source's byte for byte (node tables keep one row per line) except that each process-group
name of the source rank is replaced by a name of the new rank's own (`"<name>"` in node tables,
`'<name>'` in graph code, the rank table's keys and mesh entries), as ranks of a real job name a
mesh dimension's groups differently (the group's members stay the source's); the rank table
and header say the new rank and world size. Graph ids are the source's (a graph id is a content hash
of the graph as its rank logged it; the reader keys tables by id and md5, so two ranks with one id
and different bytes stay apart). What this world lacks against a real one: each rank's mesh
coordinates are its source rank's, so rank-derived vectors match the source's pattern, not the
new rank's.

Prints one line per rank written and the total.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import orjson

from graphtrain_inspect.capture.shared import logformat, rank_tokens
from graphtrain_inspect.inspector.read.capture_index import open_capture


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


def synthesize(src: str, out: str, ranks: int, log=print) -> dict[str, Any]:
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=64)
    args = ap.parse_args()
    synthesize(args.src, args.out, args.ranks)


if __name__ == "__main__":
    main()
