"""Benchmarks of the TUI, printed as the figures in BENCHMARKS.md ("## TUI").

    python -m benchmarks.tui_bench [--src CAPTURE] [--work DIR] [--gb 1.0] [--runs 3]

What is measured, in a real terminal (tmux, 200x50) running `graphtrain-inspect tui`:

1. start to the first painted tree: from launching the command until the tree shows the first
   pass on screen, on a synthesized 1 GB capture (`benchmarks/tui_synth.py`: the source capture's
   real records repeated, plus one 50,000-line graph); and until the whole capture is indexed;
2. key press to repainted code view on that 50,000-line graph: PageDown, End, Home and a search,
   from sending the key to tmux until the screen shows the new lines (tmux polled every ~2 ms, so
   the figure includes tmux's own capture time); plus, in-process, what the code view itself
   spends rendering the visible lines after a key;
3. memory while browsing: the process's RSS (anonymous and file-backed) after the tree is
   indexed and after browsing 200 passes, the big graph's code, pass diff, rank diff, symbols and
   devices; and the same on a capture a quarter of the size, to show it does not grow with it.

The source capture is `--src`, else the bundled default capture. The checks (key c) are not part
of these figures: on a capture this size they run in their own process when asked.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
    return [sys.executable, "-m", "graphtrain_inspect.inspector.cli", "tui", path]


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
    from benchmarks.tui_synth import synthesize

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
    print(
        f"\nmachine: {os.cpu_count()} CPUs, {_meminfo()}, Python {sys.version.split()[0]}, load average at "
        f"start {os.getloadavg()[0]:.2f}"
    )
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


if __name__ == "__main__":
    sys.exit(main())
