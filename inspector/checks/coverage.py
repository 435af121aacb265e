"""What a `check` run looked at, in one line: a "no findings" is only as good as what was checked.

    checked: 9 checks over 2 ranks x 7 passes (16 graphs, 1,812 symbol uses); not run: codegen-...

Counted from the capture the checks read (its ranks, their passes and distinct graphs, the uses
recorded in the graphs' unbacked-symbol maps when the stale-symbol check ran) and the report's
`not_run` (a check listed there for part of its work, "device-baked (across ranks)", still ran).
A "no findings" line alone cannot tell a clean capture from one nothing was checked on.
"""

from __future__ import annotations

from typing import Any

from graphtrain_inspect.capture.shared import logformat


def checked_line(cap: Any, report: Any, only: list[str] | None = None) -> str:
    from graphtrain_inspect.inspector.checks import CHECKS

    ran = [k for k in CHECKS if not only or k in only]
    skipped = [n.check for n in report.not_run]
    # an entry may name several checks ("compile-failure, graph-break"); one with a "(part)" ran
    whole = {name for entry in skipped for name in entry.split(", ")}
    done = [k for k in ran if k not in whole]
    ranks = list(cap.ranks)
    passes = sorted({len(cap.passes(r)) for r in ranks})
    graphs = sum(len(cap.graphs(r)) for r in ranks)
    what = [_many(graphs, "graph")]
    if "stale-unbacked-symbol" in done:
        uses = _all_symbol_uses(cap, ranks)
        what.append(_many(uses, "symbol use"))
    span = "0" if not passes else str(passes[0]) if len(passes) == 1 else f"{passes[0]}-{passes[-1]}"
    line = (
        f"checked: {_many(len(done), 'check')} over {_many(len(ranks), 'rank')}"
        f" x {span} pass{'es' if span != '1' else ''} ({', '.join(what)})"
    )
    return line + (f"; not run: {', '.join(skipped)}" if skipped else "")


def _all_symbol_uses(cap: Any, ranks: list[int]) -> int:
    """The uses in every rank's graphs, each distinct symbol map decoded once: ranks that logged
    the same map (same graph id, same payload md5) count its uses without decoding it again (64
    ranks of a few graph classes would otherwise decode 64 copies)."""
    counted: dict[tuple, int] = {}
    total = 0
    for r in ranks:
        for gid in cap.graphs(r):
            key = cap.content_key(r, gid, logformat.SYMBOLS)
            if key not in counted:
                counted[key] = _symbol_uses(cap, r, gid)
            total += counted[key]
    return total


def _symbol_uses(cap: Any, rank: int, gid: str) -> int:
    """The graph's symbol uses: counted in the record's envelope by the capture (`uses`), else
    summed from the decoded map (older captures, maps derived from rows)."""
    rec = cap.graph_record(rank, gid, logformat.SYMBOLS)
    uses = rec.meta.get("uses") if rec is not None else None
    if type(uses) is int and uses >= 0:
        return uses
    table = cap.symbols(rank, gid) or {}
    return sum(int(s.get("uses") or 0) for s in (table.get("symbols") or {}).values() if isinstance(s, dict))


def _many(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'s' if n != 1 else ''}"
