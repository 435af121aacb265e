"""The compile-events view's rows: every compile of every rank in the order torch started them,
each followed by its breaks, restarts and recompiles, a failed compile's row its failure. Plain
data made from `compile_events.CompileStory`, for the TUI's compile view to draw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphtrain_inspect.inspector.read.compile_events import CompileStory, short_path


@dataclass(frozen=True)
class CompileRow:
    """One row: a compile (event None) or one of its events."""

    rank: int
    compile_id: str
    label: str  # [0/1], [0/0_1]
    what: str  # the compile's status or the event's kind
    function: str
    where: str  # file:line
    text: str  # reason, guard, or the compile's times
    frame: dict[str, Any] | None  # file, line, fn, code
    detail: str  # the whole reason torch logged


def compile_rows(story: CompileStory) -> list[CompileRow]:
    """The rows of every rank, compiles in order, each followed by its events (cache events are
    counted on the compile's row)."""
    rows: list[CompileRow] = []
    for rank in sorted(story.by_rank):
        for c in story.compiles(rank):
            f = c.frame
            times = c.times.get("total")
            cache = ", ".join(f"{k} {n}" for k, n in sorted(c.cache.items()))
            text = (f"{times:.2f} s" if times is not None else "") + (f" · cache: {cache}" if cache else "")
            failure = next((e for e in c.events if e.kind == "failure"), None)
            if failure is not None:
                # the failed compile's row is its failure: the line that failed, fell back or raised
                how = (
                    "fell back to eager" if failure.fell_back else "raised" if failure.fell_back is False else "failed"
                )
                text = f"{how} · {failure.reason}"
                f = failure.frame or f
            phases = "time per phase: " + ", ".join(f"{k} {v:.3f} s" for k, v in c.times.items()) if c.times else ""
            rows.append(
                CompileRow(
                    rank,
                    c.compile_id,
                    c.label,
                    c.status,
                    c.function or "?",
                    f"{short_path(f.file)}:{f.line}" if f else "",
                    text,
                    f.to_json() if f else None,
                    failure.detail if failure else phases,
                )
            )
            for e in c.events:
                if e.kind in ("cache", "failure"):
                    continue
                fr = e.frame
                text = (
                    f"guard failed: {e.guard}"
                    if e.kind == "recompile"
                    else e.reason + (f"  (resumes in {e.resume})" if e.resume else "")
                )
                rows.append(
                    CompileRow(
                        rank,
                        c.compile_id,
                        e.label,
                        e.kind,
                        (fr.name if fr and fr.name else c.function) or "?",
                        f"{short_path(fr.file)}:{fr.line}" if fr else "",
                        text,
                        fr.to_json() if fr else None,
                        e.detail,
                    )
                )
    return rows
