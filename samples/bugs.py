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


def from_argv() -> None:
    """Set the switches from `--bug` options in sys.argv, as `graphtrain_inspect.samples.train` did.

    For `graphtrain-inspect replay ... --setup graphtrain_inspect.samples.bugs:from_argv`: replay runs setup hooks
    with sys.argv set to the captured rank's command line, so a replayed pass sees the switches
    the captured run had.
    """
    import sys

    argv = sys.argv[1:]
    names = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--bug"]
    names += [a.split("=", 1)[1] for a in argv if a.startswith("--bug=")]
    reset()
    enable([n for n in names if n in ALL])
