"""The TUI header says when a capture is a simulated world (capture --simulate-world)."""

from __future__ import annotations

import json
import shutil

from tests.tui_support import opened


async def test_header_names_the_simulated_world(tui_small_capture, tmp_path):
    cap = tmp_path / "sim"
    shutil.copytree(tui_small_capture, cap)
    m = json.loads((cap / "manifest.json").read_text())
    m["simulated"] = {"world_size": 16, "local_world_size": 8, "ranks": [0, 1], "stopped_after_passes": [0, 1]}
    (cap / "manifest.json").write_text(json.dumps(m))
    async with opened(cap) as (app, _pilot):
        assert "simulated: 2 of 16 ranks (0-1), hosts of 8" in app.sub_title
    async with opened(tui_small_capture) as (app, _pilot):  # a real run: nothing said
        assert "simulated" not in app.sub_title
