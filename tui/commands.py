"""The command palette (Ctrl+P): open any rank, graph, pass or node by fuzzy name."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.fuzzy import Matcher

from graphtrain_inspect.tui.escaping import plain
from graphtrain_inspect.tui.session import Place


class CaptureCommands(Provider):
    """Ranks, traced graphs, passes of every rank, the nodes of every graph of the rank in view
    (those of the graph in view first), and the views."""

    async def startup(self) -> None:
        import asyncio

        # every graph of the rank is read once (a worker thread: large graphs take a while)
        session = getattr(self.app, "session", None)
        place = getattr(self.app, "place", None)
        self.other_nodes = []
        if session is not None and place is not None:
            self.other_nodes = await asyncio.to_thread(session.node_places, place.rank)

    def _entries(self) -> list[tuple[str, object, str]]:
        app = self.app
        session = getattr(app, "session", None)
        out: list[tuple[str, object, str]] = []
        for v in getattr(app, "VIEWS", ()):
            out.append((f"view: {v.title}", partial(app.show_view, v.id), "switch the right-hand view"))
        fv = getattr(app, "findings_view", None)
        if fv is not None and hasattr(app, "toggle_shared_graph"):
            info = "hide info findings" if fv.severity_floor == "info" else "show info findings"
            grade = "per rank (each rank traced its own)" if app.shared_graph else "as a shared graph (--shared-graph)"
            out.append((f"findings: {info}", fv.action_toggle_info, "i in the Findings view"))
            out.append((f"findings: grade {grade}", app.toggle_shared_graph, "s in the Findings view"))
        if session is None:
            return out
        o = session.outline
        for r in o.ranks:
            out.append(
                (f"rank {r.rank}", partial(app.open_rank, r.rank), f"{len(r.passes)} passes, {r.own_device or ''}")
            )
            for pl in r.pipelines:
                out.append(
                    (
                        f"rank {r.rank} · graph {pl.index} · trace",
                        partial(app.open_place, Place(r.rank, pl.index)),
                        f"traced graph, {pl.traced_nodes} nodes",
                    )
                )
                for p in pl.passes:
                    out.append(
                        (
                            f"rank {r.rank} · #{p.seq} {p.name}",
                            partial(app.open_place, Place(r.rank, pl.index, p.seq, p.first_role())),
                            "pass",
                        )
                    )
        code = app.code_view
        place = getattr(app, "place", None)
        here: set[tuple[str, str]] = set()
        if code.index is not None:
            where = f"rank {place.rank}" if place else ""
            for sub, name, _line in code.index.names()[:20000]:
                here.add((sub or "", name))
                label = f"node {name}" + (f" in {sub}" if sub else "")
                out.append((label, partial(app.goto_node, name, sub or None), f"in the graph in view ({where})"))
        outline = session.outline
        for sub, name, where in getattr(self, "other_nodes", [])[:50000]:
            if (sub, name) in here:
                continue
            label = f"node {name}" + (f" in {sub}" if sub else "")
            out.append((label, partial(app.open_node, where, name, sub or None), f"in {where.label(outline)}"))
        return out

    async def discover(self) -> Hits:
        for text, cb, help_text in self._entries()[:200]:
            yield DiscoveryHit(shown(text), cb, text=text, help=shown(help_text))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        words = query.lower().split()
        for text, cb, help_text in self._entries():
            score = matcher.match(text)  # textual's fuzzy score: any positive size
            if score > 0:
                # every word of the query found as a word start ("rank 1 shard") ranks first, and
                # among those, texts where the query's words stand together ("rank 1")
                low = text.lower()
                if words and _words_in(words, low):
                    pairs = [f"{a} {b}" for a, b in zip(words, words[1:])]
                    together = sum(p in low for p in pairs) / len(pairs) if pairs else 1.0
                    score = 1e6 + 1e5 * together + score
                yield Hit(score, _highlight(matcher, text), cb, text=text, help=shown(help_text))


def shown(text: str) -> Content:
    """An entry's text as typed: the palette reads a `str` prompt or help as markup (a pass
    named `[/x]` raised), and takes a `Content` as it is."""
    return Content.from_rich_text(plain(text))


def _highlight(matcher: Matcher, text: str) -> Content:
    """`Matcher.highlight` (the query's letters marked in `text`) of `text` as typed: Textual's
    reads the text as markup first."""
    content = shown(text)
    for offset in matcher.fuzzy_search.match(matcher.query, text)[1]:
        if not text[offset].isspace():
            content = content.stylize(matcher.match_style, offset, offset + 1)
    return content


def _words_in(words: list[str], text: str) -> bool:
    import re

    pos = 0
    for w in words:
        m = re.compile(r"(?<![a-z0-9_])" + re.escape(w)).search(text, pos)
        if m is None:
            return False
        pos = m.end()
    return True
