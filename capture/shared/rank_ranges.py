"""Rank lists in the compact notation of torchrun-sized worlds: `0-7,16-23`.

One definition for the launcher (`--simulate-ranks`, its summary) and the readers' renderers
(`ls`, `check` evidence), which may take it from capture like the log format itself.
"""

from __future__ import annotations

from typing import Iterable


def format_ranks(ranks: Iterable[int]) -> str:
    """[0, 1, 2, 3, 8, 9, 15] -> '0-3,8-9,15' (sorted, duplicates dropped)."""
    rs = sorted({int(r) for r in ranks})
    parts: list[str] = []
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        parts.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ",".join(parts)


def brief_ranks(ranks: Iterable[int], limit: int = 80) -> str:
    """`format_ranks`, shortened for reading where it would run past `limit` characters (a class
    of 512 ranks of a 1,024-rank world is 256 ranges): a periodic set as its first period, the
    period, its end and its count (`0-1, repeating every 4 ranks up to 1021 (512 ranks)`), any
    other as its first ranges and the count (`0-3,8,11,... (300 ranks)`). Not for input: `parse_ranks` reads only
    `format_ranks`."""
    rs = sorted({int(r) for r in ranks})
    full = format_ranks(rs)
    if len(full) <= limit:
        return full
    lo, hi = rs[0], rs[-1]
    members = set(rs)
    for period in range(2, (hi - lo + 1) // 4 + 1):
        # the same ranks in every stretch of `period` from the lowest on: a stride of the mesh
        if all((r + period in members) == (r in members) for r in range(lo, hi + 1 - period)):
            first = format_ranks(r for r in rs if r < lo + period)
            return f"{first}, repeating every {period} ranks up to {hi} ({len(rs)} ranks)"
    head = full[: full.rfind(",", 0, limit)] if "," in full[:limit] else full[:limit]
    return f"{head},... ({len(rs)} ranks)"


def parse_ranks(text: str, world: int) -> list[int]:
    """'0,3,9-15' -> sorted distinct ranks in [0, world); ValueError with a one-line reason."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo_s, dash, hi_s = part.partition("-")
        try:
            lo = int(lo_s)
            hi = int(hi_s) if dash else lo
        except ValueError:
            raise ValueError(f"{part!r} is not a rank or a range like 8-15") from None
        if lo > hi:
            raise ValueError(f"{part!r} is an empty range")
        out.update(range(lo, hi + 1))
    if not out:
        raise ValueError("no rank given")
    bad = [r for r in out if not 0 <= r < world]
    if bad:
        raise ValueError(f"rank {max(bad)} is outside a world of {world} ranks")
    return sorted(out)


def values_by_rank(values: dict, show=repr, *, prefix: str = "rank ", sep: str = ": ", spell_out: int = 8) -> str:
    """A value per rank as text: `rank 0: 0, rank 1: 1` for a few ranks; for more (a simulated
    world), the ranks of each value compactly: `ranks 0-7,16-23: 0; ranks 8-15,24-31: 1`."""
    if len(values) <= spell_out:
        return ", ".join(f"{prefix}{r}{sep}{show(values[r])}" for r in sorted(values, key=_order))
    by: dict[str, list[int]] = {}
    for r, v in values.items():
        try:
            by.setdefault(show(v), []).append(int(r))
        except (TypeError, ValueError):  # not rank numbers: spell them out
            return ", ".join(f"{prefix}{r}{sep}{show(values[r])}" for r in sorted(values, key=_order))
    return "; ".join(f"ranks {format_ranks(rs)}: {v}" for v, rs in sorted(by.items(), key=lambda kv: min(kv[1])))


def _order(r) -> tuple:
    try:
        return (0, int(r), "")
    except (TypeError, ValueError):
        return (1, 0, str(r))
