"""What the capture's node-table digest (`capture.rank_tokens.table_norm`) costs the training
process: the function run on a capture's own tables, as the capture runs it on each new graph.

    python -m benchmarks.digest_cost CAPTURE [--repeat 5]

Prints per rank 0 table its size and time (best of --repeat), and the total with MB/s.
"""

from __future__ import annotations

import argparse
import time

from graphtrain_inspect.capture import logformat, rank_tokens
from graphtrain_inspect.inspector.read.capture_index import open_capture


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    cap = open_capture(args.capture)
    rank = cap.ranks[0]
    log, table = cap.log_file(rank), cap.rank_table(rank)
    total_s = total_mb = 0.0
    for gid, ref in cap.graphs(rank).items():
        rec = ref.records.get(logformat.NODES)
        text = log.payload_bytes(rec) if log is not None and rec is not None else None
        if text is None:
            continue
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            rank_tokens.table_norm(text, table, cap.own_device(rank, gid))
            best = min(best, time.perf_counter() - t0)
        mb = len(text) / 1e6
        total_s += best
        total_mb += mb
        print(f"{gid}  {ref.nodes if hasattr(ref, 'nodes') else '':>7}  {mb:7.2f} MB  {best * 1000:7.2f} ms")
    if total_s:
        print(f"total {total_mb:.1f} MB in {total_s * 1000:.1f} ms: {total_mb / total_s:.0f} MB/s")


if __name__ == "__main__":
    main()
