"""Where each node is defined in a graph's readable code (`print_readable` text), found by lines.

    idx = CodeIndex(code.splitlines())
    idx.find("add_3")                       # Location(line=41, start=8, end=13) or None
    idx.find("a_1", subgraph="true_graph_0")
    idx.names()                             # [(subgraph path, node name, line)] in code order
    idx.subgraph_at(120)                    # "" for the root, else the nested class path

One pass of regular expressions over the lines, no parsing: a graph of 50,000 lines is indexed in
well under a second. Nested subgraphs are the `class NAME(torch.nn.Module):` blocks inside the
root class; their path joins the class names below the root with `/`, as the node tables do.
Placeholders are found in the `def forward(self, a, b, ...)` line, `output` at `return`.
No textual, no rich, no torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CLASS_RE = re.compile(r"^(\s*)class ([A-Za-z_<][\w<>]*)\(.*\):\s*$")
_DEF_RE = re.compile(r"^(\s*)def forward\(self(.*)$")
_ASSIGN_RE = re.compile(r"^(\s+)([A-Za-z_]\w*)(?:\s*:\s*\"[^\"]*\"|\s*:\s*'[^']*'|\s*:\s*[\w.\[\], ]+?)?\s*=(?!=)")
_RETURN_RE = re.compile(r"^(\s+)return\b")
_PARAM_RE = re.compile(r"(?:^|[,(]\s*)([A-Za-z_]\w*)\s*(?=[:,)=])")


@dataclass(frozen=True)
class Location:
    line: int  # 0-based line index
    start: int  # column of the name
    end: int


class CodeIndex:
    """Node definitions of one graph's code, by (subgraph path, name)."""

    def __init__(self, lines: list[str], *, lazy: bool = False):
        """`lazy`: index the lines when first asked, not now (a diff view, which asks only to
        jump to a node: indexing both sides of a 100k-node pass diff took 0.4 s of opening it)."""
        self.lines = lines
        self._defs: dict[tuple[str, str], Location] = {}
        self._first: dict[str, Location] = {}  # name -> first definition in any subgraph
        self._order: list[tuple[str, str, int]] = []
        self._blocks: list[tuple[int, str]] = []  # (first line, subgraph path) in order
        self._by_line: dict[int, str] = {}
        self._indexed = False
        if not lazy:
            self._built()

    def _built(self) -> "CodeIndex":
        if not self._indexed:
            self._indexed = True
            self._index()
        return self

    def _index(self) -> None:
        stack: list[tuple[int, str]] = []  # (indent, class name)
        root_indent: int | None = None
        path = ""
        self._blocks.append((0, ""))
        for i, line in enumerate(self.lines):
            if not line or line.lstrip().startswith("#"):
                continue
            indent = len(line) - len(line.lstrip(" "))
            m = _CLASS_RE.match(line)
            if m:
                while stack and stack[-1][0] >= indent:
                    stack.pop()
                if root_indent is None or indent <= root_indent:
                    root_indent = indent
                    stack = [(indent, m.group(2))]
                else:
                    stack.append((indent, m.group(2)))
                path = "/".join(name for _, name in stack[1:])
                self._blocks.append((i, path))
                continue
            # a line indented at or left of an open class closes it
            if stack and indent <= stack[-1][0] and len(stack) > 1:
                while len(stack) > 1 and indent <= stack[-1][0]:
                    stack.pop()
                path = "/".join(name for _, name in stack[1:])
                self._blocks.append((i, path))
            m = _DEF_RE.match(line)
            if m:
                base = len(m.group(1)) + len("def forward(self")
                for pm in _PARAM_RE.finditer(m.group(2)):
                    name = pm.group(1)
                    start = base + pm.start(1)
                    self._add(path, name, Location(i, start, start + len(name)))
                continue
            m = _ASSIGN_RE.match(line)
            if m:
                name = m.group(2)
                start = len(m.group(1))
                self._add(path, name, Location(i, start, start + len(name)))
                continue
            m = _RETURN_RE.match(line)
            if m:
                start = len(m.group(1))
                key = (path, "output")
                if key not in self._defs:
                    self._add(path, "output", Location(i, start, start + len("return")))

    def _add(self, path: str, name: str, loc: Location) -> None:
        key = (path, name)
        if key in self._defs:
            return
        self._defs[key] = loc
        self._first.setdefault(name, loc)
        self._by_line.setdefault(loc.line, name)
        self._order.append((path, name, loc.line))

    def find(self, name: str, subgraph: str | None = None) -> Location | None:
        """The definition of node `name` (in `subgraph` if given and known, else the first one)."""
        self._built()
        if subgraph is not None:
            loc = self._defs.get((subgraph or "", name))
            if loc is not None:
                return loc
            # subgraph paths in node tables may be deeper or shallower than class nesting
            tail = (subgraph or "").rsplit("/", 1)[-1]
            for (path, n), loc in self._defs.items():
                if n == name and path.rsplit("/", 1)[-1] == tail:
                    return loc
        return self._first.get(name)

    def names(self) -> list[tuple[str, str, int]]:
        """(subgraph path, node name, line) of every definition, in code order."""
        return list(self._built()._order)

    def subgraph_at(self, line: int) -> str:
        path = ""
        for first, p in self._built()._blocks:
            if first > line:
                break
            path = p
        return path

    def node_at(self, line: int) -> str | None:
        """The node defined on `line` (the first one, for the forward line), if any."""
        return self._built()._by_line.get(line)

    def __len__(self) -> int:
        return len(self._built()._defs)
