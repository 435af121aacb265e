"""What the capture's work on each new node table costs the training process: the node-table
digest (`capture.shared.rank_tokens.table_norm`), the table's lines split once (`logformat.node_table_rows`),
the row digests with each row's refs (`capture.shared.row_digests.row_digests_payload`; the refs alone:
`row_refs`), the stale-symbol check's rows (`capture.shared.symbol_rows.symbol_rows_payload`) and
their scope events (`capture.shared.symbol_rows.scopes_payload`), each run on a capture's own tables
as the capture runs it on each new graph (capture/session.py, `_graph_records`). Then, on the
reader's side, what reading each table's row-digest record costs whole and with its refs left
undecoded (`inspector.read.row_digests`, as `laid_over` reads it).

    python -m benchmarks.digest_cost CAPTURE [--repeat 5]

Prints per rank 0 table its size, each step's time (best of --repeat) and the size of the row
digests', the symbol rows' and the scope events' payloads as shares of the table's bytes, then
the totals with MB/s and the record reads' totals.
"""

from __future__ import annotations

import argparse
import time

import orjson

from graphtrain_inspect.capture.shared import logformat, rank_tokens, row_digests, symbol_rows
from graphtrain_inspect.inspector.read import row_digests as digest_records
from graphtrain_inspect.inspector.read.capture_index import open_capture


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
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
                digest_records._payload_and_refs(log, drec)
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


if __name__ == "__main__":
    main()
