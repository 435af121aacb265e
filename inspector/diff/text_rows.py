"""Rows of a text diff for an interactive view: unified or side by side, unchanged stretches
folded, changed characters marked within a line.

    model = DiffModel(a_lines, b_lines, context=3)
    rows = model.rows("unified")                 # or "split"; folds closed
    rows = model.rows("split", expanded={0})     # fold 0 opened
    char_marks(row.a_text, row.b_text)           # ([(start, end)...] in a, [...] in b)

The line alignment (opcodes of `line_match.line_matcher`) is computed once; rows are rebuilt cheaply when the mode or
the open folds change. A `Row` of kind `fold` stands for `count` unchanged lines and carries the
fold's id. In unified mode a changed line is a `del` row and an `add` row that name each other
(`pair`), so the view can mark the characters that changed; in split mode it is one `change` row.
No textual, no rich, no torch.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from functools import lru_cache

from graphtrain_inspect.inspector.diff.line_match import line_matcher, unified_diff

Marks = list[tuple[int, int]]


@dataclass
class Row:
    kind: str  # same | del | add | change | fold
    a_no: int | None = None  # 0-based line in a
    b_no: int | None = None
    a_text: str | None = None
    b_text: str | None = None
    fold: int | None = None  # fold id (kind fold)
    count: int = 0  # lines folded (kind fold)
    pair: str | None = None  # unified: the other side's text of a changed line

    @property
    def changed(self) -> bool:
        return self.kind in ("del", "add", "change")

    def plain(self, mode: str = "unified", width: int = 0) -> str:
        """The row as diff text (`-`, `+`, ` ` prefixes; split: two columns with a marker)."""
        if self.kind == "fold":
            return f"@@ {self.count} unchanged lines @@"
        if mode == "unified":
            if self.kind == "del":
                return "-" + (self.a_text or "")
            if self.kind == "add":
                return "+" + (self.b_text or "")
            return " " + (self.b_text if self.b_text is not None else self.a_text or "")
        mark = {"same": " ", "change": "|", "del": "<", "add": ">"}[self.kind]
        left = self.a_text or ""
        if width:
            left = left[:width].ljust(width)
        return f"{left} {mark} {self.b_text or ''}".rstrip()


@dataclass
class _Block:
    tag: str
    i1: int
    i2: int
    j1: int
    j2: int
    fold: int | None = None


@dataclass
class DiffModel:
    a_lines: list[str]
    b_lines: list[str]
    context: int = 3
    blocks: list[_Block] = field(default_factory=list)

    def __post_init__(self) -> None:
        sm = line_matcher(self.a_lines, self.b_lines)
        n_fold = 0
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            b = _Block(tag, i1, i2, j1, j2)
            if tag == "equal" and self._foldable(b):
                b.fold = n_fold
                n_fold += 1
            self.blocks.append(b)
        self.folds = n_fold

    def _foldable(self, b: _Block) -> bool:
        n = b.i2 - b.i1
        keep = (0 if b.i1 == 0 else self.context) + (0 if b.i2 == len(self.a_lines) else self.context)
        return n - keep > 1

    @property
    def empty(self) -> bool:
        return all(b.tag == "equal" for b in self.blocks)

    @property
    def counts(self) -> dict[str, int]:
        c = {"removed": 0, "added": 0}
        for b in self.blocks:
            if b.tag != "equal":
                c["removed"] += b.i2 - b.i1
                c["added"] += b.j2 - b.j1
        return c

    def rows(self, mode: str = "unified", expanded: set[int] | frozenset[int] = frozenset()) -> list[Row]:
        a, b = self.a_lines, self.b_lines
        out: list[Row] = []
        for blk in self.blocks:
            if blk.tag == "equal":
                if blk.fold is None or blk.fold in expanded:
                    out.extend(
                        Row("same", i, j, a[i], b[j]) for i, j in zip(range(blk.i1, blk.i2), range(blk.j1, blk.j2))
                    )
                    continue
                head = 0 if blk.i1 == 0 else self.context
                tail = 0 if blk.i2 == len(a) else self.context
                out.extend(Row("same", blk.i1 + k, blk.j1 + k, a[blk.i1 + k], b[blk.j1 + k]) for k in range(head))
                n = blk.i2 - blk.i1 - head - tail
                out.append(Row("fold", blk.i1 + head, blk.j1 + head, fold=blk.fold, count=n))
                out.extend(
                    Row("same", blk.i2 - tail + k, blk.j2 - tail + k, a[blk.i2 - tail + k], b[blk.j2 - tail + k])
                    for k in range(tail)
                )
                continue
            la = list(range(blk.i1, blk.i2))
            lb = list(range(blk.j1, blk.j2))
            if mode == "unified":
                for k, i in enumerate(la):
                    pair = b[lb[k]] if blk.tag == "replace" and k < len(lb) else None
                    out.append(Row("del", i, None, a[i], None, pair=pair))
                for k, j in enumerate(lb):
                    pair = a[la[k]] if blk.tag == "replace" and k < len(la) else None
                    out.append(Row("add", None, j, None, b[j], pair=pair))
            else:
                for k in range(max(len(la), len(lb))):
                    ia = la[k] if k < len(la) else None
                    jb = lb[k] if k < len(lb) else None
                    kind = "change" if ia is not None and jb is not None else ("del" if jb is None else "add")
                    out.append(Row(kind, ia, jb, a[ia] if ia is not None else None, b[jb] if jb is not None else None))
        return out

    def unified_text(self, a_label: str = "a", b_label: str = "b") -> str:
        """The whole diff as `diff -u` text (three lines of context)."""
        lines = unified_diff(self.a_lines, self.b_lines, a_label, b_label, n=self.context)
        return "\n".join(lines) + "\n"


def hunk_bounds(rows: list[Row], index: int) -> tuple[int, int]:
    """[start, end) of the rows between the folds around `index` (the hunk that holds it)."""
    start = index
    while start > 0 and rows[start - 1].kind != "fold":
        start -= 1
    end = index + 1
    while end < len(rows) and rows[end].kind != "fold":
        end += 1
    if rows and 0 <= index < len(rows) and rows[index].kind == "fold":
        return index, index + 1
    return start, end


@lru_cache(maxsize=4096)
def char_marks(a: str | None, b: str | None) -> tuple[Marks, Marks]:
    """Character ranges that differ between two versions of a line: (in a, in b).

    Lines that have little in common are marked whole; small differences are widened to the
    word they are in, which reads better than single characters in identifiers."""
    if a is None or b is None:
        return ([(0, len(a))] if a else []), ([(0, len(b))] if b else [])
    if a == b:
        return [], []
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if len(a) + len(b) > 0 and sm.ratio() < 0.3:
        return [(0, len(a))], [(0, len(b))]
    ma: Marks = []
    mb: Marks = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        if i2 > i1 or tag != "insert":
            ma.append(_widen(a, i1, i2))
        if j2 > j1 or tag != "delete":
            mb.append(_widen(b, j1, j2))
    return _merge([m for m in ma if m[1] > m[0]]), _merge([m for m in mb if m[1] > m[0]])


def _widen(s: str, i: int, j: int) -> tuple[int, int]:
    while i > 0 and (s[i - 1].isalnum() or s[i - 1] == "_"):
        i -= 1
    while j < len(s) and (s[j].isalnum() or s[j] == "_"):
        j += 1
    return i, j


def _merge(marks: Marks) -> Marks:
    out: Marks = []
    for s, e in sorted(marks):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out
