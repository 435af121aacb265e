"""What the capture's work on each new node table costs the training process: the node-table
digest (`capture.rank_tokens.table_norm`) and the stale-symbol check's rows
(`capture.symbol_rows.symbol_rows_payload`), each run on a capture's own tables as the capture
runs it on each new graph.

    python -m benchmarks.digest_cost CAPTURE [--repeat 5]

Prints per rank 0 table its size, each function's time (best of --repeat) and the symbol rows'
share of the table's bytes, then the totals with MB/s.
"""

from __future__ import annotations

import argparse
import time

import orjson

from graphtrain_inspect.capture import logformat, rank_tokens, symbol_rows
from graphtrain_inspect.inspector.read.capture_index import open_capture


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    cap = open_capture(args.capture)
    rank = cap.ranks[0]
    log, table = cap.log_file(rank), cap.rank_table(rank)
    total_s = total_rows_s = total_mb = total_rows_mb = 0.0
    for gid, ref in cap.graphs(rank).items():
        rec = ref.records.get(logformat.NODES)
        text = log.payload_bytes(rec) if log is not None and rec is not None else None
        if text is None:
            continue
        best = best_rows = float("inf")
        rows = None
        tables = orjson.loads(text)  # the table as the capture holds it: row dicts
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            rank_tokens.table_norm(text, table, cap.own_device(rank, gid))
            t1 = time.perf_counter()
            rows = symbol_rows.symbol_rows_payload(gid, text, tables)
            t2 = time.perf_counter()
            best, best_rows = min(best, t1 - t0), min(best_rows, t2 - t1)
        mb, rows_mb = len(text) / 1e6, len(rows or b"") / 1e6
        total_s += best
        total_rows_s += best_rows
        total_mb += mb
        total_rows_mb += rows_mb
        print(
            f"{gid}  {ref.nodes if hasattr(ref, 'nodes') else '':>7}  {mb:7.2f} MB  digest {best * 1000:7.2f} ms"
            f"  symbol rows {best_rows * 1000:7.2f} ms, {rows_mb:6.2f} MB ({rows_mb / mb:.0%})"
        )
    if total_s:
        print(
            f"total {total_mb:.1f} MB: digest {total_s * 1000:.1f} ms ({total_mb / total_s:.0f} MB/s), symbol rows"
            f" {total_rows_s * 1000:.1f} ms ({total_mb / total_rows_s:.0f} MB/s), {total_rows_mb:.1f} MB written"
            f" ({total_rows_mb / total_mb:.0%})"
        )


if __name__ == "__main__":
    main()
