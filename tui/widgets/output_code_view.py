"""Inductor's generated code for the selected pipeline: the code view's line rendering (only the
visible lines are built, highlighted as Python), plus its kernels to jump to and from FX nodes."""

from __future__ import annotations

from graphtrain_inspect.inspector.read.output_code import Kernel
from graphtrain_inspect.tui.widgets.code_view import CodeView
from graphtrain_inspect.tui.widgets.line_view import Mark


class OutputCodeView(CodeView):
    """`show_code(oct)` replaces it; `goto_kernel` jumps to a kernel's definition."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.code = None  # the OutputCodeText shown
        self.message_text = "select a graph in the tree to see the code Inductor generated for its pipeline"

    def show_code(self, code) -> None:
        same = self.code is not None and (self.code.rank, self.code.oid) == (code.rank, code.oid)
        self.code = code
        self.show(code.lines, None, title=code.title, key=(code.rank, code.oid), keep_place=same)

    def clear(self, message: str) -> None:
        self.code = None
        super().clear(message)

    def goto_kernel(self, name: str) -> bool:
        """Put the cursor on the line defining kernel `name` and mark the name; False if not here."""
        k = next((k for k in self.code.kernels if k.name == name), None) if self.code else None
        if k is None:
            return False
        self.mark = Mark(k.first, 0, len(k.name))
        self._cache.clear()
        self.set_cursor(k.first, center=True)
        # a view just filled has not had its new height laid out yet, so that scroll was clamped
        # to the old range: scroll again once it has
        self.call_after_refresh(self.scroll_to_row, k.first, center=True)
        self.refresh()
        return True

    def goto_line(self, row: int, kernel: str | None = None) -> bool:
        """Put the cursor on line `row` (0-based) and mark it, when it is there (and, given a
        kernel, inside that kernel's definition: the code shown is the one the finding names)."""
        if self.code is None or not 0 <= row < len(self.code.lines):
            return False
        if kernel is not None:
            k = next((k for k in self.code.kernels if k.name == kernel), None)
            if k is None or not k.first <= row <= k.last:
                return False
        text = self.code.lines[row]
        lead = len(text) - len(text.lstrip())
        self.mark = Mark(row, lead, len(text))
        self._cache.clear()
        self.set_cursor(row, center=True)
        self.call_after_refresh(self.scroll_to_row, row, center=True)
        self.refresh()
        return True

    def kernel_at_cursor(self) -> Kernel | None:
        """The kernel whose definition holds the cursor, else the one named on the cursor's line
        (a call in the wrapper's body: `triton_poi_fused_0.run(...)`)."""
        if self.code is None:
            return None
        for k in self.code.kernels:
            if k.first <= self.cursor <= k.last:
                return k
        line = self.row_plain(self.cursor)
        return next((k for k in self.code.kernels if f"{k.name}." in line or f"{k.name}(" in line), None)

    def goto_node(self, name: str, subgraph: str | None = None) -> bool:
        """Go to kernel `name`, or to the kernel that computes FX node `name` (a pending jump
        from the code view names the node; the kernel is known once the code is here)."""
        if self.code is None:
            return False
        k = self.code.kernel_of(name)
        return self.goto_kernel(k.name if k is not None else name)
