"""The signature covers the capture as a whole: a log or blob added to a signed capture
is never unpickled without --trust, whichever entry point reads it (`replay DIR`, `replay FILE`,
the TUI's replay key), and `ls`/`check` name it. Version 1 signatures are still read.

The attack: a copy of a capture this user signed, plus one extra log (`notes.log`, or a name the
directory reader does not take for a rank's, `..._rank_0_zz.log`) whose pass record points at a
new blob holding a pickle that creates a marker file when loaded.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
from pathlib import Path

import orjson
import pytest

from graphtrain_inspect.capture.shared import logformat, signing
from tests.capture_utils import Plant, rewrite_log, run_cli

PASS = "place_devices"


@pytest.fixture(scope="module")
def signed_sample(sample_capture) -> Path:
    d = Path(sample_capture())
    assert signing.verify(str(d)).ok, "the capture is signed at its end"
    return d


def _blob_ref(d: Path) -> dict:
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    with open_capture(str(d)) as cap:
        p = cap.find_passes(PASS, 0)[0]
        return dict(p.blobs[p.before])


def _with_extra_log(src: Path, dest: Path, name: str) -> tuple[Path, Path, Path]:
    """A copy of `src` plus the log `name` (rank 0's, its `PASS` before-blob swapped for a planted
    pickle written into blobs/). Returns (capture, extra log, marker)."""
    shutil.copytree(src, dest)
    marker = dest.parent / (dest.name + "-pwned")
    ref = _blob_ref(dest)
    evil = pickle.dumps(Plant(str(marker)))
    sha = hashlib.sha256(evil).hexdigest()
    (dest / logformat.blob_relpath(sha)).write_bytes(evil)
    extra = dest / name
    shutil.copy(dest / logformat.log_file_name(0), extra)
    n = rewrite_log(
        extra,
        {ref["sha256"].encode(): sha.encode(), f'"bytes":{ref["bytes"]}'.encode(): f'"bytes":{len(evil)}'.encode()},
    )
    assert n > 0
    return dest, extra, marker


def _replay(target: Path, *extra: str):
    return run_cli("replay", str(target), "--pass", PASS, "--rank", "0", "--batch", "--no-check", *extra)


@pytest.mark.parametrize("name", ["notes.log", f"{logformat.LOG_PREFIX}0_zz.log"])
def test_replay_of_an_added_log_file_is_refused_without_trust(signed_sample, tmp_path, name):
    d, extra, marker = _with_extra_log(signed_sample, tmp_path / "cap", name)
    v = signing.verify(str(d))
    assert v.ok and name in v.unlisted and not v.covers(name), v
    r = _replay(extra)
    assert r.returncode == 2, r.stdout + r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "does not cover it" in err[0] and name in err[0] and "--trust" in err[0], r.stderr
    assert not marker.exists()
    if name == "notes.log":  # the same capture whatever the added file's name: replayed once
        # the signed capture itself still replays its own logs (and never the added one)
        r = _replay(d)
        assert r.returncode in (0, 1), r.stderr
        assert not marker.exists()
    # the control: vouched for with --trust, the added log's blob is live and runs
    r = _replay(extra, "--trust")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert marker.exists()


def test_tui_replay_key_of_an_added_log_is_refused(signed_sample, tmp_path):
    """The TUI's `r` runs `replay_argv(session path, ...)` (tui.replay): a TUI opened on the
    added file hands replay that file, which is refused the same way."""
    from graphtrain_inspect.tui.replay import replay_argv, run_captured

    d, extra, marker = _with_extra_log(signed_sample, tmp_path / "cap", "notes.log")
    rc, last = run_captured([*replay_argv(str(extra), PASS, 0, 0), "--batch", "--no-check"])
    assert rc == 2 and "does not cover it" in last and "notes.log" in last, last
    assert not marker.exists()


def test_ls_and_check_name_the_unlisted_files(signed_sample, tmp_path):
    d, extra, marker = _with_extra_log(signed_sample, tmp_path / "cap", "notes.log")
    for cmd in (["ls", str(d), "--color", "never"], ["check", str(d), "--color", "never"]):
        r = run_cli(*cmd)
        assert "not covered by the capture's signature" in r.stdout, (cmd, r.stdout)
        assert "notes.log" in r.stdout and "blobs/" in r.stdout, (cmd, r.stdout)
    r = run_cli("ls", str(d), "--json")
    notes = orjson.loads(r.stdout)["unsigned_files"]
    assert len(notes) == 1 and "2 file(s)" in notes[0], notes
    # a fresh copy has nothing unlisted
    clean = tmp_path / "clean"
    shutil.copytree(signed_sample, clean)
    r = run_cli("ls", str(clean), "--json")
    assert orjson.loads(r.stdout)["unsigned_files"] == []
    assert not marker.exists()


def test_signature_lists_every_file_with_its_hash(signed_sample):
    doc = orjson.loads((signed_sample / logformat.SIGNATURE_NAME).read_bytes())
    assert doc["version"] == signing.SIGNATURE_VERSION == 2
    on_disk = signing.capture_files(str(signed_sample))
    assert sorted(doc["files"]) == on_disk
    assert any(f.startswith(logformat.BLOB_DIR + "/") for f in on_disk)
    assert any(f.startswith(logformat.STATUS_DIR + "/") for f in on_disk)
    for rel in on_disk:
        assert doc["files"][rel] == hashlib.sha256((signed_sample / rel).read_bytes()).hexdigest()


def test_changed_status_file_undoes_the_signature(signed_sample, tmp_path):
    d = tmp_path / "cap"
    shutil.copytree(signed_sample, d)
    status = sorted((d / logformat.STATUS_DIR).iterdir())[0]
    status.write_bytes(status.read_bytes() + b" ")
    v = signing.verify(str(d))
    assert not v.ok and f"{logformat.STATUS_DIR}/{status.name} was changed" in v.why


def test_copy_without_blobs_still_verifies(signed_sample, tmp_path):
    d = tmp_path / "noblobs"
    shutil.copytree(signed_sample, d, ignore=shutil.ignore_patterns("*.gpkl"))
    assert signing.verify(str(d)).ok


def _sign_v1(d: Path) -> None:
    """A signature as version 1 wrote it: the manifest and the rank logs only."""
    key = signing.load_key()
    kid = signing.key_id(key)
    files = {n: signing._file_sha256(os.path.join(d, n)) for n in signing.reader_names(str(d))}
    doc = {"format": signing.SIGNATURE_FORMAT, "version": 1, "key_id": kid, "signed": 0, "files": files}
    doc["hmac"] = signing._mac(key, kid, files)
    (d / logformat.SIGNATURE_NAME).write_bytes(orjson.dumps(doc))


def test_version_1_signature_is_read_and_added_files_are_unsigned(signed_sample, tmp_path):
    d, extra, marker = _with_extra_log(signed_sample, tmp_path / "cap", "notes.log")
    _sign_v1(d)
    v = signing.verify(str(d))
    assert v.ok and v.version == 1
    assert v.covers(logformat.log_file_name(0)) and v.covers(logformat.blob_relpath(_blob_ref(d)["sha256"]))
    assert "notes.log" in v.unlisted and not v.covers("notes.log")
    assert not any(u.startswith(logformat.BLOB_DIR + "/") for u in v.unlisted)  # v1 reached blobs via the logs
    r = _replay(extra)
    assert r.returncode == 2 and "does not cover it" in r.stderr, r.stderr
    r = _replay(d)
    assert r.returncode in (0, 1), r.stderr
    assert not marker.exists()


def test_hard_linked_blob_is_reported_and_refused_without_trust(signed_sample, tmp_path):
    """A blob with a second hard link outside the capture (same bytes, so the signature and the
    log's sha256 still hold: whoever holds the other name may change it later) is named by `ls`
    and refused by replay without --trust."""
    d = tmp_path / "cap"
    shutil.copytree(signed_sample, d)
    rel = logformat.blob_relpath(_blob_ref(d)["sha256"])
    outside = tmp_path / "elsewhere.gpkl"
    os.replace(d / rel, outside)
    os.link(outside, d / rel)
    assert signing.verify(str(d)).ok
    r = _replay(d)
    assert r.returncode == 2, r.stdout + r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and f"blob {rel} has 2 hard links" in err[0] and "--trust" in err[0], r.stderr
    r = run_cli("ls", str(d), "--color", "never")
    assert f"blob {rel} has 2 hard links" in r.stdout, r.stdout
    r = _replay(d, "--trust")  # the control: vouched for, the same blob loads
    assert r.returncode in (0, 1), r.stderr


def test_key_folder_made_private_and_a_looser_one_warned(signed_sample, tmp_path):
    cfg = tmp_path / "config"
    d = tmp_path / "cap"
    shutil.copytree(signed_sample, d)
    env = {"XDG_CONFIG_HOME": str(cfg)}
    r = run_cli("trust", str(d), env=env)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    folder = cfg / "graphtrain-inspect"
    assert folder.stat().st_mode & 0o777 == 0o700
    assert (folder / signing.KEY_NAME).stat().st_mode & 0o777 == 0o600
    folder.chmod(0o777)
    r = run_cli("trust", str(d), env=env)
    assert r.returncode == 0, r.stderr
    assert "is open to others (mode 0777)" in r.stderr and f"fix: chmod 700 {folder}" in r.stderr, r.stderr
    r = run_cli("replay", str(d), "--pass", PASS, "--batch", "--no-check", "--color", "never", env=env)
    assert r.returncode in (0, 1) and f"fix: chmod 700 {folder}" in r.stdout + r.stderr, r.stdout + r.stderr


def test_blob_on_another_filesystem_is_reported_and_refused_without_trust(signed_sample, tmp_path):
    """blobs/ is a mount (a small tmpfs, the same files copied in): the signature still holds
    (same paths, same bytes), but a blob on another filesystem is named by `ls` and refused by
    replay without --trust. Needs the right to mount (root here); skipped where there is none."""
    import subprocess

    d = tmp_path / "cap"
    shutil.copytree(signed_sample, d)
    blobs = d / logformat.BLOB_DIR
    saved = tmp_path / "saved-blobs"
    os.replace(blobs, saved)
    blobs.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(blobs)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        for f in saved.iterdir():
            shutil.copy(f, blobs / f.name)
        rel = logformat.blob_relpath(_blob_ref(d)["sha256"])
        assert signing.verify(str(d)).ok
        r = _replay(d)
        assert r.returncode == 2, r.stdout + r.stderr
        err = r.stderr.strip().splitlines()
        assert len(err) == 1 and f"blob {rel} is on another filesystem" in err[0], r.stderr
        r = run_cli("ls", str(d), "--color", "never")
        assert f"blob {rel} is on another filesystem" in r.stdout, r.stdout
        r = _replay(d, "--trust")  # the control: vouched for, it loads
        assert r.returncode in (0, 1), r.stderr
    finally:
        subprocess.run(["umount", str(blobs)], check=True)
