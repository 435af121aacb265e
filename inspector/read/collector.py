"""The cyclic garbage collector off while the core builds what it reads.

Reading a capture, diffing graphs and checking them allocate millions of small objects that
form no cycles (decoded rows, node diffs, records), and keep most of them until the command
ends. With the collector on, every few thousand allocations it rescans all of them: on two
ranks of 30k-node graphs that differ `check` took 3.09 s with it on outside the diffs and 2.56 s
with it off throughout, the same report (4-7% on the 64-
and 1,024-rank benchmark captures); what they build is freed by reference
counting. A command that ends after one read (`ls`, `diff`, `check`, `report`) turns it off for
good (cli/main.py: turned back on at the end, it would rescan everything once more as the
process exits); the core turns it off around its own heavy work (`check_report`, diffs, the
stale-symbol walk), which covers the TUI's jobs. The TUI starts with it off until its first tree
is painted (`pause`, `resume`): importing the app and indexing the first records then take 8-9%
less time to the first tree (975 -> 883 ms on the 1 GB benchmark capture, `python -m benchmarks tui`).
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


_paused = False


def pause() -> None:
    """Off until `resume` (a start-up that allocates much and frees little: the TUI's)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """On again if `pause` turned it off; otherwise as it is."""
    global _paused
    if _paused:
        _paused = False
        gc.enable()
