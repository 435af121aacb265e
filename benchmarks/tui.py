"""The TUI's latency and memory on a 1 GB capture, in a real terminal.

    python -m benchmarks tui [--src CAPTURE] [--work DIR] [--gb 1.0] [--runs 3] [--presses 30]

What is measured, in a real terminal (tmux, 200x50) running `graphtrain-inspect tui`:

1. start to the first painted tree: from launching the command until the tree shows the first
   pass on screen, on a synthesized 1 GB capture (`synthesize` below: the source capture's real
   records repeated, plus one 50,000-line graph); and until the whole capture is indexed;
2. key press to repainted code view on that 50,000-line graph: PageDown, End, Home and a search,
   from sending the key to tmux until the screen shows the new lines (tmux polled every ~2 ms, so
   the figure includes tmux's own capture time); plus, in-process, what the code view itself
   spends rendering the visible lines after a key;
3. memory while browsing: the process's RSS (anonymous and file-backed) after the tree is
   indexed and after browsing 200 passes, the big graph's code, pass diff, rank diff, symbols and
   devices; and the same on a capture a quarter of the size, to show it does not grow with it.

The source capture is `--src`, else the bundled default capture. The checks (key c) are not part
of these figures: on a capture this size they run in their own process when asked.

The large capture is synthesized from the real one (honestly: repeated records), every record
written with `logformat.encode_record`. Per rank: the real header and rank table; then one
pipeline whose traced graph is a 50,000-line graph made by repeating the node lines of the
source's largest graph with renamed nodes (and one pass that changes a few of its lines); then the
source's pipelines repeated, each copy with fresh graph ids and pass numbers, until the rank's log
reaches its share of the target size: what a long training run that recompiles the same step many
times would write.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from benchmarks.timing import GTI, ROOT, machine_line
from graphtrain_inspect.capture.shared import logformat

# ---------------------------------------------------------------------------------------------
# A terminal


class Term:
    def __init__(self, name: str, width: int = 200, height: int = 50):
        self.socket = f"gti-bench-{os.getpid()}-{name}"
        self.name = name
        self.width, self.height = width, height

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30).stdout

    def start(self, argv: list[str]) -> float:
        env = f"env PYTHONPATH={shlex.quote(str(ROOT))} TERM=xterm-256color"
        t0 = time.perf_counter()
        subprocess.run(
            [
                "tmux",
                "-L",
                self.socket,
                "new-session",
                "-d",
                "-s",
                self.name,
                "-x",
                str(self.width),
                "-y",
                str(self.height),
                f"exec {env} {shlex.join(argv)}",
            ],
            check=True,
            timeout=30,
        )
        return t0

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name)

    def keys(self, *keys: str) -> None:
        if keys and keys[0] == "-l":
            self.tmux("send-keys", "-t", self.name, "-l", *keys[1:])
            return
        self.tmux("send-keys", "-t", self.name, *keys)

    def pid(self) -> int:
        return int(self.tmux("list-panes", "-t", self.name, "-F", "#{pane_pid}").split()[0])

    def wait(self, pred, timeout: float = 120.0, poll: float = 0.002) -> tuple[float, str]:
        t0 = time.perf_counter()
        while True:
            s = self.screen()
            if pred(s):
                return time.perf_counter(), s
            if time.perf_counter() - t0 > timeout:
                raise TimeoutError(f"screen did not change as expected in {timeout}s:\n{s}")
            time.sleep(poll)

    def stop(self) -> None:
        self.tmux("kill-server")


def memory(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                out[k] = int(v.split()[0]) // 1024
    return out


def tui_argv(path: str) -> list[str]:
    return [*GTI, "tui", path]


# ---------------------------------------------------------------------------------------------
# The measurements


def first_tree(path: str, runs: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"first_tree": [], "indexed": []}
    for i in range(runs):
        t = Term(f"start{i}")
        try:
            t0 = t.start(tui_argv(path))
            t1, _ = t.wait(lambda s: "#0 big_rewrite" in s, poll=0.005)
            t2, _ = t.wait(lambda s: re.search(r"\d+ pass(es)? · \d+ findings?", s) is not None, poll=0.01)
            out["first_tree"].append(t1 - t0)
            out["indexed"].append(t2 - t0)
        finally:
            t.stop()
    return out


def _top_line_number(screen: str) -> int | None:
    # the first code line under the view's title: "▕   1234  ..." (the gutter)
    lines = screen.splitlines()
    for i, line in enumerate(lines):
        if re.search(r"· \d{5,} lines", line):  # the code view's title, on the big graph
            for ln in lines[i + 1 :]:
                m = re.match(r".*▕\s*(\d+)\s", ln)
                if m:
                    return int(m.group(1))
            return None
    return None


def _big_lines(path: str) -> int:
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    with open_capture(path) as cap:
        return len((cap.graph_code(0, cap.passes(0)[0].after["out"]) or "").splitlines())


def _last_copy(path: str) -> int:
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    with open_capture(path) as cap:
        code = cap.graph_code(0, cap.passes(0)[0].after["out"]) or ""
    return max(int(x) for x in re.findall(r"_r(\d+):", code))


def repaint(path: str, presses: int) -> tuple[dict[str, list[float]], dict[str, dict[str, int]]]:
    last = _last_copy(path)
    t = Term("keys")
    times: dict[str, list[float]] = {"pagedown": [], "end": [], "home": [], "search": []}
    mem: dict[str, dict[str, int]] = {}
    try:
        t.start(tui_argv(path))
        t.wait(lambda s: re.search(r"\d+ pass(es)? · \d+ findings?", s) is not None and _top_line_number(s) == 1)
        pid = t.pid()
        mem["indexed"] = memory(pid)
        t.keys("v")  # focus the code view
        time.sleep(0.3)
        for _ in range(presses):
            before = _top_line_number(t.screen())
            t0 = time.perf_counter()
            t.keys("PageDown")
            t1, _ = t.wait(lambda s: (n := _top_line_number(s)) is not None and n != before)
            times["pagedown"].append(t1 - t0)
        for key, name, want in (("End", "end", lambda n: n > 50000), ("Home", "home", lambda n: n == 1)):
            for _ in range(max(3, presses // 5)):
                t0 = time.perf_counter()
                t.keys(key)
                t1, _ = t.wait(lambda s: (n := _top_line_number(s)) is not None and want(n))
                times[name].append(t1 - t0)
                t.keys("Home" if name == "end" else "End")
                time.sleep(0.15)
        t.keys("Home")
        time.sleep(0.2)
        for k in range(max(3, presses // 5)):
            # a node near the end of the graph: the search runs over all 51,000 lines
            target = f"view_default_r{last - k}:"
            t.keys("/")
            t.wait(
                lambda s: any(ln.startswith(" /") for ln in s.splitlines()[-4:-1]), timeout=30
            )  # the search field, not the footer
            t.keys("-l", target)  # literally, once the field has the focus: not as key bindings
            t.wait(lambda s: any(target in ln for ln in s.splitlines()[-4:-1]), timeout=30)
            t0 = time.perf_counter()
            t.keys("Enter")
            t1, _ = t.wait(lambda s: target in s and (_top_line_number(s) or 0) > 1000)
            times["search"].append(t1 - t0)
            t.keys("Home")
            time.sleep(0.2)
        mem["big graph in view"] = memory(pid)
        mem.update(browse(t, pid))
    finally:
        t.stop()
    return times, mem


def browse(t: Term, pid: int) -> dict[str, dict[str, int]]:
    """Walk the tree through 200 passes (each one's code loads), then every view of the big graph."""
    out = {}
    t.keys("t")
    time.sleep(0.2)
    for _ in range(200):
        t.keys("Down")
        time.sleep(0.03)
    time.sleep(1.0)
    out["after 200 passes"] = memory(pid)
    t.keys("Home")
    time.sleep(0.3)
    t.keys("Down", "Down", "Down", "Down")  # rank 0, graph 0, trace, #0 big_rewrite
    time.sleep(1.0)
    for key, _label in (("2", "pass diff"), ("3", "rank diff"), ("5", "symbols"), ("6", "devices"), ("1", "code")):
        t.keys(key)
        t.wait(lambda s: "loading" not in s, timeout=300, poll=0.05)
        time.sleep(0.3)
    out["after every view of the big graph"] = memory(pid)
    return out


def in_process_render(path: str, presses: int) -> list[float]:
    """What the code view spends after a key: moving the cursor a page and rendering every visible
    line (the work Textual's compositor asks of the widget), timed inside the app."""
    import asyncio

    from graphtrain_inspect.tui.app import InspectApp

    async def run() -> list[float]:
        app = InspectApp(path)
        out: list[float] = []
        async with app.run_test(size=(200, 50)) as pilot:
            for _ in range(600):
                await pilot.pause(0.05)
                if app.load_seconds is not None and len(app.code_view.lines) > 50000:
                    break
            view = app.code_view
            h = view.size.height
            for _ in range(presses):
                t0 = time.perf_counter()
                view.action_page(1)
                for y in range(h):
                    view.render_line(y)
                out.append(time.perf_counter() - t0)
                await pilot.pause()
        return out

    return asyncio.run(run())


# ---------------------------------------------------------------------------------------------


def _stats(xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))]
    return (
        f"median {statistics.median(xs) * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms, max {xs[-1] * 1000:.0f} ms "
        f"(n={len(xs)})"
    )


def _mem(m: dict[str, int]) -> str:
    return f"RSS {m['VmRSS']} MB (anonymous {m['RssAnon']} MB, file pages {m['RssFile']} MB)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", help="a real capture to synthesize from (default: the bundled default capture)")
    ap.add_argument("--work", default="/tmp/gti-tui-bench", help="where the synthesized captures go")
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--presses", type=int, default=30)
    a = ap.parse_args(argv)
    if shutil.which("tmux") is None:
        print("tmux is needed (apt-get install -y tmux)", file=sys.stderr)
        return 2
    src = a.src
    if src is None:
        from graphtrain_inspect.inspector.read import bundled

        src = str(bundled.path_of())
    work = Path(a.work)
    big = work / f"synth-{a.gb:g}gb"
    small = work / f"synth-{a.gb / 4:g}gb"
    for path, gb in ((big, a.gb), (small, a.gb / 4)):
        if not (path / "manifest.json").exists():
            print(f"synthesizing {path} ({gb:g} GB) from {src} ...", flush=True)
            synthesize(src, str(path), gb=gb, log=lambda m: print("  " + m, flush=True))
    size = sum(f.stat().st_size for f in big.iterdir() if f.suffix == ".log")
    print(f"\n{machine_line()}, {_meminfo()}")
    print(f"capture: {big} ({size / 1e9:.2f} GB, synthesized from {src})\n")

    ft = first_tree(str(big), a.runs)
    print(f"start to first painted tree: {_stats(ft['first_tree'])}")
    print(f"start to whole capture indexed: {_stats(ft['indexed'])}")
    times, mem = repaint(str(big), a.presses)
    lines = _big_lines(str(big))
    for k, v in times.items():
        print(f"key to repainted code view ({k}), {lines:,}-line graph, via tmux: {_stats(v)}")
    rt = in_process_render(str(big), a.presses)
    print(f"code view work per PageDown (cursor move + render of the visible lines), in process: {_stats(rt)}")
    for k, m in mem.items():
        print(f"memory, {size / 1e9:.1f} GB capture, {k}: {_mem(m)}")
    _, mem_small = repaint(str(small), 3)
    ssize = sum(f.stat().st_size for f in small.iterdir() if f.suffix == ".log")
    for k, m in mem_small.items():
        print(f"memory, {ssize / 1e9:.2f} GB capture, {k}: {_mem(m)}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (other work on the machine slows every figure)")
    return 0


def _meminfo() -> str:
    try:
        with open("/proc/meminfo") as f:
            total = int(f.readline().split()[1]) // 1024 // 1024
        return f"{total} GB memory"
    except OSError:
        return "memory unknown"


# -- the synthesized capture ------------------------------------------------------------------

_NAME_RE = re.compile(r"(?<![.\w])[A-Za-z_][A-Za-z0-9_]*\b")  # not an attribute (aten.view)


def _salt(gid: str, k: int) -> str:
    return "g" + hashlib.sha256(f"{gid}/{k}".encode()).hexdigest()[:16]


def _rename_value(v: Any, rename: dict[str, str]) -> Any:
    if isinstance(v, dict):
        if len(v) == 1 and "n" in v and isinstance(v["n"], str):
            return {"n": rename.get(v["n"], v["n"])}
        return {k: _rename_value(x, rename) for k, x in v.items()}
    if isinstance(v, list):
        return [_rename_value(x, rename) for x in v]
    return v


def big_graph(code: str, nodes: dict[str, Any], target_lines: int) -> tuple[str, dict[str, Any], int]:
    """A graph of about `target_lines` lines: the root body of `code` repeated with renamed nodes."""
    lines = code.splitlines()
    root = next(g for g in nodes["graphs"] if not g.get("path"))
    names = {r["name"] for r in root["nodes"] if r.get("op") not in ("placeholder", "output")}
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("def forward"))
    end = next(i for i in range(len(lines) - 1, -1, -1) if lines[i].strip().startswith("return "))
    body = lines[start + 1 : end]
    rows = [r for r in root["nodes"] if r.get("op") not in ("placeholder", "output")]
    head = [r for r in root["nodes"] if r.get("op") == "placeholder"]
    out_lines = ["class big(torch.nn.Module):", lines[start]]
    out_rows = list(head)
    k = 0
    while len(out_lines) < target_lines:
        rename = {n: f"{n}_r{k}" for n in names}
        sub = lambda m: rename.get(m.group(0), m.group(0))  # noqa: E731
        out_lines.extend(_NAME_RE.sub(sub, ln) if not ln.lstrip().startswith("#") else ln for ln in body)
        out_rows.extend({**_rename_value(r, rename), "name": rename.get(r["name"], r["name"])} for r in rows)
        k += 1
    last = f"{next(iter(names))}_r{k - 1}" if names else "None"
    out_lines.append(f"        return ({last},)")
    out_rows.append({"name": "output", "op": "output", "target": "output", "args": [[{"n": last}]], "kwargs": {}})
    table = {"graphs": [{"path": "", "parent_node": None, "nodes": out_rows}]}
    return "\n".join(out_lines), table, len(out_rows)


class _Writer:
    def __init__(self, path: str, rank: int, pid: int):
        self.f = open(path, "wb")
        self.rank = rank
        self.pid = pid
        self.records = 0

    def write(self, kind: str, payload: Any, meta: dict | None = None) -> None:
        self.f.write(logformat.encode_record(kind, payload, rank=self.rank, meta=meta, pid=self.pid))
        self.records += 1

    def graph(self, gid: str, code: str, nodes: Any, symbols: Any, devices: Any, n: int | None) -> None:
        meta = {"gid": gid, **({"nodes": n} if n is not None else {})}
        self.write(logformat.GRAPH_CODE, code, meta)
        self.write(logformat.NODES, {**nodes, "gid": gid}, meta)
        self.write(logformat.SYMBOLS, {**(symbols or {"shape_env": False, "symbols": {}}), "gid": gid}, {"gid": gid})
        self.write(logformat.DEVICES, {**(devices or {"literals": [], "values": []}), "gid": gid}, {"gid": gid})


def synthesize(src: str, out: str, *, gb: float = 1.0, big_lines: int = 50000, log=print) -> dict[str, Any]:
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    cap = open_capture(src)
    os.makedirs(out, exist_ok=True)
    share = int(gb * (1 << 30) / max(1, len(cap.ranks)))
    info: dict[str, Any] = {"ranks": {}, "source": os.path.abspath(src)}
    for r in cap.ranks:
        t0 = time.perf_counter()
        header = cap.header(r) or {}
        path = os.path.join(out, logformat.log_file_name(r))
        w = _Writer(path, r, int(header.get("pid") or 0))
        w.write(logformat.HEADER, header)
        table = cap.rank_table(r)
        if table is not None:
            w.write(logformat.RANKS, table)
        passes = cap.passes(r)
        graphs = {
            g: (
                cap.graph_code(r, g),
                cap.payload(r, ref.records[logformat.NODES]),
                cap.symbols(r, g),
                cap.devices(r, g),
                ref.nodes,
            )
            for g, ref in cap.graphs(r).items()
        }
        # the big graph: pipeline 0, traced, and one pass that edits a few of its lines
        biggest = max(graphs, key=lambda g: len(graphs[g][0] or ""))
        code, nodes_payload, symbols, devices, _ = graphs[biggest]
        bcode, btable, bn = big_graph(code, nodes_payload, big_lines)
        bgid = logformat.graph_id(bcode, orjson.dumps(btable))
        edited = bcode.splitlines()
        for i in range(len(edited) // 3, len(edited), max(1, len(edited) // 7)):
            edited[i] = edited[i].replace("torch.ops.aten.", "torch.ops.aten_edited.", 1)
        ecode = "\n".join(edited)
        egid = logformat.graph_id(ecode, orjson.dumps(btable) + b"e")
        w.graph(bgid, bcode, btable, symbols, devices, bn)
        seq = 0
        w.write(
            logformat.PASS_START, {"seq": seq, "name": "big_rewrite", "before": bgid, "time": time.time()}, {"seq": seq}
        )
        w.graph(egid, ecode, btable, symbols, devices, bn)
        w.write(
            logformat.PASS,
            _pass_rec(r, seq, "big_rewrite", 0, True, bgid, {"out": egid}, bn, {"out": bn}),
            {"seq": seq, "status": "ok"},
        )
        seq += 1
        pipeline = 1
        k = 0
        while w.f.tell() < share:
            remap = {g: _salt(g, k) for g in graphs}
            written: set[str] = set()
            for p in passes:
                if p.status != "ok":
                    continue
                for g in [p.before, *p.after.values()]:
                    if g and g not in written and g in graphs:
                        c, nd, sy, dv, n = graphs[g]
                        w.graph(remap[g], c or "", nd or {"graphs": []}, sy, dv, n)
                        written.add(g)
                w.write(
                    logformat.PASS_START,
                    {"seq": seq, "name": p.name, "before": remap.get(p.before), "time": time.time()},
                    {"seq": seq},
                )
                nodes = p.nodes or {}
                rec = _pass_rec(
                    r,
                    seq,
                    p.name,
                    pipeline + p.pipeline,
                    p.traced,
                    remap.get(p.before),
                    {role: remap[g] for role, g in p.after.items()},
                    nodes.get("before"),
                    nodes.get("after") or {},
                )
                rec.update({"qualname": p.qualname, "source": p.source, "wall_s": p.wall_s})
                w.write(logformat.PASS, rec, {"seq": seq, "status": "ok"})
                seq += 1
            pipeline += 1 + max((p.pipeline for p in passes), default=0)
            k += 1
        w.write(
            logformat.END,
            {
                "records": w.records + 1,
                "bytes": w.f.tell(),
                "passes": seq,
                "graphs": None,
                "blobs": 0,
                "capture_errors": 0,
                "time": time.time(),
            },
        )
        size = w.f.tell()
        w.f.close()
        info["ranks"][str(r)] = {
            "log": os.path.basename(path),
            "bytes": size,
            "passes": seq,
            "copies": k,
            "big_lines": len(bcode.splitlines()),
        }
        log(
            f"rank {r}: {size / 1e6:.0f} MB, {seq} passes ({k} copies of the source's pipelines), big graph "
            f"{len(bcode.splitlines())} lines, {time.perf_counter() - t0:.1f}s"
        )
    manifest = dict(cap.manifest or {})
    manifest.update(
        {
            "status": "finished",
            "ranks": {k: {"log": v["log"], "bytes": v["bytes"]} for k, v in info["ranks"].items()},
            "synthesized_from": info["source"],
        }
    )
    with open(os.path.join(out, logformat.MANIFEST_NAME), "wb") as f:
        f.write(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    cap.close()
    return info


def _pass_rec(rank, seq, name, pipeline, traced, before, after, before_n, after_n) -> dict[str, Any]:
    return {
        "seq": seq, "name": name, "qualname": None, "source": "named", "subsystem": None, "parent": None,
        "rank": rank, "local_rank": rank, "world_size": None, "compile_id": None, "pipeline": pipeline,
        "traced": traced, "time": time.time(), "wall_s": 0.01, "status": "ok", "exception": None,
        "before": before, "after": after, "nodes": {"before": before_n, "after": after_n}, "blobs": {},
        "capture_errors": 0,
    }  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
