"""The report's compile-time picture: one lane per rank, each pass a span from its record's start
(`time`) for its wall time (`wall_s`), over a band for each torch.compile (from its first pass's
start to its last pass's end). All in page coordinates, drawn by the template as inline SVG (its
text, pass names included, escaped by Jinja like the rest of the page).

The ranks' clocks are their hosts' (epoch seconds): lanes of one host line up, lanes of several
hosts are as far apart as their clocks. Spans closer than a pixel are drawn as one (its tooltip
counts them), so a capture of 30k passes costs the page a few thousand rectangles, not 30k.
"""

from __future__ import annotations

import math
from typing import Any, Callable

WIDTH = 1100  # the plot's width in pixels, time axis
LEFT = 64  # room for the lane labels
LANE = 22  # a lane's height
MAX_LANES = 64  # ranks drawn (the rest counted under the picture)
MIN_SPAN = 1.5  # pixels: a pass of a microsecond stays visible


def _nice_step(total: float, ticks: int = 8) -> float:
    """A round tick interval (1, 2 or 5 times a power of ten) giving about `ticks` ticks."""
    raw = total / ticks if total > 0 else 1.0
    p = 10 ** math.floor(math.log10(raw))
    return next(m * p for m in (1, 2, 5, 10) if m * p >= raw)


def _seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    return f"{s * 1000:.1f} ms"


def _bands(r: int, passes: list, x: Callable[[float], float], scale: float) -> list[dict[str, Any]]:
    """A rank's compiles as bands behind its spans: from each compile's first pass to its last."""
    bands: dict[str, list[float]] = {}
    for p in passes:
        if p.compile_id:
            b = bands.setdefault(p.compile_id, [p.time, p.time])
            b[0] = min(b[0], p.time)
            b[1] = max(b[1], p.time + (p.wall_s or 0.0))
    return [
        {
            "x": round(x(a), 1),
            "w": round(max((b - a) * scale, MIN_SPAN), 1),
            "title": f"rank {r}: compile {cid}, {_seconds(b - a)} from its first pass to its last",
        }
        for cid, (a, b) in sorted(bands.items(), key=lambda kv: kv[1][0])
    ]


def _spans(r: int, passes: list, x: Callable[[float], float], scale: float, t0: float) -> list[dict[str, Any]]:
    """A rank's top-level passes as spans, in time order; passes that touch on the picture (and
    raised alike) are one span."""
    spans: list[dict[str, Any]] = []
    for p in sorted(passes, key=lambda p: p.time):
        if p.parent is not None:
            continue  # inside its parent's span
        left, wall = x(p.time), p.wall_s or 0.0
        right = max(left + wall * scale, left + MIN_SPAN)
        last = spans[-1] if spans else None
        if last is not None and left <= last["x"] + last["w"] + 1 and last["raised"] == (p.status != "ok"):
            last["w"] = round(max(last["x"] + last["w"], right) - last["x"], 1)
            last["n"] += 1
            last["wall"] += wall
            last["last"] = p.label
            continue
        spans.append(
            {
                "x": round(left, 1),
                "w": round(right - left, 1),
                "n": 1,
                "wall": wall,
                "first": p.label,
                "last": p.label,
                "at": p.time - t0,
                "raised": p.status != "ok",
            }
        )
    for s in spans:
        what = s["first"] if s["n"] == 1 else f"{s['n']} passes, {s['first']} to {s['last']}"
        status = " (raised)" if s["raised"] else ""
        s["title"] = f"rank {r}: {what}{status}: {_seconds(s['wall'])} at +{_seconds(s['at'])}"
    return spans


def lanes(cap: Any) -> dict[str, Any] | None:
    """The picture's geometry: lanes (rank, bands, spans), ticks, size; None when no pass of the
    capture has a time (torch's own logs, a capture of no pass)."""
    timed: dict[int, list] = {}
    for r in cap.ranks:
        ps = [p for p in cap.passes(r) if isinstance(p.time, (int, float))]
        if ps:
            timed[r] = ps
    if not timed:
        return None
    shown = sorted(timed)[:MAX_LANES]
    t0 = min(p.time for r in shown for p in timed[r])
    t1 = max(p.time + (p.wall_s or 0.0) for r in shown for p in timed[r])
    total = max(t1 - t0, 1e-6)
    scale = WIDTH / total

    def x(t: float) -> float:
        return LEFT + (t - t0) * scale

    out = []
    for i, r in enumerate(shown):
        y = 20 + i * LANE
        band_rects = _bands(r, timed[r], x, scale)
        spans = _spans(r, timed[r], x, scale, t0)
        out.append({"rank": r, "y": y, "bands": band_rects, "spans": spans})
    step = _nice_step(total)
    ticks = [
        {"x": round(x(t0 + k * step), 1), "label": _seconds(k * step) if k else "0"}
        for k in range(int(total / step) + 1)
    ]
    height = 20 + len(shown) * LANE + 24
    return {
        "lanes": out,
        "ticks": ticks,
        "width": LEFT + WIDTH + 16,
        "height": height,
        "axis_y": 20 + len(shown) * LANE + 2,
        "lane_h": LANE,
        "total": _seconds(total),
        "passes": sum(len(timed[r]) for r in shown),
        "left_out": len(timed) - len(shown),
    }
