"""The user's source line of a node, from the innermost stack frame its node table keeps.

A node table row's `stack` (capture/graph_tables.py keeps the innermost frame of the node's
`meta['stack_trace']`; fxtext.py reads the same from a graph's `# File:` comments) reads
`File "model.py", line 42, in forward | y = x * 2`. A finding names that line as `source`:
`{"file", "line", "code"}` (and `fn`); a node with no stack that a pass introduced gets
`{"file", "line", "code", "created_by": pass}`: no model code made it, and the file line is the
pass's own that made the node where the capture noted it (the row's `created`), else None.
A node with no stack of its own is given the frame of the nearest node that has one, outside
torch's files, with `nearest_node` naming it (`nearest_source`): said so wherever it is shown.
Nothing here imports torch.
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Mapping

from graphtrain_inspect.capture.shared.logformat import NodeRow

_FRAME_RE = re.compile(r'File "(?P<file>[^"]*)", line (?P<line>\d+)(?:, in (?P<fn>[^|]*?))?\s*(?:\|\s?(?P<code>.*))?$')


def parse_frame(stack: Any) -> dict[str, Any] | None:
    """{"file", "line", "code", "fn"} of a row's `stack`, or None when it names no file line."""
    if not isinstance(stack, str):
        return None
    m = _FRAME_RE.match(stack.strip())
    if m is None:
        return None
    return {
        "file": m.group("file"),
        "line": int(m.group("line")),
        "code": (m.group("code") or "").strip(),
        "fn": (m.group("fn") or "").strip() or None,
    }


def node_source(row: Mapping[str, Any] | None, introduced_by: str | None) -> dict[str, Any] | None:
    """The source of a finding's node row: its frame, else the pass that created it (a node
    with no stack after a pass other than the trace), else None."""
    src = parse_frame(row.get("stack")) if row else None
    if src is not None:
        return src
    if row is not None and introduced_by and introduced_by != "trace":
        # the pass's own line that made it, where the capture noted it (the row's `created`)
        made = parse_frame(row.get("created")) or {"file": None, "line": None, "code": None}
        return {**made, "created_by": introduced_by}
    return None


def _torch_frame(src: dict[str, Any]) -> bool:
    """A frame in torch's own files (a collective's autograd forward): not the user's line."""
    f = str(src.get("file") or "").replace("\\", "/")
    return "/site-packages/torch/" in f or "/dist-packages/torch/" in f


NEAREST_REACH = 50  # how far (in rows) nearest_source looks for a node with a stack


def nearest_source(rows: list[NodeRow], name: str, reach: int = NEAREST_REACH) -> dict[str, Any] | None:
    """For a node with no stack: the frame of the nearest node (by position in the graph, within
    `reach` nodes) whose stack names a line outside torch, with `nearest_node` naming it."""
    at = next((i for i, r in enumerate(rows) if r.get("name") == name), None)
    if at is None:
        return None
    return nearest_from(rows.__getitem__, at, len(rows), reach)


def nearest_from(row_at: Callable[[int], NodeRow], at: int, n: int, reach: int) -> dict[str, Any] | None:
    """`nearest_source` around row `at` of `n` rows, each row got by `row_at` as the search
    reaches it, nearest first: a caller reading rows one by one reads the few between the node
    and the nearest one with a stack, not all in reach."""
    for d in range(1, reach + 1):
        for i in (at - d, at + d):
            if 0 <= i < n:
                row = row_at(i)
                src = parse_frame(row.get("stack"))
                if src is not None and not _torch_frame(src):
                    return {**src, "nearest_node": row.get("name")}
    return None


def source_text(src: dict[str, Any] | None, root: str | None = None) -> str | None:
    """One line for a table: `model.py:42  y = x * 2`, or `created by pass X [at passes.py:7  code]`.
    `root`: the directory the recorded program ran in (the manifest's `cwd`); a file under it is
    shown relative to it (`samples/model.py`, not the recording machine's `/work/main/...`)."""
    if not src:
        return None
    code = src.get("code") or ""
    file = src.get("file")
    if isinstance(file, str) and root and file.startswith(root.rstrip("/") + "/"):
        file = file[len(root.rstrip("/")) + 1 :]
    where = f"{file}:{src['line']}" + (f"  {code}" if code else "") if file is not None else None
    if where and src.get("nearest_node"):
        where += f"  (no stack of its own: nearest node with one, {src['nearest_node']})"
    if src.get("created_by"):
        return f"created by pass {src['created_by']}" + (f" at {where}" if where else "")
    return where


def surrounding_lines(src: dict[str, Any] | None, context: int = 6) -> list[tuple[int, str]] | None:
    """(line number, text) of the lines around the source line when its file exists on this
    machine and is text; None otherwise (a capture from another host, a pass-made node)."""
    if not src or not src.get("file") or not isinstance(src.get("line"), int):
        return None
    path = src["file"]
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > 32 << 20:
            return None
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    lines = data.decode("utf-8", "replace").splitlines()
    line = src["line"]
    if not 1 <= line <= len(lines):
        return None
    lo, hi = max(1, line - context), min(len(lines), line + context)
    return [(n, lines[n - 1]) for n in range(lo, hi + 1)]
