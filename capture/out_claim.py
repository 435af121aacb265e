"""The capture folder (`--out`) made this capture's before anything is written into it (an
exclusive claim file in a folder of this user's that no one else can write), and given back
when the command never ran.
"""

from __future__ import annotations

import os
import shlex
import stat

from graphtrain_inspect.capture import nodes
from graphtrain_inspect.capture.manifest import NOFOLLOW
from graphtrain_inspect.capture.shared import logformat


class ClaimRefused(Exception):
    """--out cannot be this capture's; one line says why."""


def claim(out: str) -> bool:
    """Make `out` this capture's before anything is written into it: created here (mkdir is
    exclusive; mode 0700), or an existing empty directory of this user's that no one else can
    write (another user who could would add files the capture then signs); either way the claim
    file is then created with O_EXCL, so of two captures started at once on one --out exactly one
    gets it (a check for emptiness followed by a write leaves a gap that both pass). Returns
    whether `out` was created here (release removes it then). ClaimRefused otherwise, its line
    naming the fix; nothing is written then."""
    parent = os.path.dirname(out)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as e:
        raise ClaimRefused(f"cannot create {parent}: {e.strerror or e}") from None
    try:
        os.mkdir(out, 0o700)
        made = True
    except FileExistsError:
        made = False
        problem = foreign_dir_problem(out)
        if problem:
            raise ClaimRefused(problem) from None
        try:
            if os.listdir(out):
                raise ClaimRefused(
                    f"{out} already exists and is not an empty directory (another capture's?); choose another --out"
                )
        except OSError as e:
            raise ClaimRefused(f"cannot list {out}: {e.strerror or e}") from None
    except OSError as e:
        raise ClaimRefused(f"cannot create {out}: {e.strerror or e}") from None
    path = os.path.join(out, logformat.CLAIM_NAME)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o644)
    except FileExistsError:
        raise ClaimRefused(
            f"{out} was just claimed by another capture started at the same time; choose another --out"
        ) from None
    except OSError as e:
        if made:
            _rmdir(out)
        raise ClaimRefused(f"cannot claim {out}: {e.strerror or e}") from None
    with os.fdopen(fd, "w") as f:
        f.write(f"{os.getpid()}\n")
    return made


def foreign_dir_problem(out: str) -> str | None:
    """Why the existing `out` cannot be a capture's directory (None when it can): not a directory
    (or a link to one), another user's, or writable by group or others."""
    try:
        st = os.lstat(out)
    except OSError as e:
        return f"cannot use {out}: {e.strerror or e}; choose another --out"
    if not stat.S_ISDIR(st.st_mode):
        return f"{out} already exists and is not a directory (or is a link); choose another --out"
    if st.st_uid != os.getuid():
        return f"{out} belongs to another user (uid {st.st_uid}); choose another --out (capture creates it, mode 0700)"
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        return (
            f"{out} can be written by others (mode {mode:04o}): what they put there would be signed as your capture; "
            f"fix: chmod go-w {shlex.quote(out)}, or choose a new --out (capture creates it, mode 0700)"
        )
    return None


def release_part(out: str, made: bool, node: nodes.Node, joined: bool) -> None:
    """`release`, for this node's part of a folder it claimed or joined (another's files stay)."""
    if not nodes.release_part(out, node, joined):
        release(out, made)


def release(out: str, made: bool) -> None:
    """Undo `claim` for a command that never ran: only the files the launcher wrote go, and the
    directory only if it was made here, so --out can be used again."""
    for name in (logformat.CLAIM_NAME, logformat.MANIFEST_NAME):
        try:
            os.unlink(os.path.join(out, name))
        except OSError:
            pass
    _rmdir(os.path.join(out, "torch_trace"))  # made by `run` before the command, empty if it never ran
    if made:
        _rmdir(out)


def _rmdir(path: str) -> None:
    try:
        os.rmdir(path)  # only if empty: never removes what someone else put there
    except OSError:
        pass
