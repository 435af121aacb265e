"""The user's signature on a capture: what lets `replay` unpickle it without `--trust`.

Replay unpickles GraphPickler blobs, and pickle runs code. What a capture says about itself (the
manifest's user, host and uid, the files' owner after a `cp`, `tar` or `git`) can be written by
anyone who can write the capture, so none of it decides trust. A secret can: a per-user key, made
on first use in the user's config directory (`$XDG_CONFIG_HOME/graphtrain-inspect/capture-key`,
else `~/.config/...`; mode 0600 in a 0700 directory), signs what replay reads, as notebook servers
sign the notebooks their user made.

HMAC-SHA256 from the standard library: the one who signs is the one who verifies (the same user,
the same key), so a shared secret is enough and public-key signatures would add a dependency and
nothing else; HMAC with a 256-bit key cannot be forged without the key.

What is signed (`DIR/signature.json`, version 2): every regular file under the capture directory
that any reader may open (manifest, rank logs, blobs, status files, torch_trace/ ...), each by its
path relative to the directory and its sha256; the signature file itself is the one file left out.
The capture as a whole is signed, not a chosen list of names, so a file added later (a `notes.log`
handed to `replay FILE`, a blob it points at) is *unlisted*: `verify` names it, replay never reads
an unlisted file without `--trust` (inspector.replay.plan), and `ls`/`check` report unlisted files.
An added file the directory reader itself opens (a `*_gti.log`, the manifest) undoes the signature
outright, since it would change what every command reads. A listed blob that is missing is no
failure (copies without blobs are common; replay says the blob is missing when it needs it).

Version 1 signatures (the manifest and the `*_gti.log` files only) are still read: every other file
is unlisted, i.e. unsigned, except the blobs, which v1 reached through the signed logs (each log
records its blobs' sha256 and replay checks a blob's bytes against it before unpickling).

`capture` signs at its end, once every blob child has written its record, only the files its own
processes can have written (`own_files`: not what another user put into `--out`);
`graphtrain-inspect trust DIR` signs a capture the user looked at; the bundled sample captures are signed as they are
unpacked (they come from the installed package, which is code the user already runs).

Not protected: someone who can read or write the key file (it is the user's secret, like an SSH
key). Replay verifies the bytes it read, not the files again by path (`verify`'s `known`;
inspector.read.read_once). docs/threat-model.md says the rest.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from graphtrain_inspect.capture.shared import logformat

KEY_NAME = "capture-key"
SIGNATURE_FORMAT = "graphtrain-inspect-signature"
SIGNATURE_VERSION = 2
READ_VERSIONS = (1, 2)
_KEY_ID_CONTEXT = b"graphtrain-inspect key id"
_SIGNATURE_LIMIT = 64 << 20


class KeyProblem(Exception):
    """The user's key cannot be made or read safely; one line says why."""


def key_path() -> str:
    """The key file's absolute path. A relative XDG_CONFIG_HOME is ignored, as the XDG spec says:
    it would name a folder under the current directory, which may be a capture's, so the
    capture would bring its own key."""
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".config")
    return os.path.abspath(os.path.join(base, "graphtrain-inspect", KEY_NAME))


def load_key(create: bool = True) -> bytes:
    """This user's key, made on first use (create). KeyProblem when it is missing (create=False),
    unreadable, or readable or writable by anyone else (then it no longer proves anything)."""
    path = key_path()
    try:
        return _read_key(path)
    except FileNotFoundError:
        if not create:
            raise KeyProblem(f"no key at {path} yet (made by the first capture or `trust`)") from None
    d = os.path.dirname(path)
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        tmp = f"{path}.tmp{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
        try:
            os.link(tmp, path)  # atomic and exclusive: of two first uses at once, one key wins
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        return _read_key(path)
    except OSError as e:
        raise KeyProblem(f"cannot make the signing key {path}: {e.strerror or e}") from None


def key_folder_problem() -> str | None:
    """A warning when the key's folder is open to others (any mode beyond 0700): whoever can
    write it can delete or swap the key file (a key of theirs is refused, being not yours, but
    yours can be taken away), and a readable one lists what is there. None when it is private
    or does not exist yet. The key file itself is refused outright when others can read it."""
    d = os.path.dirname(key_path())
    try:
        st = os.lstat(d)
    except OSError:
        return None
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        return f"the signing key's folder {d} is not a folder of yours (a link, or another user's): keep it private"
    if mode & 0o077:
        return (
            f"the signing key's folder {d} is open to others (mode {mode:04o}): others can remove or swap your key; "
            f"fix: chmod 700 {d}"
        )
    return None


def _read_key(path: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise
    except OSError as e:
        raise KeyProblem(f"cannot read the signing key {path}: {e.strerror or e} (a link is refused)") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise KeyProblem(f"the signing key {path} is not a regular file of yours; remove it to make a new one")
        if st.st_mode & 0o077:
            raise KeyProblem(
                f"the signing key {path} can be read or written by others (mode {stat.S_IMODE(st.st_mode):04o}): "
                f"anyone who reads it can sign captures you would load; chmod 600 it, or remove it to make a new one"
            )
        text = f.read(200).strip()
    try:
        key = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) < 32:
        raise KeyProblem(f"the signing key {path} is damaged; remove it to make a new one")
    return key


def key_id(key: bytes) -> str:
    """A name for the key that says nothing about it: which key signed, not the key."""
    return hmac.new(key, _KEY_ID_CONTEXT, hashlib.sha256).hexdigest()[:16]


def reader_names(directory: str) -> list[str]:
    """The files the directory reader itself opens to decide what a capture holds: the manifest and
    the rank logs (logformat's log names), whether or not each exists. What a version 1 signature
    listed."""
    try:
        names = os.listdir(directory)
    except OSError:
        names = []
    logs = sorted(n for n in names if n.startswith(logformat.LOG_PREFIX) and n.endswith(logformat.LOG_SUFFIX))
    return [logformat.MANIFEST_NAME, *logs]


def _left_out(rel: str) -> bool:
    # the signature itself, and its temporary file while it is being replaced
    return rel == logformat.SIGNATURE_NAME or rel.startswith(logformat.SIGNATURE_NAME + ".tmp")


def capture_files(directory: str) -> list[str]:
    """Every entry under `directory` a reader may open, as `/`-separated relative paths, sorted;
    links and other non-regular entries included (they are never signed, so they show as
    unlisted). Directories are walked without following links."""
    out: list[str] = []
    for root, dirs, files in os.walk(directory, followlinks=False):
        rel_root = os.path.relpath(root, directory)
        for n in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            rel = n if rel_root == "." else f"{rel_root.replace(os.sep, '/')}/{n}"
            if not _left_out(rel):
                out.append(rel)
    return sorted(out)


def _file_sha256(path: str) -> str | None:
    """sha256 of a regular file (a link, FIFO or device is never read: None)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        h = hashlib.sha256()
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def digests(directory: str, *, own: bool = False) -> dict[str, str]:
    """What a version 2 signature lists: each regular file under `directory` and its sha256;
    `own`: only the files `own_files` finds the capture's own."""
    out: dict[str, str] = {}
    names = own_files(directory) if own else capture_files(directory)
    for rel in names:
        sha = _file_sha256(os.path.join(directory, *rel.split("/")))
        if sha is not None:
            out[rel] = sha
    return out


def _private(st: os.stat_result, uid: int) -> bool:
    return st.st_uid == uid and not st.st_mode & 0o022


def own_files(directory: str) -> list[str]:
    """The files under `directory` that only this user's processes can have made (what `capture`
    signs at its end, not what was found there): regular files of this user with one link, in
    folders of this user's that no one else can write, the capture directory included. A file
    another user placed is theirs (or in a folder they can write), a hard link to a file of this
    user's elsewhere has a second link: neither is signed, both show as unlisted."""
    uid = os.getuid()
    try:
        if not _private(os.lstat(directory), uid):
            return []
    except OSError:
        return []
    out = []
    for rel in capture_files(directory):
        parts = rel.split("/")
        try:
            if not all(_private(os.lstat(os.path.join(directory, *parts[:k])), uid) for k in range(1, len(parts))):
                continue
            st = os.lstat(os.path.join(directory, *parts))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_uid == uid and st.st_nlink == 1:
            out.append(rel)
    return out


def _mac(key: bytes, kid: str, files: dict[str, Any]) -> str:
    body = orjson.dumps({"key_id": kid, "files": files}, option=orjson.OPT_SORT_KEYS)
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def sign(directory: str, key: bytes | None = None, *, own: bool = False) -> str:
    """Sign the capture in `directory` with this user's key; returns the key id. `own`: only the
    files the capture's own processes can have written (`own_files`; `capture` at its end), else
    every file (`trust`: the user vouches for what is there). KeyProblem, OSError."""
    key = load_key() if key is None else key
    kid = key_id(key)
    files = digests(directory, own=own)
    doc = {
        "format": SIGNATURE_FORMAT,
        "version": SIGNATURE_VERSION,
        "key_id": kid,
        "signed": time.time(),
        "files": files,
        "hmac": _mac(key, kid, files),
    }
    path = os.path.join(directory, logformat.SIGNATURE_NAME)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        try:
            os.unlink(tmp)  # a leftover, or something planted under the name: never written through
        except FileNotFoundError:
            pass
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        with os.fdopen(os.open(tmp, flags, 0o644), "wb") as f:
            f.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return kid


@dataclass
class Verdict:
    ok: bool
    why: str  # ok: whose signature; else why it is not trusted, in a few words
    problem: str = ""  # unsigned | damaged | other-key | changed | no-key
    version: int = 0  # of the signature read (0: none)
    listed: dict[str, str] = field(default_factory=dict)  # signed file -> sha256 (ok only)
    unlisted: list[str] = field(default_factory=list)  # files under the capture it does not cover (ok only)

    def covers(self, rel: str) -> bool:
        """Whether the file at `rel` (relative, `/`-separated) is signed: listed (and so checked
        unchanged), or a blob under a version 1 signature (reached through the signed logs)."""
        if not self.ok:
            return False
        if rel in self.listed:
            return True
        return self.version == 1 and rel.startswith(logformat.BLOB_DIR + "/")


def _read_signature(directory: str) -> tuple[dict | None, Verdict | None]:
    path = os.path.join(directory, logformat.SIGNATURE_NAME)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None, Verdict(False, f"its {logformat.SIGNATURE_NAME} is not a regular file", "damaged")
            data = f.read(_SIGNATURE_LIMIT)
    except FileNotFoundError:
        return None, Verdict(
            False,
            "it is unsigned (no signature of yours: made by someone else, elsewhere, or by an older version)",
            "unsigned",
        )
    except OSError as e:
        return None, Verdict(False, f"its {logformat.SIGNATURE_NAME} cannot be read ({e.strerror or e})", "damaged")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        doc = None
    if (
        not isinstance(doc, dict)
        or doc.get("format") != SIGNATURE_FORMAT
        or doc.get("version", 1) not in READ_VERSIONS
        or not isinstance(doc.get("files"), dict)
        or not isinstance(doc.get("key_id"), str)
        or not isinstance(doc.get("hmac"), str)
    ):
        return None, Verdict(False, f"its {logformat.SIGNATURE_NAME} is damaged", "damaged")
    return doc, None


def unlisted(directory: str) -> list[str] | None:
    """Files under the capture its signature does not list (None: no readable signature). Names
    only, no key and no hashing: what `ls` and `check` report; `verify` is what decides trust."""
    doc, bad = _read_signature(directory)
    if doc is None:
        return None
    return _unlisted(directory, doc)


def _unlisted(directory: str, doc: dict) -> list[str]:
    files = doc["files"]
    if doc.get("version", 1) == 1:
        return [r for r in capture_files(directory) if r not in files and not r.startswith(logformat.BLOB_DIR + "/")]
    return [r for r in capture_files(directory) if r not in files]


def verify(directory: str, known: dict[str, str] | None = None) -> Verdict:
    """Whether the capture in `directory` carries this user's signature over its current files.
    ok: every listed file is unchanged, and no file the directory reader opens was added; files
    added elsewhere are named in `unlisted` (and are not covered). `known`: the sha256 of files the
    caller read once and holds (by relative path), compared as they were read, not read again."""
    doc, bad = _read_signature(directory)
    if doc is None:
        assert bad is not None
        return bad
    try:
        key = load_key(create=False)
    except KeyProblem as e:
        if not os.path.lexists(key_path()):
            return Verdict(
                False, f"it is signed by another key ({str(doc['key_id'])[:16]}; you have no key yet)", "other-key"
            )
        return Verdict(False, f"your key cannot be used: {e}", "no-key")
    kid = key_id(key)
    if doc["key_id"] != kid:
        return Verdict(
            False,
            f"it is signed by another key ({doc['key_id'][:16]}, not yours: another user or machine)",
            "other-key",
        )
    if not hmac.compare_digest(_mac(key, kid, doc["files"]), doc["hmac"]):
        return Verdict(False, f"its {logformat.SIGNATURE_NAME} was changed after it was signed", "changed")
    version = doc.get("version", 1)
    signed = doc["files"]
    for name in reader_names(directory):
        if name not in signed:
            return Verdict(False, f"it changed since it was signed: {name} was added", "changed")
    for name in sorted(signed):
        path = os.path.join(directory, *str(name).split("/"))
        now = known[name] if known is not None and name in known else _file_sha256(path)
        if now == signed[name]:
            continue
        gone = not os.path.lexists(path)
        if gone and version >= 2 and str(name).startswith(logformat.BLOB_DIR + "/"):
            continue  # a copy without its blobs: replay says a blob is missing when it needs one
        what = "removed" if gone else "changed"
        return Verdict(False, f"it changed since it was signed: {name} was {what}", "changed")
    extra = _unlisted(directory, doc)
    return Verdict(True, f"signed by you (key {kid})", "", version, dict(signed), extra)
