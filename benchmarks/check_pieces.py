"""Where one `graphtrain-inspect` command's time goes, without a profiler's overhead: the named
steps of the core wrapped with a timer, the command run once in this process.

    python -m benchmarks.check_pieces -- check -j 1 CAPTURE
    python -m benchmarks.check_pieces -- diff CAPTURE --pass NAME --nodes
    python -m benchmarks.check_pieces --tasks CAPTURE

Prints the imports' time, the command's, and per step its total wall seconds and calls (steps
nest: a rank diff holds the anchored diff it made). cProfile (`benchmarks.profile_command`) says
which functions; this says how long each step takes as the command runs. With `--tasks`: each
task `check -j N` hands a process (inspector/checks/parallel.py), with its weight, timed alone
in a fresh context (nothing cached, as a worker that gets it first), the cyclic collector off.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import io
import sys
import time
from typing import Any

TOTAL: collections.Counter = collections.Counter()
CALLS: collections.Counter = collections.Counter()


def _wrap(owner: Any, name: str, label: str) -> None:
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def timed(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            TOTAL[label] += time.perf_counter() - t0
            CALLS[label] += 1

    setattr(owner, name, timed)


def tasks(path: str) -> None:
    from graphtrain_inspect.inspector.checks import parallel
    from graphtrain_inspect.inspector.checks.tables_and_blame import CheckContext
    from graphtrain_inspect.inspector.read.capture_index import open_capture
    from graphtrain_inspect.inspector.read.collector import no_gc

    for group in parallel.tasks_for(CheckContext(open_capture(path))):
        for task in group:
            ctx = CheckContext(open_capture(path))
            with no_gc():
                t0 = time.perf_counter()
                parallel._do(ctx, task)
                s = time.perf_counter() - t0
            print(f"{task[0]:5s} weight {task[-1]:8d}  {s * 1000:7.1f} ms")


def main() -> int:
    args = sys.argv[1:]
    args = args[1:] if args[:1] == ["--"] else args
    if not args:
        print(__doc__)
        return 2
    if args[0] == "--tasks" and len(args) == 2:
        tasks(args[1])
        return 0
    from benchmarks.scale_bench import ROOT, compiled

    compiled(ROOT)
    t0 = time.perf_counter()
    from graphtrain_inspect.inspector import checks
    from graphtrain_inspect.inspector.checks import row_rank_diff, stale_unbacked_symbol, tables_and_blame
    from graphtrain_inspect.inspector.cli.main import main as cli_main
    from graphtrain_inspect.inspector.diff import anchored
    from graphtrain_inspect.inspector.read import capture_reader, row_digests

    for kind, mod in checks.check_modules().items():
        _wrap(mod, "run", f"check {kind}")
    steps = [
        (tables_and_blame.CheckContext, "rank_diff", "rank diffs"),
        (row_rank_diff, "_pairs_from_digests", "  positional, from digests"),
        (anchored, "_anchored_diff", "  anchored diffs"),
        (anchored, "_anchors", "    pairing the digests"),
        (anchored, "_lis", "    longest increasing run"),
        (anchored, "_named_gap_seeds", "    gap rows paired by name"),
        (capture_reader.Capture, "row_digests", "row-digest records laid over tables"),
        (capture_reader.Capture, "digest_rows", "rows read by digest"),
        (row_digests.RowDigests, "sub_refs", "refs checked"),
        (stale_unbacked_symbol, "_scopes_say_none", "stale: scope events"),
        (stale_unbacked_symbol, "_walked", "stale: graphs walked"),
        (capture_reader.Capture, "symbols", "symbol maps read"),
        (checks, "attach_sources", "findings' source lines"),
    ]
    for owner, name, label in steps:
        _wrap(owner, name, label)
    t1 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            cli_main(args)
        except SystemExit:
            pass
    t2 = time.perf_counter()
    print(f"imports {t1 - t0:.3f} s, the command {t2 - t1:.3f} s (in this process)")
    for label, s in sorted(TOTAL.items(), key=lambda kv: -kv[1]):
        print(f"  {label:44s} {s:7.3f} s  x{CALLS[label]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
