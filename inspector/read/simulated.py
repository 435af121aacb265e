"""What a simulated world's manifest (`capture --simulate-world`) says about each chosen rank:
which ran to the end, which failed or were stopped, which never ran. ls, check and the TUI say it
from here, and the checks read it before calling a capture with one rank's graphs a compile on
one rank (an interrupted world whose other ranks never ran is not)."""

from __future__ import annotations

from typing import Any

from graphtrain_inspect.capture.shared.rank_ranges import format_ranks


def rank_states(manifest: dict[str, Any] | None) -> dict[str, list[int]] | None:
    """{"ran": ranks that exited 0, "failed": exited otherwise or by a signal, "never_ran": chosen
    and not run}; None for a capture that is not a simulated world."""
    sim = (manifest or {}).get("simulated") if isinstance(manifest, dict) else None
    if not isinstance(sim, dict):
        return None
    per_rank = p if isinstance(p := sim.get("per_rank"), dict) else {}
    ran = {r for r in sim.get("ranks") or [] if isinstance(r, int)}
    ran.update(int(k) for k in per_rank if isinstance(k, str) and k.isdigit() and len(k) < 8)
    chosen = {r for r in (sim.get("chosen") or sim.get("ranks") or []) if isinstance(r, int)}
    chosen.update(r for r in sim.get("not_run") or [] if isinstance(r, int))
    failed = set()
    for r in ran:
        e = per_rank.get(str(r))
        if not isinstance(e, dict) or e.get("exit_code") != 0 or e.get("signal"):
            failed.add(r)
    return {"ran": sorted(ran - failed), "failed": sorted(failed), "never_ran": sorted(chosen - ran)}


def states_text(states: dict[str, list[int]], fmt) -> str:
    """'ran 0; failed 3; never ran 7,15' (the parts that are not empty)."""
    parts = [
        f"{label} {fmt(states[k])}"
        for k, label in (("ran", "ran"), ("failed", "failed or stopped"), ("never_ran", "never ran"))
        if states[k]
    ]
    return "; ".join(parts)


def simulated_line(m: dict | None) -> str | None:
    """The manifest's `simulated` (capture --simulate-world) in one line, for ls, check, the report
    and the TUI header."""
    sim = (m or {}).get("simulated")
    if not isinstance(sim, dict):
        return None
    ranks = [r for r in sim.get("ranks") or [] if isinstance(r, int)]
    line = (
        f"simulated: {len(ranks)} of {sim.get('world_size')} ranks ({format_ranks(ranks)}), hosts of "
        f"{sim.get('local_world_size')}, fake process group (no communication, no GPUs)"
    )
    stopped = [r for r in sim.get("stopped_after_passes") or [] if isinstance(r, int)]
    if stopped:
        line += f"; ranks {format_ranks(stopped)} stopped after their passes"
    states = rank_states(m)
    if states and (states["failed"] or states["never_ran"]):
        line += f"; {states_text(states, format_ranks)}"
    return line
