"""One open capture, shared by the app's workers: the core's objects behind one lock.

Every question the views ask (a graph's code, a pass's before and after, a rank diff, symbols,
devices) is one method here, safe to call from any worker thread: the core's readers keep LRU
caches and memory maps that are not meant for concurrent use. Long computations on what was read
(diffs, the checks) run outside the lock. No textual imports: this is plain Python.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from graphtrain_inspect.inspector.checks.rank_classes import RankClasses
from graphtrain_inspect.inspector.checks.symbol_rows import SymbolRow, symbol_rows
from graphtrain_inspect.inspector.diff.graph_diff import normalize_code, rank_text
from graphtrain_inspect.inspector.diff.node_diff import GraphDiff
from graphtrain_inspect.inspector.diff.rank_diffs import rank_diff_gids
from graphtrain_inspect.inspector.diff.text_rows import DiffModel
from graphtrain_inspect.inspector.errors import CaptureUnreadable
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.capture_reader import Capture
from graphtrain_inspect.inspector.read.code_locate import CodeIndex
from graphtrain_inspect.inspector.read.compile_events import compile_story
from graphtrain_inspect.inspector.read.compile_rows import CompileRow, compile_rows
from graphtrain_inspect.inspector.read.device_rows import DeviceRow, device_rows
from graphtrain_inspect.inspector.read.outline import Outline, PassEntry, PipelineEntry, build_outline
from graphtrain_inspect.inspector.read.output_code import Kernel, code_text, kernels_of, output_codes, pipeline_of
from graphtrain_inspect.inspector.read.stages import StageIndex

__all__ = ["CaptureSession", "CaptureUnreadable", "Place", "GraphText", "DiffResult", "OutputCodeText"]


@dataclass(frozen=True)
class Place:
    """A graph state in the tree: the traced graph of a pipeline (seq None) or a pass's output."""

    rank: int
    pipeline: int
    seq: int | None = None
    role: str | None = None

    def label(self, outline: Outline | None = None) -> str:
        if self.seq is None:
            return f"rank {self.rank} · graph {self.pipeline} · traced"
        p = outline.find_pass(self.rank, self.seq) if outline is not None else None
        name = f"#{self.seq} {p.name}" if p else f"#{self.seq}"
        role = f" ({self.role})" if self.role and self.role != "out" else ""
        return f"rank {self.rank} · {name}{role}"


@dataclass
class GraphText:
    rank: int
    gid: str
    lines: list[str]
    index: CodeIndex
    title: str


@dataclass
class OutputCodeText:
    """The code Inductor generated for one pipeline on one rank, its kernels and their FX nodes."""

    rank: int
    oid: str
    lines: list[str]
    kernels: list[Kernel]
    origins: dict[str, list[str]]  # kernel -> post-grad FX node names
    graph: Place | None  # where the post-grad graph it was generated from is in the tree
    title: str

    def kernel_of(self, node: str) -> Kernel | None:
        """The first kernel (in the code's order) that computes FX node `node`."""
        return next((k for k in self.kernels if node in self.origins.get(k.name, ())), None)


@dataclass
class DiffResult:
    model: DiffModel
    a_label: str
    b_label: str
    a_index: CodeIndex
    b_index: CodeIndex
    title: str
    summary: str
    key: tuple


def _rank_line(d: GraphDiff | None) -> str:
    """What the rank-diff view says of one rank's diff against the base."""
    if d is None:
        return "unreadable"
    if d.empty:
        return "agrees"
    c = d.counts
    return f"differs ({c['changed']} changed, {c['added']} added, {c['removed']} removed)"


class CaptureSession:
    """One snapshot of a capture. Snapshots of one capture share their logs, so they share `lock`
    with the loader that indexes more of those logs."""

    def __init__(self, cap: Capture, lock: "threading.RLock | None" = None, *, complete: bool = True):
        self.cap = cap
        self.path = cap.path
        self.lock = lock or threading.RLock()
        self.complete = complete  # False while the loader is still indexing the logs
        with self.lock:
            self.outline: Outline = build_outline(cap)
            self.index = StageIndex(cap)
        self._classes: RankClasses | None = None
        if not complete:
            # what is not indexed yet is not missing: a pass whose record was not reached yet is
            # not unfinished, a rank whose end record was not reached yet is not cut short
            for r in self.outline.ranks:
                r.complete = None
                for pl in r.pipelines:
                    pl.passes = [p for p in pl.passes if p.status != "incomplete"]

    @property
    def rank_classes(self) -> RankClasses:
        """The capture's rank classes, made when first asked (the rank-diff view reads the
        capture's recorded digests through them)."""
        if self._classes is None:
            self._classes = RankClasses(self.cap, self.index)
        return self._classes

    def compile_rows(self) -> tuple[list[CompileRow], str]:
        """The compile-events view's rows (every rank) and its title."""
        with self.lock:
            story = compile_story(self.cap)
            rows = compile_rows(story)
        if story.source is None:
            return rows, story.note or "no compile events"
        n = {k: len(story.events(kinds=(k,))) for k in ("failure", "break", "restart", "recompile")}
        compiles = sum(len(story.compiles(r)) for r in story.by_rank)
        return rows, f"{compiles} compiles on {len(story.by_rank)} rank(s) · " + " · ".join(
            f"{v} {k}{'s' if v != 1 else ''}" for k, v in n.items()
        ) + f" · from {story.source}"

    @classmethod
    def open(cls, path: str, source: str = "auto") -> "CaptureSession":
        return cls(open_capture(path, source=source))

    # -- places ----------------------------------------------------------------------------------

    def pipeline(self, rank: int, index: int) -> PipelineEntry | None:
        r = self.outline.rank(rank)
        if r is None:
            return None
        return next((pl for pl in r.pipelines if pl.index == index), None)

    def pass_entry(self, place: Place) -> PassEntry | None:
        return self.outline.find_pass(place.rank, place.seq) if place.seq is not None else None

    def gid_of(self, place: Place) -> str | None:
        if place.seq is None:
            pl = self.pipeline(place.rank, place.pipeline)
            return pl.traced if pl else None
        p = self.pass_entry(place)
        if p is None:
            return None
        if not p.after:
            return p.before
        return p.after.get(place.role or "") or p.after.get(p.first_role() or "")

    def same_place_on(self, place: Place, rank: int) -> Place | None:
        """The same graph state on another rank: same pipeline, same pass name and occurrence."""
        if rank == place.rank:
            return place
        if place.seq is None:
            return Place(rank, place.pipeline) if self.pipeline(rank, place.pipeline) else None
        p = self.pass_entry(place)
        other = self.outline.rank(rank)
        if p is None or other is None:
            return None
        for q in other.passes:
            if q.name == p.name and q.occurrence == p.occurrence:
                return Place(rank, q.pipeline, q.seq, place.role)
        return None

    # -- reading ---------------------------------------------------------------------------------

    def graph_text(self, place: Place) -> GraphText | None:
        gid = self.gid_of(place)
        if gid is None:
            return None
        with self.lock:
            code = self.cap.graph_code(place.rank, gid)
        if code is None:
            return None
        lines = code.splitlines()
        return GraphText(
            place.rank, gid, lines, CodeIndex(lines), f"{place.label(self.outline)} · {gid} · {len(lines)} lines"
        )

    def node_places(self, rank: int) -> list[tuple[str, str, Place]]:
        """(subgraph, node name, the latest place showing it) for every node of every graph state
        of the rank: what the palette offers beyond the graph in view. Kept per rank."""
        r = self.outline.rank(rank)
        if r is None:
            return []
        places = [Place(rank, pl.index) for pl in r.pipelines]
        places += [Place(rank, pl.index, p.seq, role) for pl in r.pipelines for p in pl.passes for role in p.after]
        key = (rank, len(places))
        cache = self.__dict__.setdefault("_node_places", {})
        if key not in cache:
            order = sorted(places, key=lambda p: (p.pipeline, -1 if p.seq is None else p.seq))
            latest: dict[str, Place] = {}  # each distinct graph at the last place that shows it
            for place in order:
                gid = self.gid_of(place)
                if gid is not None:
                    latest[gid] = place
            found: dict[tuple[str, str], Place] = {}
            for place in sorted(latest.values(), key=order.index):
                text = self.graph_text(place)
                for sub, name, _line in text.index.names() if text is not None else ():
                    found[(sub or "", name)] = place
            cache[key] = [(sub, name, place) for (sub, name), place in found.items()]
        return cache[key]

    def place_of_gid(self, rank: int, pipeline: int, gid: str) -> Place | None:
        """The tree's place showing graph `gid` in a pipeline (the latest pass that output it)."""
        pl = self.pipeline(rank, pipeline)
        if pl is None:
            return None
        for p in reversed(pl.passes):
            for role, g in p.after.items():
                if g == gid:
                    return Place(rank, pipeline, p.seq, role)
        return Place(rank, pipeline) if pl.traced == gid else None

    def output_code(self, place: Place) -> tuple[OutputCodeText | None, int]:
        """(the last code Inductor generated from the place's pipeline on its rank, how many it
        generated from it): a recompile replaces the code, so the last one is what ran last."""
        with self.lock:
            mine = [
                oc
                for oc in output_codes(self.cap, place.rank)
                if (pl := pipeline_of(self.cap, oc)) is not None and pl.index == place.pipeline
            ]
            if not mine:
                return None, 0
            oc = mine[-1]
            text = code_text(self.cap, oc)
        if text is None:
            return None, len(mine)
        lines = text.splitlines()
        kernels = kernels_of(text)
        graph = self.place_of_gid(place.rank, place.pipeline, oc.graph) if oc.graph else None
        cid = f" · compile {oc.compile_id}" if oc.compile_id else ""
        more = f" · last of {len(mine)}" if len(mine) > 1 else ""
        title = (
            f"rank {place.rank} · graph {place.pipeline}{cid} · {oc.oid} · {len(kernels)} "
            f"kernel{'' if len(kernels) == 1 else 's'} · {len(lines)} lines{more}"
        )
        return OutputCodeText(place.rank, oc.oid, lines, kernels, dict(oc.origins), graph, title), len(mine)

    def pass_diff(self, place: Place) -> DiffResult | None:
        p = self.pass_entry(place)
        if p is None or p.before is None or not p.after:
            return None
        role = place.role if place.role in p.after else p.first_role()
        gid = p.after[role]  # type: ignore[index]
        with self.lock:
            a = self.cap.graph_code(place.rank, p.before)
            b = self.cap.graph_code(place.rank, gid)
        if a is None or b is None:
            return None
        la, lb = normalize_code(a), normalize_code(b)
        model = DiffModel(la, lb)
        c = model.counts
        bn = p.before_nodes
        an = p.after_nodes.get(role or "")
        nodes = f"{bn if bn is not None else '?'} → {an if an is not None else '?'} nodes"
        role_txt = f" ({role})" if role != "out" else ""
        title = f"#{p.seq} {p.name}{role_txt} on rank {place.rank}: {p.before} → {gid}"
        summary = f"{nodes} · −{c['removed']} +{c['added']} lines" + (" · no text changes" if model.empty else "")
        return DiffResult(
            model,
            f"before {p.name}",
            f"after {p.name}{role_txt}",
            CodeIndex(la, lazy=True),
            CodeIndex(lb, lazy=True),
            title,
            summary,
            ("pass", place.rank, p.before, gid),
        )

    def rank_diff(self, place: Place, base: int) -> tuple[DiffResult | None, list[str]]:
        """The place's graph on the base rank against place.rank (the next rank when place is on the
        base rank), normalized; plus one status line per rank."""
        status: list[str] = []
        if place.rank == base:
            others = [r for r in self.cap.ranks if r != base]
            later = [r for r in others if r > base] + [r for r in others if r < base]
            for r in later:
                op = self.same_place_on(place, r)
                if op is not None:
                    place = op
                    break
        here = self.gid_of(place)
        bplace = self.same_place_on(place, base)
        bgid = self.gid_of(bplace) if bplace is not None else None
        # a rank's recorded digest -> what its line says: the capture's hashes say two ranks
        # agree, or have the graph of a rank already diffed, without a diff of every node (64
        # ranks: 63 structural diffs)
        said: dict[bytes, str] = {}
        with self.lock:
            base_digest = self.rank_classes.recorded_digest(base, bgid) if bgid is not None else None
        if base_digest is not None:
            said[base_digest] = "agrees"
        for r in self.cap.ranks:
            if r == base:
                continue
            op = self.same_place_on(place, r)
            og = self.gid_of(op) if op is not None else None
            if og is None or bgid is None:
                status.append(f"rank {r}: no such graph")
                continue
            with self.lock:
                digest = self.rank_classes.recorded_digest(r, og) if said else None
                line = said.get(digest) if digest is not None else None
                if line is None:
                    line = _rank_line(rank_diff_gids(self.cap, base, bgid, r, og))
                    if digest is not None:
                        said[digest] = line
            status.append(f"rank {r}: {line}")
        if here is None or bgid is None:
            return None, status
        with self.lock:
            la = rank_text(self.cap, base, bgid) or []
            lb = rank_text(self.cap, place.rank, here) or []
        model = DiffModel(la, lb)
        c = model.counts
        title = f"{place.label(self.outline)} against base rank {base}, normalized"
        summary = "ranks agree (after normalization)" if model.empty else f"−{c['removed']} +{c['added']} lines"
        return DiffResult(
            model,
            f"rank {base} {bgid}",
            f"rank {place.rank} {here}",
            CodeIndex(la, lazy=True),
            CodeIndex(lb, lazy=True),
            title,
            summary,
            ("rank", base, bgid, place.rank, here),
        ), status

    def symbols(self, place: Place) -> list[SymbolRow]:
        gid = self.gid_of(place)
        if gid is None:
            return []
        with self.lock:
            symmap = self.cap.symbols(place.rank, gid)
            tables = self.cap.node_table(place.rank, gid)
        return symbol_rows(symmap, tables)

    def devices(self, place: Place) -> list[DeviceRow]:
        per: dict[int, tuple[Any, Any, Any]] = {}
        for r in self.cap.ranks:
            op = self.same_place_on(place, r)
            gid = self.gid_of(op) if op is not None else None
            with self.lock:
                table = self.cap.devices(r, gid) if gid else None
                per[r] = (table, self.cap.local_rank(r), self.cap.header(r))
        return device_rows(per)

    def problems(self) -> list[tuple[str, str, str]]:
        """(where, rank, message) of every reading problem and capture error."""
        out = []
        with self.lock:
            for e in self.cap.all_errors():
                where = e.path if e.line is None else f"{e.path}:{e.line}"
                out.append((where, "" if e.rank is None else str(e.rank), e.message))
            for r, statuses in sorted((getattr(self.cap, "statuses", None) or {}).items()):
                for st in statuses:
                    if st.get("state") == "stopped":
                        where = os.path.join(self.path, "status", f"rank_{r}.{st.get('pid')}.json")
                        out.append(
                            (
                                where,
                                str(r),
                                f"the capture stopped on this rank (pid {st.get('pid')}): "
                                f"{st.get('reason') or 'no reason given'}; records after that are missing",
                            )
                        )
            world = self.cap.world_size or 0
            if not isinstance((getattr(self.cap, "manifest", None) or {}).get("simulated"), dict):
                # a rank of the world with no log at all: nothing else on screen would say it exists
                from graphtrain_inspect.capture.shared import logformat
                from graphtrain_inspect.inspector.read.node_parts import absence

                gone = absence(self.cap)
                for r in gone.no_pass:
                    out.append(
                        (
                            os.path.join(self.path, logformat.log_file_name(r)),
                            str(r),
                            f"rank {r} of world size {world} recorded nothing: no log (it never ran a captured "
                            "pass, e.g. it loaded a graph compiled on another rank)",
                        )
                    )
                lines = gone.lines(world)  # not recorded, on a node not given: said once each, not a row per rank
                for text in lines[: len(lines) - (1 if gone.no_pass else 0)]:
                    out.append((self.path, "", text))
            for r in self.cap.ranks:
                log = self.cap.log_file(r)
                for ce in self.cap.capture_errors(r):
                    p = f" in pass #{ce.get('seq')} {ce.get('pass')}" if ce.get("pass") else ""
                    msg = str(ce.get("message") or "").splitlines()
                    out.append(
                        (
                            log.path if log else "",
                            str(r),
                            f"capture error{p} ({ce.get('where')}): {ce.get('type')}: {msg[0] if msg else ''}",
                        )
                    )
        return out
