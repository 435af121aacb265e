"""Which ranks agree at every stage after rank normalization (`rank_classes`), as one line and
as groups: what `ls` prints under its ranks and the TUI puts in its sub-title.

Reading the node tables is what it costs, so by default it is made only while the tables left to
read (those without a digest the capture wrote) are small (CLASSES_AUTO_BYTES); `ls --classes`
forces it.
"""

from __future__ import annotations

from typing import Any

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.capture.shared.terminal_text import fmt_bytes

# node-table bytes ls reads by itself to compare ranks (beyond: `ls --classes`); ls otherwise reads
# envelope lines only, a few ms per thousand records whatever the payloads weigh (and the digests
# the capture wrote there: tables with one are not read)
CLASSES_AUTO_BYTES = 16 << 20


def rank_agreement(cap, ranks: list[int], *, force: bool | None = None) -> dict[str, Any] | None:
    """Which ranks agree at every stage after rank normalization (checks.rank_classes): the line
    ls prints, and the groups with the first stage where each differs from the largest. Made
    when `force`, or when None and the distinct node tables weigh at most CLASSES_AUTO_BYTES."""
    if len(ranks) < 2 or force is False:
        return None
    # imported here: `ls` imports this module, and pays for the classes only when it compares
    from graphtrain_inspect.inspector.checks.rank_classes import RankClasses
    from graphtrain_inspect.inspector.read.stages import StageIndex

    classes = RankClasses(cap, StageIndex(cap))
    if force is None:
        # what is left to read: the tables whose digest the capture did not write
        tables: dict[tuple, int] = {}
        for r in ranks:
            for gid, ref in cap.graphs(r).items():
                rec = ref.records.get(logformat.NODES)
                if rec is not None and not classes.free(r, gid):
                    tables[cap.content_key(r, gid)] = rec.end - rec.payload_start
        weight = sum(tables.values())
        if weight > CLASSES_AUTO_BYTES:
            return {
                "line": None,
                "skipped": f"not compared across ranks: {fmt_bytes(weight)} of node tables to read (ls --classes)",
            }
    groups = classes.agreement(ranks)
    if groups is None:
        # format 1 wrote tables that are not one row per line; a newer log only misses it by damage
        fmt = (cap.header(ranks[0]) or {}).get("format_version")
        why = "log format 1" if fmt == 1 else f"log format {fmt}, a table did not read back row by row"
        return {
            "line": None,
            "skipped": f"not compared across ranks: node tables not laid out one row per line ({why})",
        }
    return {
        "line": classes.summary_line(ranks),
        "groups": [
            {
                "ranks": list(members),
                "differs_from": first.label() if first is not None else None,
                "pipeline": first.pipeline if first is not None else None,
            }
            for members, first in groups
        ],
    }
