"""The structural alignment against a compiled LCS of the same rows: time, and the pairs that differ.

    python -m benchmarks.align_lcs CAPTURE [--pass NAME] [--ranks 0,1] [--repeat 3]

For each stage whose graphs differ in node count across the two ranks (a structural rank diff, the
case `check` spends its time on when ranks differ), the root graphs' rows are aligned twice:

* `align.align_indices` (what the diff does: prefix and suffix scans, unique-key anchors, propagation
  along edges, gaps), after `Parts` made each row's pieces (signature, literals, inputs);
* rapidfuzz's `LCSseq.editops` over each row's local key as an integer id (the same keys the
  anchors use: signature, normalized literals, input signatures), on the whole graph.

Prints per stage: the time of Parts (per-row Python, shared by both), of `align_indices`, of the keys and of
the LCS; how many pairs each makes; and how many of `align_indices`'s pairs the LCS does not make. A
compiled aligner is a drop-in only where that last figure is 0: a different pairing is a different
diff, and a different rank-divergent finding's evidence.
"""

from __future__ import annotations

import argparse
import time

from rapidfuzz.distance import LCSseq

from graphtrain_inspect.inspector.checks.tables_and_blame import CheckContext
from graphtrain_inspect.inspector.diff import align
from graphtrain_inspect.inspector.diff.row_parts import Parts
from graphtrain_inspect.inspector.read.capture_index import open_capture


def best(fn, repeat: int):
    out, t = None, float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        t = min(t, time.perf_counter() - t0)
    return out, t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture")
    ap.add_argument("--pass", dest="pass_name")
    ap.add_argument("--ranks", default="0,1")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    ra, rb = (int(x) for x in args.ranks.split(","))
    ctx = CheckContext(open_capture(args.capture))
    for key in ctx.index.keys:
        if args.pass_name and key.pass_name != args.pass_name:
            continue
        across = ctx.index.across(key)
        if ra not in across or rb not in across:
            continue
        ta, tb = ctx.tables(ra, across[ra].gid), ctx.tables(rb, across[rb].gid)
        if ta is None or tb is None or ta.node_count == tb.node_count:
            continue
        rows_a, rows_b = ta.graphs[0].nodes, tb.graphs[0].nodes
        na, nb = ctx.normalizer(ra, across[ra].gid), ctx.normalizer(rb, across[rb].gid)
        (pa, pb), t_parts = best(lambda: (Parts(rows_a, na.leaf), Parts(rows_b, nb.leaf)), args.repeat)
        (_, _, pairs), t_align = best(lambda: align.align_indices(pa, pb), args.repeat)

        def keys():
            ids: dict[tuple, int] = {}
            return pa.keys(ids), pb.keys(ids)

        (ka, kb), t_keys = best(keys, args.repeat)

        def lcs():
            return [
                (blk.a + k, blk.b + k) for blk in LCSseq.editops(ka, kb).as_matching_blocks() for k in range(blk.size)
            ]

        lcs_pairs, t_lcs = best(lcs, args.repeat)
        missing = len(set(pairs) - set(lcs_pairs))
        print(
            f"{key.label():32s} {len(rows_a):6d} vs {len(rows_b):6d} rows  Parts {t_parts:.3f} s  align_indices "
            f"{t_align:.3f} s ({len(pairs)} pairs)  "
            f"keys {t_keys:.3f} s + LCS {t_lcs:.3f} s ({len(lcs_pairs)} pairs)  align_indices's pairs the LCS "
            f"lacks: {missing}",
            flush=True,
        )


if __name__ == "__main__":
    main()
