"""A capture's files read once each, for the commands whose decisions must rest on verified bytes.

`replay` and `repro` decide what runs from a capture's manifest and rank logs. Reading a file by its
path twice (once to parse it, once to hash it) lets whoever can write the capture swap it in
between: the parsed file decides, the hashed one is signed. So these commands read each file once,
through one descriptor opened relative to the capture directory's own descriptor without following
a link (O_NOFOLLOW; a linked `status/` folder is not entered either), refuse anything but a regular
file (fstat: no FIFO, device or directory), and hand the reader those bytes (`Snapshot`): the bytes
hashed against the signature are the bytes parsed (inspector.replay.plan.open_verified).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass, field

from graphtrain_inspect.capture.shared import logformat

_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_CHUNK = 8 << 20
# as the directory reader's own limit on a manifest (inspector.read.capture_index)
MANIFEST_LIMIT = 64 << 20


def _why(e: OSError) -> str:
    if e.errno in (errno.ELOOP, errno.EMLINK):
        return "a link (not followed)"
    if e.errno == errno.ENOTDIR:
        return "not a directory (a link or a file)"
    return e.strerror or str(e)


def open_dir(name: str, dir_fd: int | None = None, *, follow: bool = True) -> int:
    """A descriptor of the directory `name` (relative to `dir_fd` when given); `follow` off: a link
    is refused (OSError). The capture directory the user named is followed; folders inside it not."""
    flags = _DIR_FLAGS | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as e:
        raise OSError(e.errno, _why(e)) from None


def read_regular(name: str, dir_fd: int | None = None, limit: int | None = None) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file `name` (relative to `dir_fd`), read through one descriptor
    opened without following a link, and its fstat. OSError with a one-line reason for a link, a
    FIFO, a device, a directory, or a file over `limit` bytes."""
    try:
        fd = os.open(name, _FLAGS, dir_fd=dir_fd)
    except OSError as e:
        raise OSError(e.errno, _why(e)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, device or directory)")
        if hasattr(os, "O_NONBLOCK"):
            os.set_blocking(fd, True)
        chunks = []
        got = 0
        while True:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
            if limit is not None and got > limit:
                raise OSError(errno.EFBIG, f"larger than {limit} bytes")
        return b"".join(chunks), st
    finally:
        os.close(fd)


@dataclass
class Snapshot:
    """The files of one capture a reader opens (manifest, rank logs, status files; or the one log
    file given), each read once: their bytes, sha256 and fstat by `/`-separated path relative to
    `base`; `problems`: the ones that could not be read, and why."""

    base: str
    data: dict[str, bytes] = field(default_factory=dict)
    sha256: dict[str, str] = field(default_factory=dict)
    stats: dict[str, os.stat_result] = field(default_factory=dict, repr=False)
    problems: dict[str, str] = field(default_factory=dict)
    single: str | None = None  # the one log file given (not a directory)

    def rel(self, path: str) -> str:
        return os.path.relpath(os.path.abspath(path), self.base).replace(os.sep, "/")

    def names(self, folder: str = "") -> list[str]:
        """The entries of `folder` (relative, "" for the capture directory) that were read or tried."""
        prefix = folder.rstrip("/") + "/" if folder else ""
        out = set()
        for rel in (*self.data, *self.problems):
            if rel.startswith(prefix) and "/" not in rel[len(prefix) :]:
                out.add(rel[len(prefix) :])
        return sorted(out)

    def has_folder(self, folder: str) -> bool:
        return any(r.startswith(folder + "/") for r in (*self.data, *self.problems))

    def read(self, path: str) -> bytes:
        """The bytes read of `path` (absolute or relative to the working directory); OSError when
        it was not read (why, if it was tried)."""
        rel = self.rel(path)
        got = self.data.get(rel)
        if got is None:
            raise OSError(errno.ENOENT, self.problems.get(rel, "not among the files read"))
        return got

    def add(self, rel: str, data: bytes, st: os.stat_result) -> None:
        self.data[rel] = data
        self.sha256[rel] = hashlib.sha256(data).hexdigest()
        self.stats[rel] = st


def _is_our_log(name: str) -> bool:
    return name.startswith(logformat.LOG_PREFIX) and name.endswith(logformat.LOG_SUFFIX)


def snapshot(path: str) -> Snapshot:
    """Read the files a capture reader opens under `path` (a capture directory, or one log file),
    each once. OSError when the directory itself cannot be opened or listed."""
    if not os.path.isdir(path):
        base = os.path.dirname(os.path.abspath(path))
        name = os.path.basename(path)
        snap = Snapshot(base, single=name)
        dfd = open_dir(base)
        try:
            _take(snap, dfd, "", name)
        finally:
            os.close(dfd)
        return snap
    snap = Snapshot(os.path.abspath(path))
    dfd = open_dir(path)
    try:
        names = sorted(os.listdir(dfd))
        for n in names:
            if n == logformat.MANIFEST_NAME:
                _take(snap, dfd, "", n, MANIFEST_LIMIT)
            elif _is_our_log(n):
                _take(snap, dfd, "", n)
        if logformat.STATUS_DIR in names:
            try:
                sfd = open_dir(logformat.STATUS_DIR, dfd, follow=False)
            except OSError as e:
                snap.problems[logformat.STATUS_DIR + "/"] = str(e.strerror or e)
            else:
                try:
                    for n in sorted(os.listdir(sfd)):
                        if logformat.status_of_file_name(n) is not None:
                            _take(snap, sfd, logformat.STATUS_DIR + "/", n, logformat.STATUS_BYTES * 4)
                finally:
                    os.close(sfd)
    finally:
        os.close(dfd)
    return snap


def _take(snap: Snapshot, dfd: int, prefix: str, name: str, limit: int | None = None) -> None:
    try:
        data, st = read_regular(name, dfd, limit)
    except OSError as e:
        snap.problems[prefix + name] = str(e.strerror or e)
        return
    snap.add(prefix + name, data, st)
