"""Bug switches (``--bug NAME``), all off by default.

The passes and the model read these flags through :func:`enabled`; the
training CLI sets them with :func:`enable`.  See samples/README.md for what
each switch plants and what a checker should report.
"""

from __future__ import annotations

ALL = ("rank-baked", "device-literal", "stale-symbol", "rank-divergent")

_ENABLED: set[str] = set()


def enable(names) -> None:
    for n in names:
        if n not in ALL:
            raise ValueError(f"unknown bug switch {n!r}; choose from {', '.join(ALL)}")
        _ENABLED.add(n)


def reset() -> None:
    _ENABLED.clear()


def enabled(name: str) -> bool:
    if name not in ALL:
        raise ValueError(f"unknown bug switch {name!r}")
    return name in _ENABLED


def active() -> list[str]:
    return sorted(_ENABLED)
