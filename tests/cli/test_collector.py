"""Commands that read a capture run with the cyclic collector off (inspector/read/collector.py):
for good in a process of their own, and as it was after them when called in a process that goes
on (tests, scripts, the TUI's check job)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

import pytest

from graphtrain_inspect.inspector.checks import check_report
from graphtrain_inspect.inspector.cli.main import main
from graphtrain_inspect.inspector.read.capture_index import open_capture


@pytest.mark.parametrize("command", ["ls", "check", "diff"])
def test_a_command_called_in_process_leaves_the_collector_as_it_was(bundled_capture, capsys, command):
    path = str(bundled_capture("h200x2-rank-baked"))
    args = [command, path] + (["--pass", "remove_dead_code", "--ranks", "0,1"] if command == "diff" else [])
    assert gc.isenabled()
    main(args)
    assert gc.isenabled()
    gc.disable()
    try:
        main(args)
        assert not gc.isenabled()
    finally:
        gc.enable()
    capsys.readouterr()


def test_check_report_runs_without_the_collector(bundled_capture, monkeypatch):
    seen = []
    real = check_report.__globals__["_check_report"]

    def spy(*a, **k):
        seen.append(gc.isenabled())
        return real(*a, **k)

    monkeypatch.setitem(check_report.__globals__, "_check_report", spy)
    with open_capture(str(bundled_capture("h200x2-rank-baked"))) as cap:
        check_report(cap)
    assert seen == [False] and gc.isenabled()


def test_a_command_in_its_own_process_runs_without_the_collector(bundled_capture):
    """`python -m graphtrain_inspect.inspector.cli check`: the collector is off while it runs (the
    report is written after every check ran)."""
    code = (
        "import gc, sys\n"
        "from graphtrain_inspect.inspector.checks import coverage\n"
        "real = coverage.checked_line\n"
        "def line(*a, **k):\n"
        "    print('collector', gc.isenabled(), file=sys.stderr)\n"
        "    return real(*a, **k)\n"
        "coverage.checked_line = line\n"
        "from graphtrain_inspect.inspector.cli.main import main\n"
        f"sys.argv = ['graphtrain-inspect', 'check', {str(bundled_capture('h200x2-rank-baked'))!r}]\n"
        "sys.exit(main())\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "collector False" in r.stderr, r.stderr[-2000:]


def test_a_command_in_its_own_process_ends_without_the_teardown_and_loses_nothing(bundled_capture):
    """The process ends as the command returns (cli/main.py `_end_now`): its output whole, its
    exit status, what was registered with atexit run; the interpreter's teardown (every object
    freed, a full collection) skipped: an object held by a module is never finalized."""
    code = (
        "import atexit, sys\n"
        "class Held:\n"
        "    def __del__(self):\n"
        "        print('torn down', file=sys.stderr)\n"
        "held = Held()\n"
        "atexit.register(lambda: print('atexit ran', file=sys.stderr))\n"
        "from graphtrain_inspect.inspector.cli.main import main\n"
        f"sys.argv = ['graphtrain-inspect', 'check', '--json', {str(bundled_capture('h200x2-rank-baked'))!r}]\n"
        "sys.exit(main())\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    report = json.loads(r.stdout)
    assert report["findings"] and r.returncode == int(any(f["severity"] == "error" for f in report["findings"]))
    assert "atexit ran" in r.stderr and "torn down" not in r.stderr, r.stderr[-2000:]


def test_a_reader_that_stops_reading_ends_the_command_quietly(bundled_capture):
    """`check --json | head -c 0`: the output cannot be written (EPIPE); the command ends with 0
    and says nothing of it."""
    cmd = [sys.executable, "-m", "graphtrain_inspect.inspector.cli", "check", "--json"]
    p = subprocess.Popen(
        [*cmd, str(bundled_capture("h200x2-rank-baked"))], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    p.stdout.close()  # before the command has written anything
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 0 and err == "", err[-2000:]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_output_that_cannot_be_flushed_at_the_end_is_said_not_lost_quietly(bundled_capture):
    """The output held in the stream's buffer when the command returns and not writable then (a
    full disk: /dev/full) is said on one line, exit 120 (what Python's own teardown answers)."""
    code = (
        "import io, sys\n"
        "sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO('/dev/full', 'w'), buffer_size=1 << 22))\n"
        "from graphtrain_inspect.inspector.cli.main import main\n"
        f"sys.argv = ['graphtrain-inspect', 'check', '--json', {str(bundled_capture('h200x2-rank-baked'))!r}]\n"
        "sys.exit(main())\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 120, r.stderr[-2000:]
    assert r.stderr.splitlines() == [
        "graphtrain-inspect: the output could not be written: [Errno 28] No space left on device"
    ]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("own_process", [True, False])
def test_output_that_cannot_be_written_midway_is_said_on_one_line(bundled_capture, own_process):
    """A write that fails while the command still writes (stdout unbuffered over a full disk) is
    one line and exit 120, not a traceback: in its own process as the console script runs it, and
    from `main(argv)` called in a process that goes on."""
    capture = str(bundled_capture("h200x2-rank-baked"))
    call = (
        f"sys.argv = ['graphtrain-inspect', 'ls', {capture!r}]\nrc = main()\n"
        if own_process
        else f"rc = main(['ls', {capture!r}])\nsys.stderr.write('returned %d\\n' % rc)\n"
    )
    code = (
        "import io, sys\n"
        "sys.stdout = io.TextIOWrapper(io.FileIO('/dev/full', 'w'), write_through=True)\n"
        "from graphtrain_inspect.inspector.cli.main import main\n"
        f"{call}"
        "sys.stdout = sys.__stdout__\n"  # what the process goes on with
        "sys.exit(rc)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    lost = "graphtrain-inspect: the output could not be written: [Errno 28] No space left on device"
    assert r.returncode == 120, r.stderr[-2000:]
    assert r.stderr.splitlines() == ([lost] if own_process else [lost, "returned 120"])
