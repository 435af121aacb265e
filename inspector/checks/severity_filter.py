"""Which findings a reader sees, and the lines that count them: one rule for `check`'s table and
the TUI (its Findings tab, its badges and its status line), so both tell the same story.

Shown: findings of at least the chosen severity (`check --severity`, the TUI's severity filter);
without a choice, errors and warnings, and a line says how many info findings are not shown and
how to see them. The counts add up: the headline counts what is shown, the line what is not.
"""

from __future__ import annotations

from typing import Any, Iterable

from graphtrain_inspect.inspector.checks.findings import SEVERITIES, SEVERITY_RANK

DEFAULT = "warning"  # what a table shows when nobody chose: info is left out


def at_least(findings: Iterable[Any], severity: str | None) -> list[Any]:
    """The findings of at least `severity` (None: the default)."""
    limit = SEVERITY_RANK[severity or DEFAULT]
    return [f for f in findings if SEVERITY_RANK.get(f.severity, 9) <= limit]


def hidden_info(findings: list[Any], severity: str | None) -> int:
    """Info findings left out because nobody asked for them (0 when a severity was chosen)."""
    return sum(1 for f in findings if f.severity == "info") if severity is None else 0


def counts(findings: Iterable[Any]) -> dict[str, int]:
    c = {s: 0 for s in SEVERITIES}
    for f in findings:
        c[f.severity] = c.get(f.severity, 0) + 1
    return c


def summary(shown: list[Any], hidden: int, how: str) -> tuple[str, str | None]:
    """(`N findings: E errors, W warnings[, I info][ (C consequences under them)]`, `H info
    findings not shown (HOW)` or None): info is counted in the headline only when it is shown; a
    finding counts once with its consequences (checks.root_causes) counted apart."""
    c = counts(shown)
    parts = [
        f"{c['error']} error{'s' if c['error'] != 1 else ''}",
        f"{c['warning']} warning{'s' if c['warning'] != 1 else ''}",
    ]
    if c["info"] or not hidden:
        parts.append(f"{c['info']} info")
    head = (f"{len(shown)} finding{'s' if len(shown) != 1 else ''}: " if shown else "no findings: ") + ", ".join(parts)
    under = sum(len(getattr(f, "consequences", None) or ()) for f in shown)
    if under:
        head += f" ({under} consequence{'s' if under != 1 else ''} under them)"
    return head, (f"{hidden} info finding{'s' if hidden != 1 else ''} not shown ({how})" if hidden else None)
