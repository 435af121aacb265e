"""The files of a capture that its signature does not vouch for, as `ls` and `check` report them.

Replay reads only files the user's signature lists (capture.shared.signing, inspector.replay.plan):
browsing reads no pickle, so `ls` and `check` still read everything, and say which files are
unlisted (added after the capture was signed) and which blobs are not plainly the capture's own
(a second hard link, another filesystem), the files replay would refuse without `--trust`.
Only names and `lstat`: no hashing, no key.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from graphtrain_inspect.capture.shared import logformat, signing

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.read.capture_reader import Capture

_NAMED = 10  # files named in one note; the rest counted


def capture_dir(cap: "Capture") -> str:
    """The directory a capture (or the one log file it was opened from) lives in."""
    return cap.path if os.path.isdir(cap.path) else os.path.dirname(os.path.abspath(cap.path))


def blob_link_problem(base: str, st: os.stat_result, base_dev: int | None = None) -> str | None:
    """Why a blob file is not simply the capture's own (None when it is): more than one hard link
    (the same bytes are reachable from elsewhere, where someone may change them after `trust` or
    the capture checked them) or on another filesystem than the capture (a mount inside it).
    `base_dev`: the capture directory's st_dev as read from its open descriptor (else by path)."""
    if st.st_nlink > 1:
        return f"has {st.st_nlink} hard links (the same file is reachable from outside the capture)"
    dev = base_dev
    if dev is None:
        try:
            dev = os.stat(base).st_dev
        except OSError:
            return None
    if st.st_dev != dev:
        return "is on another filesystem than the capture (a mount inside it)"
    return None


def _names(names: list[str]) -> str:
    more = f" and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
    return ", ".join(names[:_NAMED]) + more


def integrity_notes(cap: "Capture") -> list[str]:
    """One line per kind of file replay would not read without --trust (empty for a capture whose
    files are all signed, an unsigned capture, or torch's own logs)."""
    if cap.kind != "capture":
        return []
    base = capture_dir(cap)
    notes: list[str] = []
    extra = signing.unlisted(base)
    if extra:
        notes.append(
            f"{len(extra)} file(s) not covered by the capture's signature (added after it was signed, or not "
            f"regular files; replay reads none of them without --trust): {_names(extra)}"
        )
    bdir = os.path.join(base, logformat.BLOB_DIR)
    try:
        names = sorted(os.listdir(bdir))
    except OSError:
        names = []
    for n in names:
        try:
            st = os.lstat(os.path.join(bdir, n))
        except OSError:
            continue
        problem = blob_link_problem(base, st) if not os.path.islink(os.path.join(bdir, n)) else None
        if problem:
            notes.append(f"blob {logformat.BLOB_DIR}/{n} {problem}: replay refuses it without --trust")
    return notes
