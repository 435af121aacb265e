"""The outline of a capture for a browser: run, ranks, graphs (pipelines), passes in order; which
findings sit on which pass; where a finding should be shown.

    outline = build_outline(cap)                  # Outline: ranks -> pipelines -> passes
    badges = finding_badges(findings, index)      # {(rank, seq) or (rank, "trace", pipeline): [Finding]}
    target = finding_target(finding, index)       # Target: rank, pipeline, seq, role, gid, view, node

Everything here comes from the index and the small pass records (node counts are in the pass
records and graph envelopes): building an outline reads no graph payload. Torch's own logs carry
no node counts: those the reader counted from a graph's text (`Capture.node_count`, what `ls`
does; the TUI does it in the background) are used. No textual or rich.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Hashable, Protocol, TypeVar

from graphtrain_inspect.capture.shared.rank_ranges import format_ranks
from graphtrain_inspect.inspector.read.stages import TRACE, Stage, StageIndex

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.read.capture_reader import Capture
    from graphtrain_inspect.inspector.read.capture_records import PassRecord


@dataclass
class PassEntry:
    rank: int
    seq: int
    name: str
    status: str
    pipeline: int
    before: str | None
    after: dict[str, str]
    before_nodes: int | None
    after_nodes: dict[str, int | None]
    wall_s: float | None
    source: str | None
    occurrence: int  # how many earlier applications of the same name on this rank (replay --occurrence)
    exception: str | None = None
    capture_errors: int = 0

    @property
    def delta(self) -> int | None:
        """Node delta of the first output (None if unknown)."""
        if self.before_nodes is None or not self.after_nodes:
            return None
        n = next(iter(self.after_nodes.values()))
        return None if n is None else n - self.before_nodes

    @property
    def label(self) -> str:
        return f"#{self.seq} {self.name}"

    def first_role(self) -> str | None:
        return next(iter(self.after), None)


@dataclass
class PipelineEntry:
    rank: int
    index: int
    key: str
    label: str
    traced: str | None
    traced_nodes: int | None
    compile_id: str | None
    passes: list[PassEntry] = field(default_factory=list)


@dataclass
class RankEntry:
    rank: int
    host: str | None
    pid: int | None
    own_device: str | None
    local_rank: int | None
    complete: bool | None  # an end record was written (None: torch logs, unknown)
    graphs: int
    log_bytes: int
    capture_errors: int
    pipelines: list[PipelineEntry] = field(default_factory=list)
    # compiles torch logged as failed (compile id, reason in one line): no graph to show, so the
    # tree lists them on their own
    failed_compiles: list[tuple[str, str]] = field(default_factory=list)

    @property
    def passes(self) -> list[PassEntry]:
        return [p for pl in self.pipelines for p in pl.passes]


@dataclass
class Outline:
    path: str
    name: str
    kind: str
    status: str | None
    torch_version: str | None
    world_size: int
    ranks: list[RankEntry]

    def rank(self, r: int) -> RankEntry | None:
        return next((x for x in self.ranks if x.rank == r), None)

    def find_pass(self, rank: int, seq: int) -> PassEntry | None:
        re_ = self.rank(rank)
        if re_ is None:
            return None
        return next((p for p in re_.passes if p.seq == seq), None)

    @property
    def live(self) -> bool:
        """Still being written: the manifest says running (or is missing), or a rank has no end."""
        if self.kind != "capture":
            return False
        return self.status in (None, "running") or any(r.complete is False for r in self.ranks)


def _nodes(cap: "Capture", rank: int, gid: str | None) -> int | None:
    if gid is None:
        return None
    ref = cap.graph(rank, gid)
    return ref.nodes if ref is not None else None


def pass_entry(cap: "Capture", p: "PassRecord", occurrence: int) -> PassEntry:
    nodes = p.nodes or {}
    before_n = nodes.get("before") if isinstance(nodes.get("before"), int) else _nodes(cap, p.rank, p.before)
    after_counts = a if isinstance(a := nodes.get("after"), dict) else {}
    after_n = {
        role: (after_counts.get(role) if isinstance(after_counts.get(role), int) else _nodes(cap, p.rank, gid))
        for role, gid in p.after.items()
    }
    exc = None
    if p.exception:
        msg = str(p.exception.get("message") or "").splitlines()
        exc = f"{p.exception.get('type')}: {msg[0] if msg else ''}"
    return PassEntry(
        rank=p.rank,
        seq=p.seq,
        name=p.name,
        status=p.status,
        pipeline=p.pipeline,
        before=p.before,
        after=dict(p.after),
        before_nodes=before_n,
        after_nodes=after_n,
        wall_s=p.wall_s,
        source=p.source,
        occurrence=occurrence,
        exception=exc,
        capture_errors=p.capture_errors,
    )


def build_outline(cap: "Capture") -> Outline:
    m = cap.manifest or {}
    ranks: list[RankEntry] = []
    for r in cap.ranks:
        header = cap.header(r) or {}
        log = cap.log_file(r)
        seen: dict[str, int] = {}
        pipelines: list[PipelineEntry] = []
        for pl in cap.pipelines(r):
            cid = next((p.compile_id for p in pl.passes if p.compile_id), None)
            label = f"graph {pl.index}" + (f" · compile {cid}" if cid else "")
            if pl.origin == "loaded":  # identity: ran from a graph loaded, not traced here
                label += " · loaded" + (f" from rank {format_ranks(pl.loaded_from)}" if pl.loaded_from else "")
            if pl.module:
                label += f" · {pl.module}"
            traced = pl.traced
            if traced is None and pl.passes and pl.passes[0].before is None and pl.passes[0].after:
                # torch logged the pipeline's first graph on its own (dynamo's output): it is the start
                traced = next(iter(pl.passes[0].after.values()))
            entry = PipelineEntry(r, pl.index, pl.key, label, traced, _nodes(cap, r, traced), cid)
            for p in pl.passes:
                k = seen.get(p.name, 0)
                seen[p.name] = k + 1
                pe = pass_entry(cap, p, k)
                if entry.traced_nodes is None and p.before == pl.traced and pe.before_nodes is not None:
                    entry.traced_nodes = pe.before_nodes
                entry.passes.append(pe)
            pipelines.append(entry)
        try:
            own = cap.own_device(r)
        except Exception:  # noqa: BLE001 - a damaged record: the reader has recorded the error
            own = None
        complete = None
        if cap.kind == "capture":
            complete = cap.end(r) is not None
        ranks.append(
            RankEntry(
                rank=r,
                host=header.get("host"),
                pid=header.get("pid"),
                own_device=own,
                local_rank=cap.local_rank(r),
                complete=complete,
                graphs=len(cap.graphs(r)),
                log_bytes=log.size if log is not None else 0,
                capture_errors=len(cap.capture_errors(r)),
                pipelines=pipelines,
                failed_compiles=_failed_compiles(cap, r),
            )
        )
    path = os.path.abspath(cap.path)
    return Outline(
        path=path,
        name=os.path.basename(path.rstrip("/")) or path,
        kind=cap.kind,
        # a manifest without a status (one not a string is left out, a reading problem) is no
        # capture still running: that is a manifest saying so, or none at all
        status=m.get("status") or ("unknown" if m else None),
        torch_version=m.get("torch_version")
        or next((h.get("torch_version") for r in cap.ranks if (h := cap.header(r))), None),
        world_size=cap.world_size,
        ranks=ranks,
    )


def _failed_compiles(cap: "Capture", rank: int) -> list[tuple[str, str]]:
    from graphtrain_inspect.inspector.read.compile_events import compile_story

    if cap.kind != "torch_trace" and not cap.torch_trace_dir:
        return []
    return [(e.label, e.reason) for e in compile_story(cap).events(rank, ("failure",))]


# ---------------------------------------------------------------------------------------------
# Findings on the outline


class Placed(Protocol):
    """What the tree reads of a finding to place it (`inspector.checks.Finding` is one): declared
    here, so the reader does not import the checks, a floor above it."""

    kind: str
    ranks: list[int]
    graph: str | None
    subgraph: str | None
    node: str | None
    introduced_by: str | None
    introduced_seq: int | None
    pipeline: str | None
    evidence: dict[str, Any]


F = TypeVar("F", bound=Placed)


@dataclass
class Target:
    """Where to show a finding: a rank and graph state, a view, and the node."""

    rank: int
    pipeline: int | None
    seq: int | None  # None: the traced graph
    role: str
    gid: str | None
    view: str  # "code" | "pass-diff" | "rank-diff" | "output-code"
    node: str | None
    subgraph: str | None
    base_rank: int | None = None  # rank diff: the rank to compare against
    line: int | None = None  # output code: the line (1-based) of the generated code
    kernel: str | None = None  # output code: the kernel defining it, if one does


def _stage_of(f: Placed, index: StageIndex) -> Stage | None:
    if f.introduced_by is None and f.introduced_seq is None:
        return None  # about the capture itself (a missing rank, a damaged log): no graph state
    ranks = f.ranks or sorted(index.by_rank)
    for r in ranks:
        for st in index.by_rank.get(r, []):
            if f.pipeline is not None and st.key.pipeline != f.pipeline:
                continue
            if f.introduced_by == TRACE or f.introduced_seq is None:
                if st.pass_rec is None and (f.graph is None or st.gid == f.graph or r != ranks[0]):
                    return st
            elif st.seq == f.introduced_seq and (f.graph is None or st.gid == f.graph or r != ranks[0]):
                return st
    return None


def finding_stages(f: Placed, index: StageIndex) -> dict[int, Stage]:
    """The stage where the finding appears, on each of its ranks."""
    st = _stage_of(f, index)
    if st is None:
        return {}
    across = index.across(st.key)
    return {r: across[r] for r in (f.ranks or list(across)) if r in across}


def finding_badges(findings: list[F], index: StageIndex) -> dict[Hashable, list[F]]:
    """Findings by the tree entry they belong to: (rank, seq) of the pass that introduced them, or
    (rank, "trace", pipeline index) when the traced graph already had them."""
    out: dict[Hashable, list[F]] = {}
    for f in findings:
        for r, st in finding_stages(f, index).items():
            if st.pass_rec is None:
                key: Any = (r, TRACE, _pipeline_index(index, st))
            else:
                key = (r, st.pass_rec.seq)
            out.setdefault(key, []).append(f)
    return out


def _pipeline_index(index: StageIndex, st: Stage) -> int | None:
    for p in index.cap.passes(st.rank):
        if p.before == st.gid or st.gid in p.after.values():
            return p.pipeline
    return None


def finding_target(f: Placed, index: StageIndex, prefer_rank: int | None = None) -> Target | None:
    stages = finding_stages(f, index)
    if not stages:
        return None
    rank = prefer_rank if prefer_rank in stages else min(stages)
    st = stages[rank]
    pipeline = st.pass_rec.pipeline if st.pass_rec is not None else _pipeline_index(index, st)
    if getattr(f, "layer", "graph") == "codegen":
        # generated code: the Output code view of the pipeline it was made from, at its line
        ev = f.evidence or {}
        line = ev.get("line") if isinstance(ev.get("line"), int) else None
        kernel = ev.get("kernel") if isinstance(ev.get("kernel"), str) else None
        return Target(
            rank, pipeline, st.seq, st.key.role, st.gid, "output-code", f.node, None, line=line, kernel=kernel
        )
    if f.kind == "rank-divergent-graph":
        others = [r for r in stages if r != rank]
        base = min(stages)
        compare = max(stages) if rank == base else rank
        st = stages[compare]
        return Target(
            compare,
            pipeline,
            st.seq,
            st.key.role,
            st.gid,
            "rank-diff",
            f.node,
            f.subgraph,
            base_rank=base if others else None,
        )
    view = "code" if st.pass_rec is None else "pass-diff"
    return Target(rank, pipeline, st.seq, st.key.role, st.gid, view, f.node, f.subgraph)
