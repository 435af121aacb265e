"""A scripted terminal session: start the TUI in tmux, go to a finding, open its diff, quit; the
captured screen text is checked at each step. Runs wherever tmux is installed (CI installs it)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install -y tmux)")


class Tmux:
    def __init__(self, name: str):
        self.socket = f"gti-test-{os.getpid()}-{name}"
        self.name = name

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30)

    def start(self, command: str, width: int = 160, height: int = 40) -> None:
        env = {"PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "NO_COLOR": "", "TEXTUAL_ANIMATIONS": "none"}
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        r = self.run(
            "new-session",
            "-d",
            "-s",
            self.name,
            "-x",
            str(width),
            "-y",
            str(height),
            f"env {exports} {command}; echo EXIT:$?; sleep 30",
        )
        assert r.returncode == 0, r.stderr

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.name).stdout

    def keys(self, *keys: str) -> None:
        if keys and keys[0] == "-l":  # literal text
            self.run("send-keys", "-t", self.name, "-l", *keys[1:])
            return
        self.run("send-keys", "-t", self.name, *keys)

    def wait_until(self, ok, what: str, timeout: float) -> str:
        """The screen, once `ok(screen)`. The timeout only ends a session that is stuck: it is
        generous, as the app starts slowly on a loaded machine."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if ok(screen):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{what} after {timeout}s:\n{screen}")

    def wait_for(self, *texts: str, timeout: float = 180) -> str:
        return self.wait_until(lambda s: all(t in s for t in texts), f"{texts} not on screen", timeout)

    def wait_gone(self, *texts: str, timeout: float = 180) -> str:
        return self.wait_until(lambda s: not any(t in s for t in texts), f"{texts} still on screen", timeout)

    def kill(self) -> None:
        self.run("kill-server")


def test_tmux_session_finding_to_diff_and_quit(tui_small_capture):
    t = Tmux("tui")
    try:
        t.start(
            f"{shlex.quote(sys.executable)} -m graphtrain_inspect.inspector.cli tui "
            f"{shlex.quote(str(tui_small_capture))}"
        )
        # the tree, the first pass's graph, and the checks' count
        t.wait_for("Findings (1)", "#1 shard_rows", "rank 1", "class no_dead")
        t.keys("4")
        screen = t.wait_for("rank-baked-constant", "ERROR")
        assert "shard_rows" in screen
        t.keys("Enter")
        screen = t.wait_for("#1 shard_rows on rank 0:", "select")
        diff_lines = [ln for ln in screen.splitlines() if 'select: "f32[4][1]cpu"' in ln]
        assert diff_lines and "+" in diff_lines[0].split("select:")[0], screen  # an added line
        t.keys("s")
        t.wait_for("diffs: side by side")
        # the search field is on screen while typing (above the status line, not under the footer)
        t.keys("/")
        t.wait_for("search in this view")  # keys sent before the field has focus go to the app
        t.keys("-l", "relu")
        screen = t.wait_for("/relu")
        lines = [ln for ln in screen.splitlines() if ln.strip()]
        status = next(i for i, ln in enumerate(lines) if "small: 2 ranks" in ln)
        assert "/relu" in lines[status - 1], lines[status - 2 :]
        t.keys("Enter")
        # The field must have closed before "q": sent at once (as a loaded machine delivers two
        # keys), "q" reaches the field before it closes and the app never quits.
        t.wait_gone("/relu")
        t.keys("q")
        t.wait_for("EXIT:0")
    finally:
        t.kill()
