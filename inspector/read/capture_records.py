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
    # identity (format 4): where the received graph came from ("traced", "pass", "loaded"; None in
    # older logs), the pass that returned that very graph object, the module path at a pipeline's start
    input: str | None = None
    input_from: int | None = None
    module: str | None = None
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
    key: str  # comparable across ranks: compile id (or ""), origin, ordinal, module (identity.pipeline_key)
    passes: list[PassRecord]
    traced: str | None  # gid of the graph at the start
    origin: str = "traced"  # "traced" here, or "loaded": a graph loaded (another rank's, or a precompiled one)
    module: str | None = None  # the module path its graph's nodes share (the layer of a per-layer compile)
    loaded_from: list[int] = field(default_factory=list)  # for a loaded graph: the ranks whose pass produced it


class RankRecords:
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


def int_or(v: Any, default: Any) -> Any:
    return v if type(v) is int else default


def float_or_none(v: Any) -> float | None:
    return float(v) if type(v) in (int, float) else None


def str_or_none(v: Any) -> str | None:
    return v if isinstance(v, str) else None
