"""Notice that a capture is still being written: a cheap signature of its files to poll.

    sig = files_signature(path)          # sizes and mtimes of the logs and the manifest
    if files_signature(path) != sig: ... # reopen: new records arrived

A stat per file, nothing read: polling once a second costs nothing even on a large capture.
"""

from __future__ import annotations

import os

from graphtrain_inspect.capture.shared import logformat


def files_signature(path: str) -> tuple:
    """(name, size, mtime_ns) of the manifest and every log of a capture directory (or one file)."""
    out = []
    try:
        if os.path.isfile(path):
            st = os.stat(path)
            return ((os.path.basename(path), st.st_size, st.st_mtime_ns),)
        names = sorted(os.listdir(path))
    except OSError:
        return ()
    for n in names:
        if n == logformat.MANIFEST_NAME or (n.startswith(logformat.LOG_PREFIX) and n.endswith(".log")):
            try:
                st = os.stat(os.path.join(path, n))
            except OSError:
                continue
            out.append((n, st.st_size, st.st_mtime_ns))
    return tuple(out)
