"""A rank diff's normalized code read both ways, on every graph of every rank: from the collective
rows alone (found by the table's row digests: `graph_diff.collective_rows`, what `diff --ranks`
and the TUI read) and from the whole decoded table. Prints per capture the graphs compared, how
many read by their digests, and how many normalize to the same lines; exit 1 if any differs.

    python -m benchmarks.rank_text_agreement CAPTURE...
"""

from __future__ import annotations

import sys

from graphtrain_inspect.inspector.diff import graph_diff
from graphtrain_inspect.inspector.read.capture_index import open_capture


def main(paths: list[str]) -> int:
    bad = 0
    for path in paths:
        n = by_digests = same = 0
        with open_capture(path) as cap:
            for rank in cap.ranks:
                for gid in sorted(cap.graphs(rank)):
                    code = cap.graph_code(rank, gid)
                    if code is None:
                        continue
                    ctx = graph_diff.rank_context(cap, rank, gid)
                    whole = graph_diff.normalize_code(code, graph_diff.graph_normalizer(cap.node_table(rank, gid), ctx))
                    n += 1
                    by_digests += graph_diff.collective_rows(cap, rank, gid) is not None
                    same += graph_diff.rank_text(cap, rank, gid) == whole
        bad += same != n
        print(f"{path}: {n} graphs, {by_digests} read by their digests, {same} the same")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
