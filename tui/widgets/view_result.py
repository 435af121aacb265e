"""What a view draws a worker's result with, and what it hands back to the app.

Each view widget has `show_result(payload, extra, ctx) -> Drawn`: it draws the payload its job
computed (`extra`: the job's second value) and returns the title and status lines for the app to
put above it. The app routes a `ViewReady` to the view's widget without knowing its API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class ResultContext:
    """What a view needs besides its payload to draw a result."""

    place: Any  # tui.session.Place the result was computed for
    label: str  # the place as the tree names it
    session: Any  # tui.session.CaptureSession, or None
    unreadable: Callable[[str], str]  # what could not be read -> the line saying so (and why)
    shown: Any = None  # the key of what this view showed last (a graph kept in place when it comes back)


@dataclass
class Drawn:
    """What the view drew: `title` and `status` for the app's lines above it (None: left as they
    are), `key` for `ResultContext.shown` next time (None: kept)."""

    title: str | None = None
    key: Any = None
    status: str | None = None
