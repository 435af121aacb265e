"""The cyclic garbage collector off while the core builds what it reads.

Reading a capture, diffing graphs and checking them allocate millions of small objects that
form no cycles (decoded rows, node diffs, records), and keep most of them until the command
ends. With the collector on, every few thousand allocations it rescans all of them: on a 64-rank
capture of 5k-node graphs `check` took 1.79 s with it and 0.56 s without, and on two ranks of
30k-node graphs that differ 3.66 s and 2.88 s, with the same peak memory (their objects are
freed by reference counting; BENCHMARKS.md, session 10). A command that ends after one read
(`ls`, `diff`, `check`, `report`) turns it off for good (cli/main.py: turned back on at the end,
it would rescan everything once more as the process exits: 0.3 s of the 30k-node check); the
core turns it off around its own heavy work (`check_report`, diffs, the stale-symbol walk), which
covers the TUI's jobs.
"""

from __future__ import annotations

import gc
from typing import Any


class no_gc:
    """Cyclic GC off inside the block, as it was after it (blocks nest)."""

    def __enter__(self) -> None:
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: Any) -> None:
        if self.was:
            gc.enable()
