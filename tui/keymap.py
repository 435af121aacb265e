"""User key bindings: every binding has an id, and a keymap file maps ids to keys.

    # ~/.config/graphtrain-inspect/keymap.toml  (or --keymap FILE, or $GTI_KEYMAP)
    "app.replay" = "ctrl+r"
    "diff.toggle-mode" = "m,s"

A `[keymap]` table is accepted too. Unknown ids are reported, not fatal.
"""

from __future__ import annotations

import os
from pathlib import Path

import tomllib


def default_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "graphtrain-inspect" / "keymap.toml"


def load_keymap(path: str | None = None) -> tuple[dict[str, str], list[str]]:
    """(binding id -> keys, problems). A missing default file is no problem; a missing named one is."""
    named = path or os.environ.get("GTI_KEYMAP")
    p = Path(named) if named else default_path()
    if not p.exists():
        return {}, ([f"{p}: no such keymap file"] if named else [])
    try:
        data = tomllib.loads(p.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        return {}, [f"{p}: {e}"]
    table = data.get("keymap", data)
    out, problems = {}, []
    for k, v in table.items():
        if isinstance(v, str):
            out[str(k)] = v
        else:
            problems.append(f'{p}: {k}: keys must be a string like "ctrl+r"')
    return out, problems
