"""The compile-events section of `ls`: torch.compile's own story for one rank (the stack trie by
compile id as tlparse draws it, then every break, restart, recompile, failure and cache event
with its reason and source line), and its `ls --json` entry. Read by inspector.read.compile_events.
"""

from __future__ import annotations

from typing import Any

from graphtrain_inspect.inspector.read.compile_events import compile_story, missing_note, short_path

EVENT_ORDER = ("failure", "break", "restart", "recompile", "cache")
_STATUS_STYLE = {"failed": ("red", "bold"), "restarted": ("yellow",), "empty": ("dim",), "missing": ("dim",)}
_REASON_WIDTH = 150


def entry(cap: Any, rank: int) -> dict[str, Any] | None:
    """`ls --json`'s `compile` of a rank: compiles with their events and times; None without
    torch's logs."""
    story = compile_story(cap)
    if story.source is None:
        return None
    compiles = story.compiles(rank)
    return {
        "source": story.source,
        "counts": story.counts(rank),
        "compiles": [c.to_json() for c in compiles],
        "events": [e.to_json() for e in story.events(rank)],
        "trie": [
            {"depth": d, "frame": f.to_json(), "compile_ids": [c.compile_id for c in cs]}
            for d, f, cs in story.trie(rank)
        ],
    }


def note(cap: Any) -> str | None:
    """Why a capture has no compile events to show (it has compiles but no torch logs), or None."""
    why = missing_note(cap)
    return f"compile events: none read: {why}" if why else None


def signature(e: dict[str, Any] | None) -> tuple:
    """What must agree for two ranks' listings to be folded into one."""
    if not e:
        return ()
    return tuple(
        (
            c["compile_id"],
            c["status"],
            c["function"],
            c["line"],
            tuple((ev["kind"], ev["label"], ev["reason"]) for ev in c["events"]),
        )
        for c in e["compiles"]
    )


def rows(e: dict[str, Any] | None, st: Any) -> list[str]:
    """The section's text lines for one rank (empty when the rank compiled nothing)."""
    if not e or not e["compiles"]:
        return []
    counts = e["counts"]
    what = ", ".join(f"{counts[k]} {_plural(k, counts[k])}" for k in EVENT_ORDER if counts.get(k))
    total = sum(c["times_s"].get("total") or 0.0 for c in e["compiles"])
    lines = [
        st(
            f"  compile events: {counts['compiles']} compile{'s' if counts['compiles'] != 1 else ''}"
            + (f", {what}" if what else ", no breaks, restarts, recompiles or failures")
            + (f"; {total:.2f} s compiling" if total else ""),
            "bold",
        )
    ]
    status = {c["compile_id"]: c["status"] for c in e["compiles"]}
    for t in e["trie"]:
        f = t["frame"]
        ids = " ".join(st(f"[{cid}]", *_STATUS_STYLE.get(status.get(cid, ""), ())) for cid in t["compile_ids"])
        code = f"  {f['code']}" if f.get("code") else ""
        lines.append(
            "    "
            + "  " * t["depth"]
            + (ids + " " if ids else "")
            + f"{short_path(f['file'])}:{f['line']} in {f['fn'] or '?'}"
            + st(code, "dim")
        )
    events = sorted(e["events"], key=lambda ev: (EVENT_ORDER.index(ev["kind"]), _order(e, ev)))
    for ev in events:
        if ev["kind"] == "cache":
            continue
        lines.append("    " + event_line(ev, st))
    phases = _phases_line(e)
    if phases:
        lines.append("    " + phases)
    cache = _cache_line(e)
    if cache:
        lines.append("    " + cache)
    return lines


def _phases_line(e: dict[str, Any]) -> str | None:
    """Compile time per phase, summed over the rank's compiles, as torch measured it."""
    total: dict[str, float] = {}
    for c in e["compiles"]:
        for k, v in c["times_s"].items():
            total[k] = total.get(k, 0.0) + v
    shown = [(k, v) for k, v in total.items() if k != "total" and v >= 0.0005]
    return "time per phase: " + ", ".join(f"{k} {v:.2f} s" for k, v in shown) if shown else None


def event_line(ev: dict[str, Any], st: Any) -> str:
    """One event in one line: label, kind, where, code, reason (and resume function, fallback)."""
    kind = ev["kind"]
    style = {"failure": ("red", "bold"), "break": ("yellow",), "restart": ("yellow",), "recompile": ("cyan",)}.get(
        kind, ()
    )
    fr = ev.get("frame") or {}
    where = f"{short_path(fr['file'])}:{fr['line']}" if fr.get("file") else ""
    code = f"  {fr['code']}" if fr.get("code") else ""
    text = ev["guard"] if kind == "recompile" else ev["reason"]
    tail = ""
    if kind == "break" and ev.get("resume"):
        tail = f"  (resumes in {ev['resume']})"
    elif kind == "failure":
        tail = (
            "  (fell back to eager)"
            if ev.get("fell_back")
            else "  (raised: not run eagerly)"
            if ev.get("fell_back") is False
            else ""
        )
    head = f"{ev['label']:<8} " + st(f"{kind:<9}", *style)
    if kind == "recompile":
        return head + f" {fr.get('fn') or ''} {where}  guard failed: {_cut(text or '?')}"
    return head + f" {where}" + st(code, "dim") + f"  {_cut(text or '')}" + tail


def _cache_line(e: dict[str, Any]) -> str | None:
    total: dict[str, int] = {}
    for c in e["compiles"]:
        for k, n in c["cache"].items():
            total[k] = total.get(k, 0) + n
    if not total:
        return None
    return "cache: " + ", ".join(f"{k} {n}" for k, n in sorted(total.items()))


def _order(e: dict[str, Any], ev: dict[str, Any]) -> int:
    ids = [c["compile_id"] for c in e["compiles"]]
    return ids.index(ev["compile_id"]) if ev["compile_id"] in ids else len(ids)


def _plural(kind: str, n: int) -> str:
    word = {
        "failure": "failure",
        "break": "graph break",
        "restart": "restart",
        "recompile": "recompile",
        "cache": "cache event",
    }[kind]
    return word + ("s" if n != 1 else "")


def _cut(text: str) -> str:
    return text if len(text) <= _REASON_WIDTH else text[: _REASON_WIDTH - 1] + "…"
