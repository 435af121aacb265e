"""Where a check's structural diffs spend their time, by subgraph: `diff_subgraph` timed around
each call during `check --json -j 1 CAPTURE`, grouped by whether the two subgraphs' rows are equal
and by the diff's status. Tells whether hashing subgraphs (to skip equal ones) would pay.

    python -m benchmarks.subgraph_diff_cost CAPTURE
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import time

from graphtrain_inspect.inspector.cli.main import main as cli
from graphtrain_inspect.inspector.diff import graph_diff


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture")
    args = ap.parse_args()
    real = graph_diff.diff_subgraph
    calls: list[tuple[float, bool, int, str]] = []

    def timed(a, b, *rest, **kw):
        t0 = time.perf_counter()
        d = real(a, b, *rest, **kw)
        equal = a is not None and b is not None and a.nodes == b.nodes
        calls.append((time.perf_counter() - t0, equal, len(a.nodes) if a is not None else 0, d.status))
        return d

    graph_diff.diff_subgraph = timed  # _diff_tables looks it up in the module at each call
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        cli(["check", "--json", "-j", "1", args.capture])
    total = time.perf_counter() - t0
    groups: dict[tuple, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0])
    for s, equal, rows, status in calls:
        g = groups[(equal, status)]
        g[0] += 1
        g[1] += s
        g[2] += rows
    print(f"check: {total:.2f} s")
    for (equal, status), (n, s, rows) in sorted(groups.items()):
        print(f"rows {'equal' if equal else 'differ'}, diff {status}: {n} subgraphs, {rows:,} rows, {s:.3f} s")


if __name__ == "__main__":
    main()
