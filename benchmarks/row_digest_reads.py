"""What a capture's row digests (`gti_row_digests`) save `check`'s rank diffs, measured both ways.

    python -m benchmarks.row_digest_reads CAPTURE [--ranks 0,1] [--repeat 3]

For each stage whose graphs differ on the two ranks (each pair of graphs once): where the tables
have one layout, the rank diff made from their rows (`positional_rank_diff`); else the reading of
the two tables a structural rank diff decodes (`CheckContext.tables`), then all those tables read
in stage order in one capture, as `check` reads them (a row decoded for one table is not decoded
again for the next). Each with the digests read and with them ignored (`Capture.reads_row_digests`),
each run on a capture opened afresh (nothing cached) with the cyclic collector off as in `check`,
best of --repeat; the two diffs of a stage must list the same nodes.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable

from graphtrain_inspect.inspector.checks.tables_and_blame import CheckContext
from graphtrain_inspect.inspector.diff.row_rank_diff import positional_rank_diff
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.collector import no_gc


def best(path: str, enabled: bool, fn: Callable[[CheckContext], Any], repeat: int) -> tuple[Any, float]:
    out, t = None, float("inf")
    for _ in range(repeat):
        with open_capture(path) as cap, no_gc():  # as `check` runs (inspector/read/collector.py)
            cap.reads_row_digests = enabled
            ctx = CheckContext(cap)
            t0 = time.perf_counter()
            out = fn(ctx)
            t = min(t, time.perf_counter() - t0)
    return out, t


def _changed(d: Any) -> list[tuple]:
    return [(s.path, n.status, n.names) for s in d.subgraphs for n in s.nodes] if d is not None else []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture")
    ap.add_argument("--ranks", default="0,1")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    ra, rb = (int(x) for x in args.ranks.split(","))
    with open_capture(args.capture) as cap:
        ctx = CheckContext(cap)
        stages, seen = [], set()
        for key in ctx.index.keys:
            across = ctx.index.across(key)
            if ra not in across or rb not in across:
                continue
            ga, gb = across[ra].gid, across[rb].gid
            if (ga, gb) in seen or ctx.identical(ra, ga, rb, gb):
                continue
            seen.add((ga, gb))
            na, nb = (cap.graph(r, g).nodes for r, g in ((ra, ga), (rb, gb)))  # type: ignore[union-attr]
            stages.append((key.label(), ga, gb, na, nb))
    structural = []
    for label, ga, gb, na, nb in stages:
        if na == nb:

            def diff(ctx: CheckContext, ga: str = ga, gb: str = gb) -> Any:
                return positional_rank_diff(ctx.cap, ra, ga, ctx._stage_ctx(ra, ga), rb, gb, ctx._stage_ctx(rb, gb))

            d1, t1 = best(args.capture, True, diff, args.repeat)
            d0, t0 = best(args.capture, False, diff, args.repeat)
            same = "same nodes" if _changed(d1) == _changed(d0) else "DIFFERENT nodes"
            print(
                f"{label:32s} {na:6d} rows  rank diff by rows: digests {t1 * 1000:7.1f} ms, whole {t0 * 1000:7.1f} ms"
                f"  ({same})",
                flush=True,
            )
        else:
            structural.append((ga, gb))

            def read(ctx: CheckContext, ga: str = ga, gb: str = gb) -> Any:
                return ctx.tables(ra, ga), ctx.tables(rb, gb)

            _, t1 = best(args.capture, True, read, args.repeat)
            _, t0 = best(args.capture, False, read, args.repeat)
            print(
                f"{label:32s} {na:6d} vs {nb:6d} rows  its two tables: digests {t1 * 1000:7.1f} ms, whole"
                f" {t0 * 1000:7.1f} ms",
                flush=True,
            )
    if structural:

        def read_all(ctx: CheckContext) -> Any:
            return [(ctx.tables(ra, ga), ctx.tables(rb, gb)) for ga, gb in structural]

        _, t1 = best(args.capture, True, read_all, args.repeat)
        _, t0 = best(args.capture, False, read_all, args.repeat)
        print(
            f"the {2 * len(structural)} tables of the structural stages, in one capture: digests {t1:.3f} s,"
            f" whole {t0:.3f} s"
        )


if __name__ == "__main__":
    main()
