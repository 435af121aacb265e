"""The replay key: the `graphtrain-inspect replay` command line for one pass, and running it.

The TUI never unpickles anything: replay (which loads the captured GraphPickler blob) runs as its
own process while the app is suspended, and the app comes back where it was.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys

from graphtrain_inspect.capture.shared.terminal_text import escape_controls


def replay_argv(path: str, pass_name: str, rank: int, occurrence: int) -> list[str]:
    exe = shutil.which("graphtrain-inspect")
    here = os.path.join(os.path.dirname(sys.executable), "graphtrain-inspect")
    if os.path.exists(here):
        exe = here
    base = [exe] if exe else [sys.executable, "-m", "graphtrain_inspect.inspector.cli"]
    from graphtrain_inspect.inspector.read.bundled import sample_of

    # a bundled sample by its name, as the user would type it (replay then runs its own set-up)
    sample = sample_of(path)
    where = ["--sample", sample] if sample else [path]
    return [*base, "replay", *where, "--pass", pass_name, "--rank", str(rank), "--occurrence", str(occurrence)]


def run_in_terminal(argv: list[str]) -> int:
    """Run the replay in the (suspended app's) terminal; on failure wait for Enter so the message
    can be read before the app takes the screen back."""
    # the command as a shell reads it back (shlex), its control characters escaped (a pass name
    # holding an OSC sequence would otherwise reach the terminal)
    print(escape_controls("$ " + shlex.join(argv)), flush=True)
    try:
        rc = subprocess.call(argv)
    except OSError as e:
        print(escape_controls(f"graphtrain-inspect tui: cannot run replay: {e}"), flush=True)
        rc = 127
    if rc != 0:
        try:
            input(f"\nreplay exited with {rc}; press Enter to return to graphtrain-inspect ")
        except EOFError:
            pass
    return rc


def run_captured(argv: list[str]) -> tuple[int, str]:
    """Run without a terminal (the app cannot suspend): exit code and the last output line."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, str(e)
    out = (p.stderr or p.stdout or "").strip().splitlines()
    return p.returncode, out[-1] if out else ""
