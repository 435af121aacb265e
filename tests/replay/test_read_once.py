"""Replay and repro act only on bytes they verified, and nothing a capture names is run.

- A rank log swapped between its read and its hash (the attacker puts the signed log back as soon
  as the reader has opened the planted one) is refused: each file is opened once, and the bytes
  hashed are the bytes parsed.
- A pass record naming a file path (`CAP/notes/evil.py:place_devices`), even in a capture the user
  signed, is never imported; the same file named by the user with --fn is.
- Replay started inside a capture holding `rapidfuzz.py` (a module the tool imports lazily) never
  imports it; the current directory is searched only for the user's code, and not when it is the
  capture.
- repro holds each blob to the signature and to the hard-link rule, as replay does.
- A relative XDG_CONFIG_HOME (a folder of the current directory: a capture's) never supplies the key.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from graphtrain_inspect.capture.shared import logformat, signing
from tests.capture_utils import CLI, child_env, rewrite_log, run_cli

PASS = "place_devices"
QUALNAME = b'"qualname":"graphtrain_inspect.samples.passes.device:place_devices"'
LOG0 = logformat.log_file_name(0)


@pytest.fixture(scope="module")
def signed_sample(sample_capture) -> Path:
    d = Path(sample_capture())
    assert signing.verify(str(d)).ok, "the capture is signed at its end"
    return d


def _evil_module(tmp_path: Path, d: Path) -> tuple[Path, Path]:
    """notes/evil.py in the capture, creating a marker when imported; (module, marker)."""
    marker = tmp_path / "imported-evil"
    evil = d / "notes" / "evil.py"
    evil.parent.mkdir()
    evil.write_text(f"open({str(marker)!r}, 'w').close()\n\ndef place_devices(gm):\n    return gm\n")
    return evil, marker


def _naming_a_file(log: Path, evil: Path) -> None:
    assert rewrite_log(log, {QUALNAME: f'"qualname":"{evil}:{PASS}"'.encode()}) == 1


def _main(*argv: str) -> tuple[int, str]:
    from graphtrain_inspect.inspector import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, err.getvalue()


def test_a_log_swapped_after_it_is_read_is_refused(signed_sample, tmp_path, monkeypatch):
    """The race, made deterministic: the planted log is in place when the reader opens it, and the
    signed one is back the moment that open returns, so every later open by path (a hash, a
    second read) sees the signed file. Read once, the planted bytes are the ones verified."""
    d = tmp_path / "cap"
    shutil.copytree(signed_sample, d)
    signed_log = tmp_path / "signed.log"
    shutil.copy(d / LOG0, signed_log)
    evil, marker = _evil_module(tmp_path, d)
    _naming_a_file(d / LOG0, evil)  # the planted log: not what was signed
    real_open = os.open
    opened: list[str] = []

    def watcher(path, flags, *a, **k):
        fd = real_open(path, flags, *a, **k)
        if os.path.basename(os.fsdecode(path)) == LOG0:
            opened.append(os.fsdecode(path))
            if len(opened) == 1:
                os.replace(signed_log, d / LOG0)  # the attacker wins the race: the signed log is back
        return fd

    monkeypatch.setattr(os, "open", watcher)
    code, err = _main("replay", str(d), "--pass", PASS, "--rank", "0", "--batch", "--no-check")
    monkeypatch.undo()
    assert code == 2 and "refused" in err and f"{LOG0} was changed" in err, err
    assert len(opened) == 1, opened  # read once: the bytes hashed are the bytes parsed
    assert not marker.exists()


def test_a_file_path_the_capture_names_is_never_imported(signed_sample, tmp_path):
    d = tmp_path / "cap"
    shutil.copytree(signed_sample, d)
    evil, marker = _evil_module(tmp_path, d)
    _naming_a_file(d / LOG0, evil)
    signing.sign(str(d))  # signed by the user: still, what the capture names is data, not code to run
    args = ["replay", str(d), "--pass", PASS, "--rank", "0", "--batch", "--no-check"]
    r = run_cli(*args)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "file path" in err[0] and "--fn" in err[0], r.stderr
    assert not marker.exists()
    # the control: the same file named by the user (--fn) is the user's code, and is imported
    from graphtrain_inspect.inspector.replay.resolve import import_target

    assert import_target(f"{evil}:{PASS}").__name__ == PASS and marker.exists()


def test_replay_inside_a_capture_never_imports_its_modules(signed_sample, tmp_path, monkeypatch):
    d = tmp_path / "cap"
    shutil.copytree(signed_sample, d)
    marker = tmp_path / "imported-rapidfuzz"
    (d / "rapidfuzz.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (d / "evilmod.py").write_text(f"open({str(marker)!r}, 'w').close()\ndef f(gm):\n    return gm\n")
    # as `python -m` runs it, from inside the capture: the tool's lazy imports (rapidfuzz, by the diff)
    r = subprocess.run(
        [*CLI, "replay", ".", "--pass", PASS, "--batch", "--no-check"],
        cwd=d,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode in (0, 1), r.stdout + r.stderr
    assert not marker.exists()
    from graphtrain_inspect.inspector.errors import ReplayError
    from graphtrain_inspect.inspector.replay.resolve import import_target

    monkeypatch.chdir(d)
    before = list(sys.path)
    with pytest.raises(ReplayError, match="cannot import evilmod"):
        import_target("evilmod:f", named_by_capture=True, capture_dir=str(d))  # not from the capture's folder
    fn = import_target(QUALNAME.decode().split('"')[3], named_by_capture=True, capture_dir=str(d))
    assert fn.__name__ == PASS and sys.path == before and not marker.exists()


def test_repro_holds_blobs_to_the_signature_and_the_link_rule(bundled_capture, tmp_path):
    src = bundled_capture("h200x2-rank-divergent")
    d = tmp_path / "cap"
    shutil.copytree(src, d)
    assert signing.verify(str(d)).ok
    blobs = sorted((d / logformat.BLOB_DIR).iterdir())
    listed = json.loads(run_cli("check", str(d), "--json", "-j", "1").stdout)["findings"]
    n = next(i for i, f in enumerate(listed, 1) if f["kind"] == "rank-divergent-graph")
    # a second hard link: whoever holds the other name can change the blob after the check
    (tmp_path / "elsewhere").mkdir()
    for b in blobs:
        os.link(b, tmp_path / "elsewhere" / b.name)
    r = run_cli("repro", str(d), "--finding", str(n), "-o", str(tmp_path / "b1"))
    assert r.returncode == 2 and "hard links" in r.stderr and "--trust" in r.stderr, r.stderr
    assert not (tmp_path / "b1").exists()
    shutil.rmtree(tmp_path / "elsewhere")
    # blobs the signature does not list (a signature over the logs and manifest only)
    key = signing.load_key(create=False)
    doc = json.loads((d / logformat.SIGNATURE_NAME).read_text())
    doc["files"] = {k: v for k, v in doc["files"].items() if not k.startswith(logformat.BLOB_DIR + "/")}
    doc["hmac"] = signing._mac(key, doc["key_id"], doc["files"])
    (d / logformat.SIGNATURE_NAME).write_text(json.dumps(doc))
    assert signing.verify(str(d)).ok
    r = run_cli("repro", str(d), "--finding", str(n), "-o", str(tmp_path / "b2"))
    assert r.returncode == 2 and "not covered by your signature" in r.stderr, r.stderr
    assert not (tmp_path / "b2").exists()


def test_a_relative_xdg_config_home_never_supplies_the_key(tmp_path, monkeypatch):
    home = tmp_path / "home"
    cap = tmp_path / "cap"
    (cap / "cfg" / "graphtrain-inspect").mkdir(parents=True)
    (cap / "cfg" / "graphtrain-inspect" / signing.KEY_NAME).write_text("00" * 32 + "\n")  # the capture's key
    monkeypatch.chdir(cap)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", "cfg")
    path = signing.key_path()
    assert os.path.isabs(path) and path == str(home / ".config" / "graphtrain-inspect" / signing.KEY_NAME)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "abs"))
    assert signing.key_path() == str(tmp_path / "abs" / "graphtrain-inspect" / signing.KEY_NAME)
