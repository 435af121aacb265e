"""The tree on the left: run, ranks, graphs (pipelines) and their passes in order.

Each pass shows its node count, node delta, wall time and a badge with the number of findings it
introduced. The tree is built from an `graphtrain_inspect.inspector.read.outline.Outline` and updated in place when a
live capture grows (`sync`), keeping what is expanded and where the cursor is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Hashable, Sequence

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from graphtrain_inspect.inspector.read.outline import Outline, PassEntry, PipelineEntry, RankEntry
from graphtrain_inspect.tui.escaping import plain
from graphtrain_inspect.tui.session import Place
from graphtrain_inspect.tui.widgets.name_abbrev import kept_spans


@dataclass(frozen=True)
class RankData:
    rank: int


@dataclass(frozen=True)
class RunData:
    path: str


@dataclass(frozen=True)
class CompileData:
    """A compile torch logged as failed (it has no graph): Enter opens its compile event."""

    rank: int
    label: str


TreeData = Any  # RunData | RankData | Place | CompileData


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else ("es" if word.endswith(("s", "ch")) else "s"))


def _fmt_time(s: float | None) -> str:
    if s is None:
        return ""
    if s >= 1:
        return f"{s:.2f}s"
    return f"{s * 1000:.0f}ms" if s >= 0.001 else f"{s * 1e6:.0f}µs"


# Marks the part of a label that may lose its middle when the tree is narrow (a name), and a part
# that may go first (a pass's wall time); numbers are never cut: whole fields are dropped instead.
ELIDE = Style(meta={"gti_elide": True})
OPTIONAL = Style(meta={"gti_optional": True})
_FIELD = re.compile(r"  | · | ●")  # where a label's fields start: cut only there
MIN_NAME = 12  # a name keeps this much before the optional fields go


def _span(label: Text, key: str):
    return next((sp for sp in label.spans if isinstance(sp.style, Style) and (sp.style.meta or {}).get(key)), None)


def _elide_name(label: Text, over: int, keep_at_least: int, others: Sequence[str] = ()) -> Text:
    span = _span(label, "gti_elide")
    if span is None or over <= 0:
        return label
    name = label.plain[span.start : span.end]
    keep = max(keep_at_least, len(name) - over - 1)
    if keep >= len(name):
        return label
    short, pos = Text(), 0  # the part that tells the name from its siblings kept (name_abbrev)
    for a, b in kept_spans(name, keep + 1, others):  # keep: the name's characters, and one "…"
        if a > pos:
            short.append("…", style="dim")
        short.append_text(label[span.start + a : span.start + b])
        pos = b
    if pos < len(name):
        short.append("…", style="dim")
    short.spans[:] = [sp for sp in short.spans if sp.style is not ELIDE]
    short.stylize(ELIDE)  # still one name: it may shrink again
    return label[: span.start] + short + label[span.end :]


def label_name(label: Text) -> str | None:
    """The name in a label (its ELIDE span), as the label was made."""
    span = _span(label, "gti_elide")
    return label.plain[span.start : span.end] if span is not None else None


def fit_label(label: Text, width: int, others: Sequence[str] = ()) -> Text:
    """`label` in `width` cells: the name marked ELIDE loses its middle (down to MIN_NAME), then
    the OPTIONAL part goes, then the name shrinks further, then whole fields are dropped from the
    end (a count, a time or a badge is never cut into another number). `others`: the sibling
    rows' names, so that a shortened name keeps what tells it from them."""
    if width <= 0 or label.cell_len <= width:
        return label
    short = _elide_name(label, label.cell_len - width, MIN_NAME, others)
    if short.cell_len <= width:
        return short
    optional = _span(label, "gti_optional")
    if optional is not None:
        label = label[: optional.start] + label[optional.end :]
    label = _elide_name(label, label.cell_len - width, 4, others)
    if label.cell_len <= width:
        return label
    cuts = [m.start() for m in _FIELD.finditer(label.plain) if 0 < m.start() <= width]
    label = label[: cuts[-1]] if cuts else label[:width]
    label.rstrip()
    return label


def _name(t: Text, name: str, style: str = "") -> None:
    start = len(t)
    t.append(name, style)
    t.stylize(ELIDE, start, len(t))


def _badge(findings: list | None) -> Text:
    if not findings:
        return Text()
    sev = {f.severity for f in findings}
    style = "bold red" if "error" in sev else ("bold yellow" if "warning" in sev else "bold cyan")
    return Text(f" ●{len(findings)}", style=style)


def run_label(o: Outline, findings: int | None) -> Text:
    t = Text(style="bold")
    _name(t, o.name)
    status = o.status or ("torch trace" if o.kind == "torch_trace" else "no manifest")
    start = len(t)
    t.append(f"  {status}", style="green" if status == "finished" else ("yellow" if status == "running" else "red"))
    if status == "finished":  # the usual case: the first thing to go in a narrow tree
        t.stylize(OPTIONAL, start, len(t))
    if o.world_size and o.world_size > len(o.ranks):  # the others recorded nothing (Problems says which)
        t.append(f" · {len(o.ranks)} of {o.world_size} ranks", style="yellow")
    else:
        t.append(f" · {plural(len(o.ranks), 'rank')}", style="dim")
    if o.live:
        t.append(" · live", style="bold yellow")
    if findings:
        t.append(f" · {plural(findings, 'finding')}", style="bold red")
    return t


def rank_label(r: RankEntry, findings: int) -> Text:
    t = Text(f"rank {r.rank}", style="bold")
    extra = [x for x in (r.own_device, plural(len(r.passes), "pass")) if x]
    t.append("  " + " · ".join(extra), style="dim")
    if r.complete is False:
        t.append(" · no end record", style="yellow")
    if r.capture_errors:
        t.append(f" · {plural(r.capture_errors, 'capture error')}", style="yellow")
    if findings:
        t.append(f" ●{findings}", style="bold red")
    return t


def pipeline_label(pl: PipelineEntry) -> Text:
    t = Text(style="bold")
    _name(t, pl.label)
    if pl.traced_nodes is not None:
        t.append(f"  {pl.traced_nodes} nodes", style="dim")
    return t


def trace_label(pl: PipelineEntry, findings: list | None) -> Text:
    t = Text("trace", style="italic")
    t.append(f"  {pl.traced_nodes if pl.traced_nodes is not None else '?'}", style="dim")
    t.append_text(_badge(findings))
    return t


def pass_label(p: PassEntry, findings: list | None) -> Text:
    t = Text(f"#{p.seq} ", style="dim")
    _name(t, p.name, "red" if p.status != "ok" else "")
    if p.status == "raised":
        t.append("  raised", style="bold red")
    elif p.status == "incomplete":
        t.append("  unfinished", style="bold red")
    else:
        n = next(iter(p.after_nodes.values()), None) if p.after_nodes else None
        if len(p.after_nodes) > 1:
            t.append(
                "  " + " ".join(f"{role}:{c if c is not None else '?'}" for role, c in p.after_nodes.items()),
                style="dim",
            )
        elif n is not None:
            t.append(f"  {n}", style="dim")
        d = p.delta
        if d is not None:
            if d == 0:
                t.append(" ±0", style="dim")
            else:
                t.append(f" {d:+d}", style="green" if d > 0 else "yellow")
    if p.wall_s is not None:
        start = len(t)
        t.append(f"  {_fmt_time(p.wall_s)}", style="dim italic")
        t.stylize(OPTIONAL, start, len(t))
    t.append_text(_badge(findings))
    return t


class CaptureTree(Tree[TreeData]):
    EAGER_PIPELINES = 8  # graphs per rank shown open; the others are filled in when opened

    DEFAULT_CSS = """
    CaptureTree { width: 1fr; }
    """

    BINDINGS = [
        Binding("enter", "select_cursor", "Open", show=False, id="tree.open"),
        Binding("space", "toggle_node", "Fold", show=False, id="tree.toggle"),
        Binding("E", "expand_everything", "Expand all", show=False, id="tree.expand-all"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("capture", id=id)
        self.show_root = True
        self.guide_depth = 3
        self.outline: Outline | None = None
        self.badges: dict[Hashable, list] = {}
        self.nodes_by_key: dict[Hashable, TreeNode[TreeData]] = {}
        self.pass_keys: dict[tuple[int, int], Hashable] = {}  # (rank, seq) -> its key in nodes_by_key
        self.signatures: dict[Hashable, tuple] = {}  # what a pass's label shows, to relabel only changes
        self._siblings: dict[int, tuple[int, list[str]]] = {}  # id(parent) -> (children, their names)
        self.total_findings: int | None = None
        self.pipeline_entries: dict[Hashable, PipelineEntry] = {}
        self.populated: set[Hashable] = set()  # graphs whose passes are in the tree

    # -- building ----------------------------------------------------------------------------------

    def process_label(self, label: Any) -> Text:
        # a `str` label would be read as markup (escaping.plain); the labels made here are Texts
        return super().process_label(plain(label))

    def load(self, outline: Outline, badges: dict[Hashable, list] | None = None) -> None:
        self.clear()
        self.nodes_by_key = {}
        self.pass_keys = {}
        self.signatures = {}
        self.pipeline_entries = {}
        self.populated = set()
        self.outline = outline
        self.badges = badges or {}
        self.root.data = RunData(outline.path)
        self.root.expand()
        self.sync(outline, first=True)

    def _key_of(self, data: TreeData) -> Hashable:
        if isinstance(data, RankData):
            return ("rank", data.rank)
        if isinstance(data, Place):
            return ("place", data.rank, data.pipeline, data.seq, data.role)
        return ("pipeline",) + tuple(data) if isinstance(data, tuple) else ("run",)

    def sync(self, outline: Outline, *, first: bool = False) -> int:
        """Add what is new in `outline` (ranks, pipelines, passes) and refresh labels; return the
        number of entries added."""
        self.outline = outline
        added = 0
        badged = len({id(f) for v in self.badges.values() for f in v})
        # the root counts what the Findings tab lists: findings on no pass (a failed compile) too
        self.root.set_label(
            run_label(outline, (self.total_findings if self.total_findings is not None else badged) or None)
        )
        for i, r in enumerate(outline.ranks):
            key = ("rank", r.rank)
            node = self.nodes_by_key.get(key)
            n_find = len({id(f) for k, v in self.badges.items() if k[0] == r.rank for f in v})
            if node is None:
                node = self.root.add(rank_label(r, n_find), data=RankData(r.rank), expand=first and i == 0)
                self.nodes_by_key[key] = node
                self.signatures[key] = (r.own_device, len(r.passes), r.complete, r.capture_errors, n_find)
                added += 1
            elif self.signatures.get(key) != (r.own_device, len(r.passes), r.complete, r.capture_errors, n_find):
                node.set_label(rank_label(r, n_find))
                self.signatures[key] = (r.own_device, len(r.passes), r.complete, r.capture_errors, n_find)
            eager = len(r.pipelines) <= self.EAGER_PIPELINES
            for j, pl in enumerate(r.pipelines):
                pkey = ("pipeline", r.rank, pl.index)
                self.pipeline_entries[pkey] = pl
                pnode = self.nodes_by_key.get(pkey)
                if pnode is None:
                    # a large capture's graphs are filled in when opened: thousands of tree nodes
                    # nobody looks at cost the interface its speed
                    opened = eager or j < self.EAGER_PIPELINES
                    pnode = node.add(pipeline_label(pl), data=Place(r.rank, pl.index), expand=opened, allow_expand=True)
                    self.nodes_by_key[pkey] = pnode
                    added += 1
                    tkey = ("place", r.rank, pl.index, None, None)
                    tb = self.badges.get((r.rank, "trace", pl.index))
                    self.nodes_by_key[tkey] = pnode.add_leaf(trace_label(pl, tb), data=Place(r.rank, pl.index))
                    self.signatures[pkey] = (pl.label, pl.traced_nodes, len(tb or ()))
                    if opened:
                        self.populated.add(pkey)
                else:
                    tb = self.badges.get((r.rank, "trace", pl.index))
                    sig = (pl.label, pl.traced_nodes, len(tb or ()))
                    if self.signatures.get(pkey) != sig:
                        pnode.set_label(pipeline_label(pl))
                        self.nodes_by_key[("place", r.rank, pl.index, None, None)].set_label(trace_label(pl, tb))
                        self.signatures[pkey] = sig
                if pkey in self.populated:
                    added += self._populate(pkey)
            for label, reason in r.failed_compiles:
                ckey = ("compile", r.rank, label)
                if ckey not in self.nodes_by_key:
                    t = Text(f"compile {label.strip('[]')} failed", style="bold red")
                    t.append(f"  {reason}", style="red")
                    self.nodes_by_key[ckey] = node.add_leaf(t, data=CompileData(r.rank, label))
                    added += 1
        return added

    def _populate(self, pkey: Hashable) -> int:
        """Add (or relabel) the pass entries of one graph; return how many were added."""
        self.populated.add(pkey)
        pl = self.pipeline_entries[pkey]
        pnode = self.nodes_by_key[pkey]
        rank = pl.rank
        added = 0
        for p in pl.passes:
            pk = ("place", rank, pl.index, p.seq, None)
            badges = self.badges.get((rank, p.seq))
            sig = (
                p.name,
                p.status,
                p.before_nodes,
                tuple(p.after_nodes.items()),
                p.wall_s,
                len(badges or ()),
                tuple(f.severity for f in badges or ()),
            )
            existing = self.nodes_by_key.get(pk)
            if existing is None:
                self._forget_pass(rank, p.seq)  # shown under another graph before
                label = pass_label(p, badges)
                data = Place(rank, pl.index, p.seq, p.first_role())
                if len(p.after) > 1:
                    pn = pnode.add(label, data=data, expand=False)
                    for role in p.after:
                        self.nodes_by_key[("place", rank, pl.index, p.seq, role)] = pn.add_leaf(
                            Text(
                                f"→ {role}  "
                                f"{p.after_nodes.get(role) if p.after_nodes.get(role) is not None else '?'} "
                                "nodes",
                                style="dim",
                            ),
                            data=Place(rank, pl.index, p.seq, role),
                        )
                else:
                    pn = pnode.add_leaf(label, data=data)
                self.nodes_by_key[pk] = pn
                self.pass_keys[(rank, p.seq)] = pk
                self.signatures[pk] = sig
                added += 1
            elif self.signatures.get(pk) != sig:
                existing.set_label(pass_label(p, badges))
                self.signatures[pk] = sig
        return added

    def on_tree_node_expanded(self, event: Tree.NodeExpanded) -> None:
        data = event.node.data
        if isinstance(data, Place) and data.seq is None:
            pkey = ("pipeline", data.rank, data.pipeline)
            if pkey in self.pipeline_entries and pkey not in self.populated:
                self._populate(pkey)

    def _forget_pass(self, rank: int, seq: int) -> None:
        pk = self.pass_keys.pop((rank, seq), None)
        if pk is None:
            return
        node = self.nodes_by_key.pop(pk, None)
        for k in [k for k in self.nodes_by_key if k[:4] == pk[:4]]:
            self.nodes_by_key.pop(k)
        if node is not None:
            node.remove()

    def set_badges(self, badges: dict[Hashable, list], total: int | None = None) -> None:
        """The findings on each entry, and `total`: how many the Findings tab lists (the root's count)."""
        self.badges = badges
        self.total_findings = total
        if self.outline is not None:
            self.sync(self.outline)

    # -- finding and selecting --------------------------------------------------------------------

    def node_for(self, place: Place) -> TreeNode[TreeData] | None:
        pkey = ("pipeline", place.rank, place.pipeline)
        if place.seq is not None and pkey in self.pipeline_entries and pkey not in self.populated:
            self._populate(pkey)
        if place.seq is None:
            return self.nodes_by_key.get(("place", place.rank, place.pipeline, None, None))
        if place.role:
            n = self.nodes_by_key.get(("place", place.rank, place.pipeline, place.seq, place.role))
            if n is not None:
                return n
        return self.nodes_by_key.get(("place", place.rank, place.pipeline, place.seq, None))

    def rank_node(self, rank: int) -> TreeNode[TreeData] | None:
        return self.nodes_by_key.get(("rank", rank))

    def reveal(self, place: Place, *, select: bool = True) -> bool:
        """Expand the way to `place`, move the cursor there (and select it)."""
        node = self.node_for(place)
        if node is None:
            return False
        parent = node.parent
        while parent is not None:
            parent.expand()
            parent = parent.parent
        self.call_after_refresh(self._move_to, node, select)
        return True

    def _move_to(self, node: TreeNode[TreeData], select: bool) -> None:
        self.move_cursor(node)
        self.scroll_to_node(node, animate=False)
        if select:
            self.select_node(node)

    def render_label(self, node: TreeNode[TreeData], base_style: Style, style: Style) -> Text:
        label = super().render_label(node, base_style, style)
        width = self.scrollable_content_region.width
        if width <= 0:
            return label
        depth, parent = 0, node.parent
        while parent is not None:
            depth, parent = depth + 1, parent.parent
        return fit_label(label, width - depth * self.guide_depth, self._sibling_names(node))

    def _sibling_names(self, node: TreeNode[TreeData]) -> list[str]:
        """The names of `node` and its siblings, read once per parent until the parent grows."""
        parent = node.parent
        if parent is None:
            return []
        kids = parent.children
        cached = self._siblings.get(id(parent))
        if cached is None or cached[0] != len(kids):
            cached = (len(kids), [n for k in kids if (n := label_name(k.label)) is not None])
            self._siblings[id(parent)] = cached
        return cached[1]

    def action_expand_everything(self) -> None:
        self.root.expand_all()
