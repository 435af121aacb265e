"""Untrusted captures: browsing, `ls`, `diff` and `check` never unpickle; paths in a capture never
lead out of it; files that are not logs cannot hang or fool the reader.

The planted capture is a copy of the shared sample capture whose every blob reference names one
planted pickle that creates a file when unpickled, with the sha256s and md5s made consistent (so
even a loader that verifies the sha256 would load it). The replay side of trust (the manifest's
user and host, --trust, tampered blobs) is tests/replay/test_replay.py.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import io
import os
import pickle
import shutil
from pathlib import Path

import pytest

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.capture_utils import Plant, rewrite_log


@pytest.fixture(scope="module")
def planted(sample_capture, tmp_path_factory):
    """(capture dir, marker path, planted pickle bytes)."""
    src = Path(sample_capture())
    d = tmp_path_factory.mktemp("untrusted") / "planted"
    shutil.copytree(src, d, ignore=shutil.ignore_patterns("*.gpkl"))
    marker = d.parent / "unpickled-marker"
    evil = pickle.dumps(Plant(str(marker)))
    sha = hashlib.sha256(evil).hexdigest()
    (d / logformat.BLOB_DIR / f"{sha}{logformat.BLOB_SUFFIX}").write_bytes(evil)
    cap = open_capture(str(src))
    refs = {b["sha256"]: b["bytes"] for r in cap.ranks for p in cap.passes(r) for b in p.blobs.values()}
    cap.close()
    assert refs, "the sample capture has blobs"
    replace = {s.encode(): sha.encode() for s in refs}
    replace.update({f'"bytes":{n}'.encode(): f'"bytes":{len(evil)}'.encode() for n in set(refs.values())})
    for log in d.glob("*_gti.log"):
        assert rewrite_log(log, replace) > 0
    return d, marker, evil


@contextlib.contextmanager
def no_unpickling(monkeypatch):
    """Any unpickling in this process fails the test (the marker catches child processes)."""
    calls: list[str] = []

    def refuse(name):
        def f(*a, **k):
            calls.append(name)
            raise AssertionError(f"{name} called while browsing an untrusted capture")

        return f

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse(f"pickle.{name}"))
    yield calls
    monkeypatch.undo()


COMMANDS = [
    ["ls", "{d}", "--color", "never"],
    ["ls", "{d}", "--verify", "--json"],
    ["diff", "{d}", "--pass", "place_devices", "--color", "never"],
    ["diff", "{d}", "--pass", "remove_dead_code", "--ranks", "0,1", "--side-by-side", "--color", "never"],
    ["check", "{d}", "--color", "never"],
    ["check", "{d}", "--json"],
]


def test_commands_never_unpickle(planted, monkeypatch):
    from graphtrain_inspect.inspector import cli

    d, marker, evil = planted
    with no_unpickling(monkeypatch) as calls:
        for argv in COMMANDS:
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = cli.main([a.format(d=d) for a in argv])
            assert code == 0, (argv, err.getvalue()[-2000:])
            assert err.getvalue() == "", (argv, err.getvalue())  # the capture reads cleanly
    assert calls == [] and not marker.exists()
    # the control: the planted blob is live, unpickling it does create the file
    pickle.loads(evil)
    assert marker.exists()
    marker.unlink()


async def test_tui_never_unpickles(planted, monkeypatch):
    """The app browses every view (its checks run in a child process: the marker covers it)."""
    from graphtrain_inspect.tui.app import InspectApp
    from graphtrain_inspect.tui.session import Place
    from tests.tui_support import settle

    d, marker, _ = planted
    with no_unpickling(monkeypatch) as calls:
        app = InspectApp(str(d))
        async with app.run_test(size=(160, 40)) as pilot:
            await settle(pilot)
            assert app.session is not None
            for seq, view in ((0, "pass-diff"), (6, "rank-diff"), (3, "code")):
                app.open_place(Place(0, 0, seq, "out"), view=view)
                await settle(pilot)
            for key in ("4", "5", "6", "7"):  # findings, symbols, devices, problems
                await pilot.press(key)
                await settle(pilot)
            assert app.is_running
    assert calls == [] and not marker.exists()


# ---------------------------------------------------------------------------------------------
# Paths that lead out of the capture


def _with_blob_path(planted, tmp_path, path_for) -> Path:
    """A copy of the planted capture (made by you, so replay trusts its origin) whose rank 0 pass
    records name the blob by `path_for(sha)` instead of blobs/<sha>.gpkl."""
    d, _, evil = planted
    c = tmp_path / "c"
    shutil.copytree(d, c)
    sha = hashlib.sha256(evil).hexdigest()
    rewrite_log(
        c / logformat.log_file_name(0),
        {f'"path":"{logformat.blob_relpath(sha)}"'.encode(): f'"path":"{path_for(sha)}"'.encode()},
    )
    return c


@pytest.mark.parametrize(
    "path_for",
    [lambda sha: "../../etc/passwd", lambda sha: "/etc/passwd", lambda sha: f"blobs/../../{sha}.gpkl"],
    ids=["dotdot", "absolute", "blobs-dotdot"],
)
def test_replay_refuses_a_blob_path_outside_the_capture(planted, tmp_path, monkeypatch, path_for):
    from graphtrain_inspect.inspector.replay.plan import Refused, read_blob

    c = _with_blob_path(planted, tmp_path, path_for)
    cap = open_capture(str(c))
    rec = cap.find_passes("place_devices", 0)[0]
    opened: list[str] = []
    real_open, real_os_open = builtins.open, os.open
    monkeypatch.setattr(builtins, "open", lambda p, *a, **k: (opened.append(str(p)), real_open(p, *a, **k))[1])
    monkeypatch.setattr(os, "open", lambda p, *a, **k: (opened.append(str(p)), real_os_open(p, *a, **k))[1])
    with pytest.raises(Refused, match="names blob path .* refusing to load it"):
        read_blob(cap, rec, rec.before, trust=True)
    monkeypatch.undo()
    assert opened == [], opened
    # the command: one line, exit 2 (refused before torch is imported or anything is loaded)
    from tests.capture_utils import run_cli

    r = run_cli("replay", str(c), "--pass", "place_devices", "--rank", "0", "--batch", "--trust")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "refusing to load it" in err[0], r.stderr
    # check says the reference is refused, and never opens it either
    from graphtrain_inspect.inspector.checks import run_checks

    fs = [f for f in run_checks(cap) if f.kind == "incomplete-capture"]
    assert {f.evidence["problem"] for f in fs} == {"bad-blob-reference"}
    cap.close()


def test_replay_refuses_a_blob_directory_linked_outside(planted, tmp_path):
    from graphtrain_inspect.inspector.replay.plan import Refused, read_blob

    d, _, _ = planted
    c = tmp_path / "c"
    shutil.copytree(d, c, ignore=shutil.ignore_patterns(logformat.BLOB_DIR))
    (c / logformat.BLOB_DIR).symlink_to(d / logformat.BLOB_DIR)  # the blobs are elsewhere
    cap = open_capture(str(c))
    rec = cap.find_passes("place_devices", 0)[0]
    with pytest.raises(Refused, match="outside the capture"):
        read_blob(cap, rec, rec.before, trust=True)
    cap.close()


def test_logs_linked_outside_or_not_regular_files_are_refused(planted, tmp_path):
    """A log that is a link out of the capture is not followed; a FIFO named like a log (which
    would block a plain open forever) is refused at once; a status file of garbage is one line."""
    d, _, _ = planted
    c = tmp_path / "c"
    shutil.copytree(d, c, ignore=shutil.ignore_patterns("*.gpkl"))
    outside = tmp_path / "outside.log"
    shutil.move(c / logformat.log_file_name(1), outside)
    (c / logformat.log_file_name(1)).symlink_to(outside)
    os.mkfifo(c / logformat.log_file_name(2))
    (c / logformat.STATUS_DIR).mkdir(exist_ok=True)
    (c / logformat.STATUS_DIR / logformat.status_file_name(0, 7)).write_bytes(b"\x00garbage")
    cap = open_capture(str(c))
    errs = [str(e) for e in cap.all_errors()]
    assert any(logformat.log_file_name(1) in e and "outside" in e and "not followed" in e for e in errs), errs
    assert any(logformat.log_file_name(2) in e and "not a regular file" in e for e in errs), errs
    assert any("rank_0.7.json: status file unreadable" in e for e in errs), errs
    assert all("\n" not in e for e in errs)
    assert [p.name for p in cap.passes(0)][-1] == "place_devices"  # rank 0 reads as before
    cap.close()
