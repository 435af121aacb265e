"""What the capture's work on each new node table costs the training process: the node-table
digest (`capture.rank_tokens.table_norm`), the table's lines split once (`logformat.node_table_rows`),
the row digests with each row's refs (`capture.row_digests.row_digests_payload`; the refs alone:
`row_refs`) and the stale-symbol check's rows
(`capture.symbol_rows.symbol_rows_payload`), each run on a capture's own tables as the capture
runs it on each new graph (capture/session.py, `_graph_records`).

    python -m benchmarks.digest_cost CAPTURE [--repeat 5]

Prints per rank 0 table its size, each step's time (best of --repeat) and the size of the row
digests' and the symbol rows' payloads as shares of the table's bytes, then the totals with MB/s.
"""

from __future__ import annotations

import argparse
import time

import orjson

from graphtrain_inspect.capture import logformat, rank_tokens, row_digests, symbol_rows
from graphtrain_inspect.inspector.read.capture_index import open_capture


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    cap = open_capture(args.capture)
    rank = cap.ranks[0]
    log, table = cap.log_file(rank), cap.rank_table(rank)
    names = ("digest", "split", "row digests", "of which refs", "symbol rows")
    total = dict.fromkeys(names, 0.0)
    total_mb = total_dig_mb = total_rows_mb = 0.0
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
            for name, s in zip(names, (t1 - t0, t2 - t1, t3 - t2, t3r - t3, t4 - t3r)):
                best[name] = min(best[name], s)
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
            f"  digests {dig_mb:5.2f} MB ({dig_mb / mb:.1%}), symbol rows {rows_mb:5.2f} MB ({rows_mb / mb:.0%})"
        )
    if total_mb:
        steps = ", ".join(
            f"{name} {total[name] * 1000:.1f} ms ({total_mb / total[name]:.0f} MB/s)" for name in names if total[name]
        )
        print(
            f"total {total_mb:.1f} MB: {steps}; row digests {total_dig_mb:.1f} MB ({total_dig_mb / total_mb:.1%}),"
            f" symbol rows {total_rows_mb:.1f} MB ({total_rows_mb / total_mb:.0%}) written"
        )


if __name__ == "__main__":
    main()
