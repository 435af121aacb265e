"""The report's diffs and code, cut down to what matters: the hunks that mention a finding's node
(every hunk up to a cap when no node is named), a window of a graph's code or of generated code
around a line. The diffs are those `diff` prints (inspector.diff.graph_diff: the same alignment
and rank normalization); highlighting is pygments', which escapes what it renders.

Every excerpt is bounded (MAX_LINES lines of at most MAX_WIDTH characters), so a 30k-node graph
costs the report a window, not the graph.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.read.capture_reader import Capture
    from graphtrain_inspect.inspector.read.stages import Stage

MAX_LINES = 160  # lines of one excerpt
MAX_WIDTH = 400  # characters of one line: a node with a huge literal must not be the report
MAX_HUNKS = 12  # hunks of one diff when no node is named
AROUND = 8  # lines either side of a node in a code window


def clip(line: str) -> str:
    return line if len(line) <= MAX_WIDTH else line[: MAX_WIDTH - 1] + "\u2026"


def _mentions(line: str, nodes: Iterable[str]) -> bool:
    return any(re.search(rf"(?<![\w.]){re.escape(n)}(?!\w)", line) for n in nodes if n)


def _defines(line: str, node: str) -> bool:
    """Whether an FX code line defines `node`: `node = ...` or `node: "f32[4]" = ...`."""
    return re.match(rf"\s*{re.escape(node)}(:| =)", line) is not None


def elide_diff(lines: list[str], focus: Iterable[str] = ()) -> tuple[list[str], int]:
    """A unified diff cut to its hunks that mention a focus node (all hunks, up to MAX_HUNKS,
    when none does), then to MAX_LINES: (lines, hunks left out)."""
    focus = [n for n in focus if n]
    head = [l for l in lines[:2] if l.startswith(("---", "+++"))]
    hunks: list[list[str]] = []
    for l in lines[len(head) :]:
        if l.startswith("@@") or not hunks:
            hunks.append([])
        hunks[-1].append(l)
    chosen = [h for h in hunks if _mentions("\n".join(h), focus)] if focus else []
    if not chosen:
        chosen = hunks[:MAX_HUNKS]
    out = head + [l for h in chosen for l in h]
    skipped = len(hunks) - len(chosen)
    if len(out) > MAX_LINES:
        out = out[:MAX_LINES] + ["@@ \u2026 (cut: the diff goes on) @@"]
    return [clip(l) for l in out], skipped


def window(lines: list[str], focus: Iterable[str] = (), line: int | None = None) -> tuple[list[str], int] | None:
    """The lines around the first line that defines or uses a focus node (or around `line`,
    1-based): (lines, first line number). None when nothing is found."""
    at = None
    if line is not None and 1 <= line <= len(lines):
        at = line - 1
    else:
        focus = [n for n in focus if n]
        defs = [i for i, l in enumerate(lines) if any(_defines(l, n) for n in focus)]
        uses = defs or [i for i, l in enumerate(lines) if _mentions(l, focus)]
        if uses:
            at = uses[0]
    if at is None:
        return None
    lo, hi = max(0, at - AROUND), min(len(lines), at + AROUND + 1)
    return [clip(l) for l in lines[lo:hi]], lo + 1


def highlight_diff(lines: list[str]) -> str:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import DiffLexer

    return highlight("\n".join(lines) + "\n", DiffLexer(), HtmlFormatter(cssclass="hl", wrapcode=True))


def highlight_code(lines: list[str], first: int, marked: Iterable[int] = ()) -> str:
    """Python lines numbered from `first`, the lines numbered in `marked` highlighted."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    hl = [n - first + 1 for n in marked if first <= n < first + len(lines)]
    fmt = HtmlFormatter(cssclass="hl", wrapcode=True, linenos="inline", linenostart=first, hl_lines=hl)
    return highlight("\n".join(lines) + "\n", PythonLexer(), fmt)


def css() -> str:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style="default").get_style_defs(".hl")


def node_lines(changes: list[str], focus: Iterable[str]) -> tuple[list[str], bool]:
    """The node changes (NodeDiff.summary lines) that name a focus node, or the first few when
    none does: (lines, whether they are the focus nodes' own)."""
    focus = [n for n in focus if n]
    picked = [c for c in changes if _mentions(c, focus)] if focus else []
    return [clip(c) for c in (picked or changes)[:20]], bool(picked)


def pass_excerpt(cap: "Capture", rank: int, stage: "Stage", focus: list[str]) -> dict | None:
    """What the stage's pass did on `rank`, around the focus nodes: node changes and text diff."""
    from graphtrain_inspect.inspector.diff import graph_diff as gdiff

    p = stage.pass_rec
    if p is None or p.before is None:
        return None
    role = stage.key.role
    changes: list[str] = []
    for r, d in gdiff.pass_diffs(cap, rank, p):
        if r == role and d is not None:
            changes = [ch.summary() for ch in d.changes()]
    texts = gdiff.pass_text_diff(cap, rank, p, role)
    diff = gdiff.text_diff(*texts, f"before #{p.seq} {p.name}", f"after #{p.seq} {p.name}") if texts else []
    lines, skipped = elide_diff(diff, focus)
    nodes, on_focus = node_lines(changes, focus)
    return {
        "title": f"#{p.seq} {p.name} on rank {rank}: before vs after",
        "nodes": nodes,
        "on_focus": on_focus,
        "node_count": len(changes),
        "html": highlight_diff(lines) if lines else None,
        "skipped": skipped,
    }


def rank_excerpt(cap: "Capture", a: "Stage", b: "Stage", focus: list[str], made: dict | None = None) -> dict | None:
    """One stage's graph on two ranks, normalized as `diff --ranks` does, around the focus nodes;
    when the ranks agree, a window of the graph around the nodes instead. `made`: the diffs of
    graph pairs made for earlier excerpts (stages whose pass left the graph as it was show the
    same two graphs again)."""
    from graphtrain_inspect.inspector.diff import graph_diff as gdiff
    from graphtrain_inspect.inspector.diff.rank_diffs import rank_diff_gids

    pair = (a.rank, a.gid, b.rank, b.gid)
    got = made.get(pair) if made is not None else None
    if got is None:
        d = rank_diff_gids(cap, a.rank, a.gid, b.rank, b.gid)
        changes = [ch.summary() for ch in d.changes()] if d is not None else []
        la = gdiff.rank_text(cap, a.rank, a.gid) or []
        lb = gdiff.rank_text(cap, b.rank, b.gid) or []
        diff = gdiff.text_diff(la, lb, f"rank {a.rank} {a.gid}", f"rank {b.rank} {b.gid}")
        got = (d is not None and d.empty, changes, la, diff)
        if made is not None:
            made[pair] = got
    agree, changes, la, diff = got
    nodes, on_focus = node_lines(changes, focus)
    out = {
        "title": f"{a.key.label()} ({a.key.pipeline_label()}): rank {a.rank} vs rank {b.rank}",
        "nodes": nodes,
        "on_focus": on_focus,
        "node_count": len(changes),
        "html": None,
        "skipped": 0,
        "agree": agree,
    }
    if diff:
        lines, out["skipped"] = elide_diff(diff, focus)
        out["html"] = highlight_diff(lines)
    else:
        got = window(la, focus)
        if got is not None:
            out["html"] = highlight_code(got[0], got[1])
    return out


def graph_excerpt(cap: "Capture", stage: "Stage", focus: list[str]) -> dict | None:
    """One rank's graph at a stage, a window around the focus node's line (marked): for a finding
    with neither a pass diff (already in the traced graph) nor a rank diff (one rank)."""
    from graphtrain_inspect.inspector.diff.graph_diff import normalize_code

    code = cap.graph_code(stage.rank, stage.gid)
    got = window(normalize_code(code), focus) if code is not None else None
    if got is None:
        return None
    lines, first = got
    marked = [first + i for i, l in enumerate(lines) if any(_defines(l, n) for n in focus if n)]
    return {
        "title": f"{stage.key.label()} ({stage.key.pipeline_label()}) on rank {stage.rank}: {stage.gid}",
        "nodes": [],
        "html": highlight_code(lines, first, marked[:1]),
        "skipped": 0,
    }


def generated_code_excerpt(cap: "Capture", rank: int, oid: str, line: int | None) -> dict | None:
    """The generated code of one rank around `line` (1-based), that line marked."""
    from graphtrain_inspect.inspector.read.output_code import code_text, output_codes

    oc = next((o for o in output_codes(cap, rank) if o.oid == oid), None)
    text = code_text(cap, oc) if oc is not None else None
    if text is None or not isinstance(line, int):
        return None
    got = window(text.splitlines(), line=line)
    if got is None:
        return None
    return {
        "title": f"generated code on rank {rank} ({oid}), line {line}",
        "html": highlight_code(got[0], got[1], [line]),
    }
