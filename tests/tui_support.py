"""Captures and helpers for the TUI tests.

`small_capture(dir)` writes a deterministic 2-rank capture (hand-built graphs, the real record
format) with one rank-baked constant introduced by a pass: the same bytes on every machine, so
SVG snapshots of the app on it are stable. `settle(pilot)` waits for the app's workers and the
messages they post, instead of sleeping.
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from pathlib import Path

from graphtrain_inspect.capture.shared import logformat


def _graphs(rank: int):
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    def traced(x, w):
        y = torch.ops.aten.mm.default(x, w)
        z = torch.ops.aten.relu.default(y)
        d = torch.ops.aten.detach.default(z)  # noqa: F841 - dead code for the first pass
        return torch.ops.aten.sum.default(z)

    def no_dead(x, w):
        y = torch.ops.aten.mm.default(x, w)
        z = torch.ops.aten.relu.default(y)
        return torch.ops.aten.sum.default(z)

    def sharded(x, w):
        y = torch.ops.aten.mm.default(x, w)
        z = torch.ops.aten.relu.default(y)
        s = torch.ops.aten.select.int(z, 0, rank)  # the bug: this rank's row, baked in
        return torch.ops.aten.sum.default(s)

    args = (torch.randn(4, 8), torch.randn(8, 4))
    return [make_fx(f, tracing_mode="fake")(*args) for f in (traced, no_dead, sharded)]


def small_capture(directory, *, world: int = 2, status: str = "finished") -> str:
    from tests.small_captures import CaptureWriter, mesh_rank_table

    w = CaptureWriter(directory, world_size=world)
    for r in range(world):
        rw = w.rank(r, rank_table=mesh_rank_table(r, (world,), ("dp",)), own_device="cpu")
        g0, g1, g2 = _graphs(r)
        rw.apply("remove_dead_code", g0, g1)
        rw.apply("shard_rows", g1, g2)
        rw.apply("noop", g2, g2)
        rw.end()
    return w.finish(status=status)


# Terminal escapes a hostile (or unlucky) capture may hold: clear screen and colour, an OSC window
# title ended by BEL, a carriage return that overwrites the line, a backspace, a C1 CSI.
HOSTILE = {
    "pass": "remove_dead_code\x1b[2J\x1b[31mRED",
    "pass2": "shard\x1b]0;pwned-title\x07_rows",
    "raise": "boom\rFAKE: no findings\x08\x9b2J",
    "message": "bad shape\x1b[2J\x1b]0;pwned\x07 at\r step",
    "source": 'File "/work/model\x1b]0;t\x07.py", line 7, in forward | s = z[rank]  # \x1b[2J\x1b[31mRED\r',
}


# A name holding every character capture.shared.terminal_text escapes (C0 but newline and tab, DEL, C1,
# the bidi and invisible format controls), NUL excepted (no file name can hold it).
EVERY_ESCAPED = "".join(
    chr(c)
    for c in [
        *range(0x01, 0x09),
        *range(0x0B, 0x20),
        *range(0x7F, 0xA0),
        *range(0x200B, 0x2010),
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
        0xFEFF,
    ]
)
HOSTILE["every"] = "bidi\u202eexe.txt" + EVERY_ESCAPED


def hostile_capture(directory, *, world: int = 2) -> str:
    """small_capture's 2-rank rank-baked bug with escapes where a capture holds text: pass names,
    an exception message, a capture error and the source line of the finding's node, written
    with the project's own log-format module as an attacker editing a capture would."""
    from tests.small_captures import CaptureWriter, mesh_rank_table

    w = CaptureWriter(directory, world_size=world)
    for r in range(world):
        rw = w.rank(r, rank_table=mesh_rank_table(r, (world,), ("dp",)), own_device="cpu")
        g0, g1, g2 = _graphs(r)
        for n in g2.graph.nodes:
            if n.op == "call_function" and "select" in str(n.target):
                n.meta["stack_trace"] = HOSTILE["source"].replace(" | ", "\n    ")
        rw.apply(HOSTILE["pass"], g0, g1)
        rw.apply(HOSTILE["pass2"], g1, g2)
        rw.apply(HOSTILE["raise"], g2, None, exception=ValueError(HOSTILE["message"]))
        rw.apply(HOSTILE["every"], g1, g2)
        rw.error("wrap", HOSTILE["message"])
        rw.end()
    return w.finish()


# Rich and Textual markup a hostile capture may hold where it holds text: a closing tag with
# nothing open (raised: the app died on open), a style that hides what follows, an action run on
# a click, a link, and the sample's own `coordinate[dp]` (read as a style named `dp`).
MARKUP = {
    "pass": "shard[/x]_rows[red on red]",
    "pass2": "coordinate[dp]",
    "pass3": "[@click=app.quit]click[/] \x1b]0;t\x07",
    "raise": "[bold]boom[/bold][/x]",
    "message": "[red on red]hidden[/red on red] [link=file:///etc/passwd]passwd[/link] [/x]",
    "error": "[/x] wrap [on red]failed[/on red]",
    "reason": "[/x] disk [red on red]full[/]",
    "file": "/work/[b]model[/b][/x].py",
    "node": "node[/x][dp]",
    "device": "cuda:[red]0[/red]",
    "command": "python [/x]train.py [red on red]--secret[/]",
}


def markup_capture(directory, *, world: int = 2) -> str:
    """small_capture's rank-baked bug with markup in every text field a capture has: pass names,
    an exception message, a capture error, the source file of the finding's node, a device
    table's node and device, a writer's stop reason (a status file) and the manifest's command."""
    import orjson

    from graphtrain_inspect.capture import graph_tables
    from tests.small_captures import CaptureWriter, mesh_rank_table

    real = graph_tables.device_table

    def devices(gm):
        d = real(gm)
        lit = {"graph": "", "node": MARKUP["node"], "target": "aten.select.int", "where": "args[0]"}
        d["literals"] = [*d.get("literals", []), {**lit, "device": MARKUP["device"], "kind": "device", "dtype": None}]
        return d

    w = CaptureWriter(directory, world_size=world)
    graph_tables.device_table = devices
    try:
        for r in range(world):
            rw = w.rank(r, rank_table=mesh_rank_table(r, (world,), ("dp",)), own_device="cpu")
            g0, g1, g2 = _graphs(r)
            for n in g2.graph.nodes:
                if n.op == "call_function" and "select" in str(n.target):
                    n.meta["stack_trace"] = f'File "{MARKUP["file"]}", line 7, in forward\n    s = z[rank]  # [/x]'
            rw.apply(MARKUP["pass"], g1, g2)
            rw.apply(MARKUP["pass2"], g2, g2)
            rw.apply(MARKUP["raise"], g2, None, exception=ValueError(MARKUP["message"]))
            rw.apply(MARKUP["pass3"], g2, g2)
            rw.error("wrap", MARKUP["error"])
            rw.end()
    finally:
        graph_tables.device_table = real
    path = w.finish()
    status = Path(path) / logformat.STATUS_DIR
    status.mkdir(exist_ok=True)
    doc = {"rank": 1, "pid": 1001, "state": "stopped", "log": logformat.log_file_name(1), "records": 3,
           "bytes": 10, "time": 0.0, "reason": MARKUP["reason"]}  # fmt: skip
    (status / logformat.status_file_name(1, 1001)).write_bytes(logformat.encode_status(doc))
    manifest = Path(path) / logformat.MANIFEST_NAME
    m = orjson.loads(manifest.read_bytes())
    m["command"], m["command_line"] = MARKUP["command"].split(), MARKUP["command"]
    manifest.write_bytes(orjson.dumps(m))
    return path


def log_path(directory, rank: int) -> Path:
    return Path(directory) / logformat.log_file_name(rank)


def record_starts(data: bytes) -> list[int]:
    """Byte offsets of each record's envelope line in a log."""
    starts = [0]
    i = data.find(b"\n")
    while i >= 0 and i + 1 < len(data):
        if data[i + 1 : i + 2] != b"\t":
            starts.append(i + 1)
        i = data.find(b"\n", i + 1)
    return starts


async def settle(pilot, rounds: int = 50) -> None:
    """Wait until no worker runs and the messages they posted are handled."""
    from textual.worker import WorkerCancelled

    app = pilot.app
    for _ in range(rounds):
        try:
            await app.workers.wait_for_complete()
        except WorkerCancelled:  # an exclusive worker replaced by a newer one: wait for that one
            continue
        await pilot.pause()
        if not any(w.is_running for w in app.workers) and not app.jobs:
            await pilot.pause()
            return
    raise AssertionError(f"the app did not settle: jobs {app.jobs}")


def tmp_env_for_bundled(tmp_path) -> dict:
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}


@asynccontextmanager
async def opened(path, size: tuple[int, int] = (160, 40), **kwargs):
    """The app on `path`, run headless, once its first views have loaded: `(app, pilot)`."""
    from graphtrain_inspect.tui.app import InspectApp

    app = InspectApp(str(path), **kwargs)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        yield app, pilot
