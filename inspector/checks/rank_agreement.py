"""Which ranks agree at every stage after rank normalization (`rank_classes`), as one line and
as groups: what `ls` prints under its ranks and the TUI puts in its sub-title. Ranks of a
pipeline-parallel mesh are compared within their pipeline stage (checks.pipeline_stages), as
`check` compares them.

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
    from graphtrain_inspect.inspector.checks.pipeline_stages import stage_groups
    from graphtrain_inspect.inspector.checks.rank_classes import RankClasses
    from graphtrain_inspect.inspector.diff.graph_diff import rank_context
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
    stages = stage_groups(ranks, lambda r: rank_context(cap, r).coordinates)
    if len(stages) > 1:
        return _by_stage(cap, classes, stages)
    return _agreement(cap, classes, ranks)


def _agreement(cap, classes, ranks: list[int], stage: tuple[str, int] | None = None) -> dict[str, Any]:
    """The line and groups of `ranks` (one pipeline stage's, or all), or why they were not compared."""
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
                **({"stage": _stage_json(stage)} if stage is not None else {}),
            }
            for members, first in groups
        ],
    }


def _by_stage(cap, classes, stages: list) -> dict[str, Any]:
    """Each pipeline stage's ranks compared among themselves (stages run different parts of the
    model: their graphs differ by design), as `check` compares them."""
    parts: list[str] = []
    groups: list[dict[str, Any]] = []
    for stage, members in stages:
        name = f"{stage[0]} {stage[1]}" if stage is not None else "no stage"
        if len(members) < 2:
            parts.append(f"{name}: rank {members[0]} alone")
            groups.append({"ranks": members, "differs_from": None, "pipeline": None, "stage": _stage_json(stage)})
            continue
        got = _agreement(cap, classes, members, stage)
        if got.get("line") is None:
            return got
        parts.append(f"{name}: {got['line']}")
        groups.extend(got["groups"])
    return {"line": "by pipeline stage: " + "; ".join(parts), "groups": groups}


def _stage_json(stage: tuple[str, int] | None) -> dict[str, int] | None:
    return {stage[0]: stage[1]} if stage is not None else None
