"""The findings of two runs matched: new, gone, or the same finding with another grade or on
other ranks (`compare BASE NEW`).

A finding is the same in both runs when its identity is: kind, layer (graph or generated code),
pipeline, the pass that introduced it (a renamed pass by its counterpart), subgraph and node, and
the ranks it is on, the new run's ranks taken through the rank pairing (a rank with no counterpart
is its own). Findings equal in all of that pair first, in order; those left pair without their
ranks (the same problem on other ranks), then, where they name a node, without the pass that
introduced them either (a pass edited so that the problem comes in earlier or later). Severity and
message are not identity: a finding whose severity differs has changed grade. Nothing depends on
a kind: a check added later is matched the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Hashable

from graphtrain_inspect.inspector.checks.findings import SEVERITY_RANK, Finding

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.checks.two_runs import TwoRuns

NEW, GONE, GRADED, RANKS, MOVED = "new", "gone", "graded", "ranks", "moved"


@dataclass
class FindingChange:
    """`status`: new, gone, graded (another severity), ranks (on other ranks), moved (introduced
    by another pass); `base`/`new` the finding in each run (None where it has none)."""

    status: str
    base: Finding | None
    new: Finding | None

    @property
    def finding(self) -> Finding:
        f = self.new if self.new is not None else self.base
        assert f is not None
        return f

    def adds_error(self) -> bool:
        """A new error, or a finding graded up to error: what makes `compare` exit 1."""
        if self.new is None or self.new.severity != "error":
            return False
        return self.base is None or self.base.severity != "error"

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "base": self.base.to_json() if self.base is not None else None,
            "new": self.new.to_json() if self.new is not None else None,
        }


def match_findings(base: list[Finding], new: list[Finding], runs: "TwoRuns") -> list[FindingChange]:
    """The findings that differ between the runs (those the same in both are left out), graded
    and new ones first by severity, then gone ones."""
    to_base = runs.ranks.new_of()
    renamed: dict[tuple[str | None, str | None], str | None] = {
        (k.pipeline, v.pass_name): k.pass_name for k, v in runs.new_key.items() if k.pass_name != v.pass_name
    }

    def ranks_b(f: Finding) -> tuple:
        return tuple(sorted(f.ranks))

    def ranks_n(f: Finding) -> tuple:
        return tuple(sorted((to_base[r], 0) if r in to_base else (r, 1) for r in f.ranks))

    def intro_n(f: Finding) -> str | None:
        return renamed.get((f.pipeline, f.introduced_by), f.introduced_by)

    def where(f: Finding, intro: str | None) -> tuple:
        return (f.kind, f.layer, f.pipeline, intro, f.subgraph or "", f.node)

    keys_b: list[Callable[[Finding], Hashable]] = [
        lambda f: (*where(f, f.introduced_by), tuple((r, 0) for r in ranks_b(f))),
        lambda f: where(f, f.introduced_by),
        lambda f: (f.kind, f.layer, f.pipeline, f.subgraph or "", f.node) if f.node else None,
    ]
    keys_n: list[Callable[[Finding], Hashable]] = [
        lambda f: (*where(f, intro_n(f)), ranks_n(f)),
        lambda f: where(f, intro_n(f)),
        lambda f: (f.kind, f.layer, f.pipeline, f.subgraph or "", f.node) if f.node else None,
    ]
    left_b, left_n = list(base), list(new)
    out: list[FindingChange] = []
    for level, (kb, kn) in enumerate(zip(keys_b, keys_n)):
        waiting: dict[Hashable, list[Finding]] = {}
        for f in left_b:
            k = kb(f)
            if k is not None:
                waiting.setdefault(k, []).append(f)
        paired_b: set[int] = set()
        rest_n: list[Finding] = []
        for f in left_n:
            k = kn(f)
            got = waiting.get(k) if k is not None else None
            if not got:
                rest_n.append(f)
                continue
            fb = got.pop(0)
            paired_b.add(id(fb))
            change = _change(level, fb, f, tuple((r, 0) for r in ranks_b(fb)) != ranks_n(f))
            if change is not None:
                out.append(change)
        left_b = [f for f in left_b if id(f) not in paired_b]
        left_n = rest_n
    out.extend(FindingChange(NEW, None, f) for f in left_n)
    out.extend(FindingChange(GONE, f, None) for f in left_b)
    order = {GRADED: 0, NEW: 0, MOVED: 1, RANKS: 1, GONE: 2}
    out.sort(key=lambda c: (order[c.status], SEVERITY_RANK.get(c.finding.severity, 9)))
    return out


def _change(level: int, fb: Finding, fn: Finding, other_ranks: bool) -> FindingChange | None:
    if fb.severity != fn.severity:
        return FindingChange(GRADED, fb, fn)
    if level == 2:
        return FindingChange(MOVED, fb, fn)
    if other_ranks:
        return FindingChange(RANKS, fb, fn)
    return None
