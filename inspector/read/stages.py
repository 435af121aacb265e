"""Graph states of each rank (the traced graph, then each pass's outputs) and how they line up.

A `Stage` is one graph a rank had at one point of a pipeline: the traced graph (`pass_name ==
"trace"`), or one output role of one pass application. Its `StageKey` (pipeline key, pass name,
occurrence of that pass name in the pipeline, role) is the same on every rank that ran the same
passes, which is how graphs are compared across ranks. `parent` is the stage the pass received,
which is how findings are blamed on the pass that introduced them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from graphtrain_inspect.inspector.read import pipelines

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.read.capture_reader import Capture
    from graphtrain_inspect.inspector.read.capture_records import PassRecord

TRACE = "trace"


def pipeline_label(key: str | None) -> str:
    """ "#2" -> "pipeline 2", "0/1#0" -> "compile 0/1", "#L0" -> "loaded graph's pipeline 0",
    "#1@layers.3" -> "pipeline 1 (layers.3)" (pipelines.pipeline_key)"""
    if not key:
        return ""
    cid, loaded, k, module = pipelines.parse_key(key)
    if not cid:
        label = f"pipeline {k}"
    else:
        label = f"compile {cid}" + (f" #{k}" if k not in ("", "0") else "")
    if loaded:
        label = "loaded graph's " + label
    return label + (f" ({module})" if module else "")


@dataclass(frozen=True)
class StageKey:
    pipeline: str
    pass_name: str
    occurrence: int
    role: str

    def pipeline_label(self) -> str:
        return pipeline_label(self.pipeline)

    def label(self) -> str:
        base = self.pass_name if self.occurrence == 0 else f"{self.pass_name}[{self.occurrence}]"
        return base if self.role == "out" else f"{base}:{self.role}"


@dataclass(eq=False)
class Stage:
    rank: int
    key: StageKey
    gid: str
    pass_rec: "PassRecord | None"  # None for the traced graph
    parent: "Stage | None"
    order: int  # position in the rank's stage list
    origin: str | None = None  # for a traced graph torch logged: its record's pass name ("dynamo")

    @property
    def pass_name(self) -> str:
        return self.key.pass_name

    @property
    def seq(self) -> int | None:
        return self.pass_rec.seq if self.pass_rec is not None else None

    def __repr__(self) -> str:
        return f"Stage(r{self.rank} {self.key.pipeline} {self.key.label()} {self.gid})"


def rank_stages(cap: "Capture", rank: int, *, containers: bool = False) -> list[Stage]:
    """Stages of one rank in pipeline order: traced graph first, then each finished pass's outputs.

    Passes that contain other recorded passes (a pass that calls passes) are left out unless
    `containers`: their effect is the sum of their children's, which are blamed instead.

    Inside one torch.compile (same compile id) several pipelines follow each other, linked by
    steps no pass records (AOT tracing, partitioning, lowering): the traced graph of a later one
    gets as parent the final graph of an earlier one with the closest node count (fw to fw,
    bw to bw), so a problem carried along is one finding, not one per pipeline.
    """
    out: list[Stage] = []
    parents = {p.parent for p in cap.passes(rank) if p.parent is not None}
    finals: dict[str, list[Stage]] = {}  # compile id -> leaf stages of its earlier pipelines

    def nodes(gid: str) -> int:
        ref = cap.graph(rank, gid)
        return ref.nodes if ref is not None and ref.nodes is not None else 0

    for pl in cap.pipelines(rank):
        counts: dict[tuple[str, str], int] = {}
        latest: dict[str, Stage] = {}  # gid -> latest stage holding it
        cid = pl.key.rpartition("#")[0]
        start = len(out)

        def add(name: str, role: str, gid: str, rec: "PassRecord | None", parent: Stage | None) -> Stage:
            k = counts.get((name, role), 0)
            counts[(name, role)] = k + 1
            st = Stage(rank, StageKey(pl.key, name, k, role), gid, rec, parent, len(out))
            out.append(st)
            latest[gid] = st
            return st

        def trace_parent(gid: str) -> Stage | None:
            cands = finals.get(cid) if cid else None
            if not cands:
                return None
            n = nodes(gid)
            return min(reversed(cands), key=lambda st: abs(nodes(st.gid) - n))

        for p in pl.passes:
            if p.status != "ok" or not p.after or (p.seq in parents and not containers):
                continue
            if p.before is None:
                # a graph torch logged with nothing before it: a traced graph of its own
                for role, gid in p.after.items():
                    st = add(TRACE if p.traced else p.name, role, gid, None if p.traced else p, trace_parent(gid))
                    st.origin = p.name
                continue
            parent = latest.get(p.before)
            if parent is None:
                parent = add(TRACE, "out", p.before, None, trace_parent(p.before))
            for role, gid in p.after.items():
                add(p.name, role, gid, p, parent)
        if cid:
            mine = out[start:]
            has_child = {id(st.parent) for st in mine if st.parent is not None}
            finals.setdefault(cid, []).extend(st for st in mine if id(st) not in has_child)
    return out


class StageIndex:
    """Stages of every rank, and the same stage across ranks."""

    def __init__(self, cap: "Capture"):
        self.cap = cap
        self.by_rank: dict[int, list[Stage]] = {r: rank_stages(cap, r) for r in cap.ranks}
        self.by_key: dict[StageKey, dict[int, Stage]] = {}
        self.keys: list[StageKey] = []
        for r in sorted(self.by_rank):
            for st in self.by_rank[r]:
                d = self.by_key.get(st.key)
                if d is None:
                    d = self.by_key[st.key] = {}
                    self.keys.append(st.key)
                d[r] = st

    def across(self, key: StageKey) -> dict[int, Stage]:
        return self.by_key.get(key, {})

    def find(self, pass_name: str, rank: int | None = None) -> list[StageKey]:
        """Stage keys of a pass by name, `module:qualname`, `#seq` (on `rank`), or `trace`."""
        out = []
        for key in self.keys:
            stages = self.by_key[key]
            if key.pass_name == pass_name or any(st.origin == pass_name for st in stages.values()):
                out.append(key)
                continue
            for r, st in stages.items():
                p = st.pass_rec
                if p is None or (rank is not None and r != rank):
                    continue
                if pass_name in (p.qualname, f"#{p.seq}") or (p.qualname and p.qualname.endswith(":" + pass_name)):
                    out.append(key)
                    break
        return out
