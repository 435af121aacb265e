"""`--out` is the user's: `capture` makes it (mode 0700) or takes an existing one only when it is
empty, the user's and writable by no one else; it signs only the files its own processes can
have written; nothing it writes follows a link planted under the name it writes (the rank log,
its status file, the manifest, the signature), and `report -o DIR` neither.

The attacker: another user who can write the folder the capture goes to (a shared scratch
folder), who adds a rank log and a pickle for the capture to sign, or plants links named like the
files it will write, pointing at the user's own files.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import orjson
import pytest

from graphtrain_inspect.capture.shared import logformat, signing
from tests.capture_utils import run_cli

NOBODY = 65534


def _capture(out: Path, *code: str):
    return run_cli("capture", "--out", str(out), "--no-inductor", "--", sys.executable, "-c", "; ".join(code) or "pass")


def test_out_is_made_private(tmp_path):
    out = tmp_path / "cap"
    r = _capture(out)
    assert r.returncode == 0, r.stderr
    assert out.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("how", ["open-to-all", "group-writable", "not-empty", "another-users"])
def test_an_out_someone_else_can_write_is_refused_in_one_line(tmp_path, how):
    out = tmp_path / "shared"
    out.mkdir()
    ran = tmp_path / "ran"
    if how == "open-to-all":
        out.chmod(0o1777)  # a scratch folder anyone can write (sticky or not)
    elif how == "group-writable":
        out.chmod(0o770)
    elif how == "not-empty":
        (out / logformat.log_file_name(7)).write_text("planted\n")
    else:
        if os.getuid() != 0:
            pytest.skip("making a folder another user's needs root")
        os.chown(out, NOBODY, NOBODY)
        out.chmod(0o755)
    r = _capture(out, f"open({str(ran)!r}, 'w')")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "nothing was run" in r.stderr and not ran.exists()
    if how in ("open-to-all", "group-writable"):
        assert "can be written by others" in r.stderr and f"fix: chmod go-w {out}" in r.stderr, r.stderr
    elif how == "another-users":
        assert "belongs to another user" in r.stderr, r.stderr
    assert not (out / logformat.CLAIM_NAME).exists() and not (out / logformat.MANIFEST_NAME).exists()


def test_capture_signs_only_what_its_own_processes_wrote(tmp_path):
    """Files added under --out while the command runs, that the capture's processes cannot have
    made: one of another user's (as root; else skipped), a hard link to a file of the user's
    elsewhere, one in a folder others can write. None is signed; the capture's own files are."""
    out = tmp_path / "cap"
    outside = tmp_path / "elsewhere.log"
    outside.write_text("the user's own file\n")
    shared = out / "shared"
    code = [
        "import os",
        f"out = {str(out)!r}",
        f"os.link({str(outside)!r}, os.path.join(out, {logformat.log_file_name(8)!r}))",
        f"os.mkdir({str(shared)!r}); os.chmod({str(shared)!r}, 0o777)",
        f"open(os.path.join({str(shared)!r}, 'x.gpkl'), 'w').write('x')",
    ]
    if os.getuid() == 0:
        code += [
            f"p = os.path.join(out, {logformat.log_file_name(7)!r}); open(p, 'w').write('planted')",
            f"os.chown(p, {NOBODY}, {NOBODY})",
        ]
    r = _capture(out, *code)
    assert r.returncode == 0, r.stderr
    assert (out / logformat.log_file_name(8)).exists() and (shared / "x.gpkl").exists()  # planted as it ran
    doc = orjson.loads((out / logformat.SIGNATURE_NAME).read_bytes())
    listed = set(doc["files"])
    assert logformat.MANIFEST_NAME in listed and logformat.CLAIM_NAME in listed
    assert logformat.log_file_name(8) not in listed and "shared/x.gpkl" not in listed
    assert logformat.log_file_name(7) not in listed
    # added reader files undo the signature: replay never loads this capture without --trust
    assert not signing.verify(str(out)).ok


def test_writers_never_follow_a_planted_link(tmp_path):
    """A rank log, its status file, the manifest and the signature's temporary file, each planted
    as a link to a file of the user's: that file is left as it was."""
    from graphtrain_inspect.capture import manifest
    from graphtrain_inspect.capture.writer import RankLog

    out = tmp_path / "cap"
    out.mkdir()
    victims = {n: tmp_path / f"victim-{n}" for n in ("log", "status", "manifest", "signature")}
    for v in victims.values():
        v.write_text("precious\n")
    log = RankLog(str(out), 0)
    (out / logformat.STATUS_DIR).mkdir()
    os.symlink(victims["log"], log.path)
    os.symlink(victims["status"], log.status_path)
    os.symlink(victims["manifest"], out / (logformat.MANIFEST_NAME + ".tmp"))
    os.symlink(victims["signature"], out / f"{logformat.SIGNATURE_NAME}.tmp{os.getpid()}")
    assert log.write(logformat.HEADER, {"rank": 0}) is False and log.stopped  # refused, said, not followed
    manifest.write_manifest(str(out), {"status": "running"}, first=True)
    signing.sign(str(out))
    assert all(v.read_text() == "precious\n" for v in victims.values()), {n: v.read_text() for n, v in victims.items()}
    assert os.path.islink(log.path) and not os.path.islink(out / logformat.MANIFEST_NAME)


def test_report_into_a_capture_never_writes_through_its_links(bundled_capture, tmp_path):
    """`report CAP -o CAP/`: every graph file it could write is planted in CAP/graphs/ as a link
    to a file of the user's; the files are made anew, the user's file is left as it was."""
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    d = tmp_path / "cap"
    shutil.copytree(bundled_capture("h200x2-rank-divergent"), d)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (d / "graphs").mkdir()
    with open_capture(str(d)) as cap:
        for r in cap.ranks:
            for gid in cap.graphs(r):
                os.symlink(victim, d / "graphs" / f"r{r}-{gid}.py")
    r = run_cli("report", str(d), "-o", f"{d}/", "-j", "1")
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "precious\n"
    written = [p for p in (d / "graphs").iterdir() if not p.is_symlink()]
    assert written and all(p.is_file() and p.read_text().strip() for p in written)
    # a linked graphs/ folder is not followed: one line, nothing written there
    shutil.rmtree(d / "graphs")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (d / "graphs").symlink_to(elsewhere)
    r = run_cli("report", str(d), "-o", f"{d}/", "-j", "1")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "cannot write" in r.stderr, r.stderr
    assert list(elsewhere.iterdir()) == []
