"""A text diff, unified or side by side: changed characters marked, unchanged stretches folded.

The alignment is computed once (in a worker, `graphtrain_inspect.inspector.diff.text_rows.DiffModel`); switching mode or
opening a fold only rebuilds the row list, and rows are rendered only when on screen.
"""

from __future__ import annotations

from rich.segment import Segment
from textual import events
from textual.binding import Binding

from graphtrain_inspect.inspector.diff.text_rows import DiffModel, Row, char_marks, hunk_bounds
from graphtrain_inspect.inspector.read.code_locate import CodeIndex
from graphtrain_inspect.tui.highlight import Palette, token_spans
from graphtrain_inspect.tui.widgets.line_view import LineView, Mark
from graphtrain_inspect.tui.widgets.view_result import Drawn, ResultContext


def elide(text: str, layers: list, head: int, cut: int, style) -> tuple[str, list]:
    """`text` with text[head:cut] replaced by one `…` (styled `style`), layers moved to match."""
    shift = head + 1 - cut
    out = []
    for layer in layers:
        moved = []
        for a, b, st in layer:
            if a < head:
                moved.append((a, min(b, head), st))
            if b > cut:
                moved.append((max(a, cut) + shift, b + shift, st))
        out.append(moved)
    out.append([(head, head + 1, style)])
    return text[:head] + "…" + text[cut:], out


class DiffView(LineView):
    BINDINGS = [Binding("enter", "unfold", "Unfold", show=False, id="diff.unfold")]

    def __init__(self, *, id: str | None = None, across_ranks: bool = False) -> None:
        super().__init__(id=id)
        self.across_ranks = across_ranks  # the rank diff (its status line names the ranks compared)
        self.model: DiffModel | None = None
        self.mode = "unified"
        self.expanded: set[int] = set()
        self.rows: list[Row] = []
        self.a_label = "a"
        self.b_label = "b"
        self.a_index: CodeIndex | None = None
        self.b_index: CodeIndex | None = None
        self.key: tuple | None = None
        self.split_x = 0
        self._num = 4
        self._width = 0
        self.message_text = "select a pass in the tree"

    # -- content ------------------------------------------------------------------------------------

    def show_result(self, d, status, ctx: ResultContext) -> Drawn:
        """A diff (tui.session.DiffResult), or None: there is none to show, and the line says why.
        `status`: the rank diff's ranks and their agreement, for its status line."""
        status_line = "  ".join(status or []) + "   b: base · [ ]: rank" if self.across_ranks else None
        if d is not None:
            self.show(d.model, a_label=d.a_label, b_label=d.b_label, a_index=d.a_index, b_index=d.b_index, key=d.key)
            return Drawn(title=f"{d.title} · {d.summary} · {self.mode}", key=d.key, status=status_line)
        p = ctx.session.pass_entry(ctx.place) if ctx.session and not self.across_ranks else None
        if p is not None and p.before is None:
            self.clear("this entry has no input graph: torch logged its graph on its own (see the code view)")
        elif p is not None and not p.after:
            self.clear(f"the pass {p.status}: it produced no graph" + (f" ({p.exception})" if p.exception else ""))
        else:
            self.clear(ctx.unreadable("graphs of this pass"))
        return Drawn(title=ctx.label, status=status_line)

    def show(
        self,
        model: DiffModel,
        *,
        a_label: str,
        b_label: str,
        a_index: CodeIndex | None = None,
        b_index: CodeIndex | None = None,
        key: tuple | None = None,
    ) -> None:
        same = key is not None and key == self.key
        self.model = model
        self.a_label, self.b_label = a_label, b_label
        self.a_index, self.b_index = a_index, b_index
        self.key = key
        if not same:
            self.expanded = set()
        self.mark = None
        self._num = len(str(max(len(model.a_lines), len(model.b_lines), 1)))
        self._width = max(max(map(len, model.a_lines), default=0), max(map(len, model.b_lines), default=0))
        self.message_text = "no differences" if model.empty else None
        self._rebuild(keep=None)

    def clear(self, message: str) -> None:
        self.model = None
        self.rows = []
        self.key = None
        self.mark = None
        self.message_text = message
        self.rows_changed()

    def _rebuild(self, keep: tuple[int | None, int | None] | None) -> None:
        self.rows = self.model.rows(self.mode, self.expanded) if self.model is not None else []
        if self.model is not None and self.model.empty:
            self.rows = []
        self.rows_changed(keep_cursor=keep is not None)
        if keep is not None:
            self.set_cursor(self.row_of(*keep), center=True)

    def row_of(self, a_no: int | None, b_no: int | None) -> int:
        """The row showing line a_no of a (or b_no of b); a fold row holding it; else 0."""
        for i, r in enumerate(self.rows):
            if (b_no is not None and r.b_no == b_no and r.kind != "fold") or (
                a_no is not None and r.a_no == a_no and r.kind != "fold" and b_no is None
            ):
                return i
        for i, r in enumerate(self.rows):
            if r.kind == "fold" and r.b_no is not None and b_no is not None and r.b_no <= b_no < r.b_no + r.count:
                return i
            if (
                r.kind == "fold"
                and r.a_no is not None
                and a_no is not None
                and b_no is None
                and r.a_no <= a_no < r.a_no + r.count
            ):
                return i
        return 0

    def set_mode(self, mode: str) -> None:
        if mode == self.mode:
            return
        cur = self.rows[self.cursor] if self.rows and self.cursor < len(self.rows) else None
        self.mode = mode
        self.mark = None
        self.split_x = 0
        self.scroll_to(x=0, animate=False)
        self._rebuild(keep=(cur.a_no, cur.b_no) if cur is not None else (None, None))

    def expand_fold(self, row: int) -> bool:
        if not (0 <= row < len(self.rows)) or self.rows[row].kind != "fold":
            return False
        r = self.rows[row]
        self.expanded.add(r.fold)  # type: ignore[arg-type]
        self._rebuild(keep=(r.a_no, r.b_no))
        return True

    def expand_all(self) -> None:
        if self.model is None:
            return
        cur = self.rows[self.cursor] if self.rows else None
        self.expanded = set(range(self.model.folds))
        self._rebuild(keep=(cur.a_no, cur.b_no) if cur else (None, None))

    def row_activated(self, row: int) -> None:
        self.expand_fold(row)

    def activates_on_click(self, row: int) -> bool:
        return 0 <= row < len(self.rows) and self.rows[row].kind == "fold"

    def action_unfold(self) -> None:
        self.expand_fold(self.cursor)

    def goto_node(self, name: str, subgraph: str | None = None) -> bool:
        """Cursor to the line defining `name`: in the new graph, else in the old one."""
        for side, index in (("b", self.b_index), ("a", self.a_index)):
            if index is None:
                continue
            loc = index.find(name, subgraph)
            if loc is None:
                continue
            key = (None, loc.line) if side == "b" else (loc.line, None)
            row = self.row_of(*key)
            if self.rows and self.rows[row].kind == "fold":
                self.expanded.add(self.rows[row].fold)  # type: ignore[arg-type]
                self._rebuild(keep=key)
                row = self.row_of(*key)
            if self.mode == "unified":
                self.mark = Mark(row, loc.start, loc.end)
            else:
                self.mark = Mark(row, loc.start, loc.end, side)
            self._cache.clear()
            self.set_cursor(row, center=True)
            self.refresh()
            return True
        return False

    # -- export and copy ----------------------------------------------------------------------------

    def export_text(self) -> str:
        if self.model is None:
            return ""
        return self.model.unified_text(self.a_label, self.b_label)

    def hunk_text(self) -> str:
        if not self.rows:
            return ""
        start, end = hunk_bounds(self.rows, self.cursor)
        return "\n".join(r.plain("unified") for r in self.rows[start:end]) + "\n"

    # -- LineView ------------------------------------------------------------------------------------

    def row_count(self) -> int:
        return len(self.rows)

    def row_plain(self, index: int) -> str:
        if not (0 <= index < len(self.rows)):
            return ""
        return self.rows[index].plain(self.mode, width=self._col() if self.mode == "split" else 0)

    def gutter_width(self) -> int:
        return 2 * self._num + 4 if self.mode == "unified" else 0

    def body_width(self) -> int:
        return self._width + 1 if self.mode == "unified" else 0

    def _col(self) -> int:
        width = max(20, self.scrollable_content_region.width or 120)
        return max(8, (width - 2 * (self._num + 1) - 3) // 2)

    def on_resize(self, event: events.Resize) -> None:
        # side-by-side columns and elided lines depend on the width
        self._version += 1
        self._cache.clear()

    def action_hscroll(self, delta: int) -> None:
        if self.mode == "split":
            self.split_x = max(0, min(self.split_x + delta, max(0, self._width - self._col() // 2)))
            self._version += 1
            self._cache.clear()
            self.refresh()
            return
        super().action_hscroll(delta)

    @staticmethod
    def _shift(spans, offset: int, lo: int = 0, hi: int | None = None, style=None):
        out = []
        for sp in spans:
            a, b = sp[0], sp[1]
            st = style if style is not None else sp[2]
            if hi is not None:
                a, b = max(a, lo), min(b, hi)
                if b <= a:
                    continue
                a, b = a - lo, b - lo
            out.append((a + offset, b + offset, st))
        return out

    def build_row(self, index: int, palette: Palette):
        row = self.rows[index]
        n = self._num
        if row.kind == "fold":
            label = f"⋯ {row.count} unchanged lines (Enter to show)"
            if self.mode == "unified":
                return [Segment(" " * (2 * n + 4))], label, [[(0, len(label), palette.fold)]]
            text = " " * (n + 1) + label
            return [], text, [[(0, len(text), palette.fold)]]
        if self.mode == "unified":
            a = f"{row.a_no + 1:>{n}}" if row.a_no is not None else " " * n
            b = f"{row.b_no + 1:>{n}}" if row.b_no is not None else " " * n
            if row.kind in ("del", "add"):
                # the -/+ marker sits in the gutter: it stays in view when the line scrolls
                line = (row.a_text if row.kind == "del" else row.b_text) or ""
                bg, chars = (
                    (palette.removed, palette.removed_chars)
                    if row.kind == "del"
                    else (palette.added, palette.added_chars)
                )
                gutter = [
                    Segment(f"{a} {b} ", palette.gutter),
                    Segment("-" if row.kind == "del" else "+", chars),
                    Segment(" ", palette.gutter),
                ]
                marks: list = []
                if row.pair is not None:
                    ma, mb = char_marks(row.a_text, row.pair) if row.kind == "del" else char_marks(row.pair, row.b_text)
                    marks = ma if row.kind == "del" else mb
                layers = [
                    [(0, len(line), bg)],
                    [(x, y, palette.token(k)) for x, y, k in token_spans(line)],
                    [(x, y, chars) for x, y in marks],
                ]
                cut = self._elision(line, marks, self._body_room())
                if cut is not None:
                    line, layers = elide(line, layers, *cut, palette.fold)
                return gutter, line, layers
            line = row.b_text or ""
            return (
                [Segment(f"{a} {b}  ", palette.gutter)],
                line,
                [[(x, y, palette.token(k)) for x, y, k in token_spans(line)]],
            )
        # side by side: number, text cut to the column, a separator, the same for the right side
        col = self._col()
        ma, mb = char_marks(row.a_text, row.b_text) if row.kind == "change" else ([], [])
        cut = self._elision(row.a_text, ma + mb, col)  # both sides cut alike: their first change in view
        parts: list[str] = []
        layers: list[list] = [[], [], [], []]
        pos = 0
        for side, text, no, marks in (("a", row.a_text, row.a_no, ma), ("b", row.b_text, row.b_no, mb)):
            num = f"{no + 1:>{n}} " if no is not None else " " * (n + 1)
            parts.append(num)
            layers[1].append((pos, pos + len(num), palette.gutter))
            pos += len(num)
            shown = text or ""
            if cut is not None and text:
                shown = shown[: cut[0]] + "…" + shown[cut[1] :]
            body = self._cut(shown, col)
            parts.append(body)
            changed = row.kind in ("change", "del" if side == "a" else "add") and text is not None
            bg, chars = (
                (palette.removed, palette.removed_chars) if side == "a" else (palette.added, palette.added_chars)
            )
            if changed:
                layers[0].append((pos, pos + col, bg))
            if text:
                x = self.split_x
                hi = x + len(body.rstrip(" …")) if len(shown) - x > col else x + col
                tokens = [(p, q, palette.token(k)) for p, q, k in token_spans(text)]
                marks = [(p, q, chars) for p, q in marks]
                node = (
                    [(self.mark.start, self.mark.end, palette.node)]
                    if self.mark is not None and self.mark.row == index and self.mark.side == side
                    else []
                )
                if cut is not None:
                    _, (tokens, marks, node, dots) = elide(text, [tokens, marks, node], *cut, palette.fold)
                    tokens += dots
                layers[1].extend(self._shift(tokens, pos, x, hi))
                layers[2].extend(self._shift(marks, pos, x, hi))
                layers[3].extend(self._shift(node, pos, x, hi))
            pos += len(body)
            if side == "a":
                sep = {"change": " ≠ ", "del": " < ", "add": " > ", "same": " │ "}[row.kind]
                parts.append(sep)
                layers[1].append((pos, pos + 3, palette.gutter))
                pos += 3
        return [], "".join(parts), layers

    def _body_room(self) -> int:
        """Cells of text a unified row shows at once."""
        return max(10, (self.scrollable_content_region.width or 120) - self.gutter_width())

    def _elision(self, text: str | None, marks, room: int) -> tuple[int, int] | None:
        """(head, cut): a changed line whose first change lies beyond `room` cells keeps its first
        `head` characters (indentation and the start of the line), then `…`, then the text from
        `cut` (a token boundary), so that the change is in view; None when it is in view already or
        the user scrolled sideways (then the text shows as it is)."""
        if not marks or not text or int(self.scroll_offset.x) or self.split_x:
            return None
        first = min(m[0] for m in marks)
        if first + 4 <= room:
            return None
        indent = len(text) - len(text.lstrip(" "))
        head = min(indent + max(6, room // 5), first - 1)
        cut = max(head + 1, first - (room - head - 1 - min(12, room // 4)))  # as much context as fits
        boundary = max(text.rfind(c, max(head + 1, cut - 8), cut) for c in " (,[")
        if boundary > head:
            cut = boundary + 1
        return head, cut

    def watch_scroll_x(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_x(old_value, new_value)
        if (int(old_value) == 0) != (int(new_value) == 0):  # elided lines show whole once scrolled sideways
            self._version += 1
            self._cache.clear()

    def _cut(self, text: str, col: int) -> str:
        x = self.split_x
        body = text[x : x + col]
        if len(text) - x > col:
            body = body[: col - 1] + "…"
        return body.ljust(col)
