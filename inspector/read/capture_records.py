"""What a capture's index holds: pass records, graph references, pipelines and each rank's
record lists, and the pipelines recomputed from the pass chain. Plain data: no I/O here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graphtrain_inspect.inspector.read.logscan import LogFile, Record


@dataclass
class PassRecord:
    """One pass application on one rank, as `gti_pass` records it (or synthesized from torch logs)."""

    rank: int
    seq: int
    name: str
    before: str | None
    after: dict[str, str]
    pipeline: int = 0
    traced: bool = False
    status: str = "ok"  # ok | raised | incomplete (started, never finished: the rank died)
    qualname: str | None = None
    source: str | None = None
    subsystem: str | None = None
    compile_id: str | None = None
    exception: dict[str, Any] | None = None
    nodes: dict[str, Any] | None = None
    wall_s: float | None = None
    time: float | None = None
    capture_errors: int = 0
    parent: int | None = None
    blobs: dict[str, Any] = field(default_factory=dict)
    synthetic: bool = False  # made from torch's own graph records
    record: Record | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        return f"#{self.seq} {self.name}"


@dataclass
class GraphRef:
    """Where one distinct graph's records are on one rank. `label` is torch's record kind if any."""

    rank: int
    gid: str
    records: dict[str, Record] = field(default_factory=dict, repr=False)
    nodes: int | None = None
    label: str | None = None
    compile_id: str | None = None
    # later records of the same kind and gid (a second writer process, or a duplicated record):
    # read when the first one is damaged
    alternates: dict[str, list[Record]] = field(default_factory=dict, repr=False)

    @property
    def bytes(self) -> int:
        return sum(r.payload_bytes for r in self.records.values())


@dataclass
class Pipeline:
    """Passes applied one after another starting from one traced graph."""

    rank: int
    index: int
    key: str  # comparable across ranks: compile id (or "") and ordinal
    passes: list[PassRecord]
    traced: str | None  # gid of the graph at the start


class _Rank:
    """One rank's log and its records by kind, as opening filed them; `passes` built on first use."""

    def __init__(self, rank: int):
        self.rank = rank
        self.log: LogFile | None = None
        self.header: dict[str, Any] | None = None
        self.header_rec: Record | None = None
        self.rank_recs: list[Record] = []
        self.pass_recs: list[Record] = []
        self.start_recs: list[Record] = []
        self.blob_recs: list[Record] = []  # gti_blob (format 3)
        self.error_recs: list[Record] = []
        self.end_rec: Record | None = None
        self.graphs: dict[str, GraphRef] = {}
        self.passes: list[PassRecord] | None = None
        self.torch_states: list[tuple[str, GraphRef]] = []


def _int(v: Any, default: Any) -> Any:
    return v if type(v) is int else default


def _num(v: Any) -> float | None:
    return float(v) if type(v) in (int, float) else None


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _recompute_pipelines(passes: list[PassRecord]) -> None:
    """`traced` and `pipeline` from the pass chain itself (the record's fields are kept in
    `record`): a pass starts a pipeline when no earlier pass of its compile produced the graph it
    receives, or when it belongs to another compile than the pass before it. A recompile often
    starts from the very graph its first compile did (the guard that failed changed nothing in
    the graph): its passes are still its own, never a continuation of the earlier compile's.
    Passes that contain other recorded passes take the pipeline of their first child."""
    parents = {p.parent for p in passes if p.parent is not None}
    produced: dict[str | None, set[str]] = {}
    pipeline = -1
    last_cid: str | None = None
    first_child: dict[int, int] = {}
    for p in passes:
        if p.seq in parents:
            continue
        mine = produced.setdefault(p.compile_id, set())
        p.traced = p.before is not None and p.before not in mine
        if p.traced or pipeline < 0 or p.compile_id != last_cid:
            pipeline += 1
        last_cid = p.compile_id
        p.pipeline = pipeline
        mine.update(p.after.values())
        if p.parent is not None:
            first_child.setdefault(p.parent, pipeline)
    for p in passes:
        if p.seq in parents:
            p.pipeline = first_child.get(p.seq, max(pipeline, 0))
            p.traced = False
