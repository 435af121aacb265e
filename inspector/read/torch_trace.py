"""torch's own TORCH_TRACE logs as a capture: which records hold graphs, and the passes between them.

Graph records (`dynamo_output_graph`, `aot_*_graph`, `before/after_*_grad_graph`,
`inductor_*_graph`, `graph_dump` ...) become the graph states of one pipeline per compile id,
linked by synthetic passes: `inductor_entry`, `pre_grad_passes`, `aot_autograd`, `partition`
(roles fw, bw), `joint_graph_passes`, `post_grad_passes`. Their graph ids are `t` + the record's
payload md5.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.inspector.read.capture_records import GraphRef, PassRecord, RankRecords

TORCH_GRAPH_KINDS = frozenset(
    {
        "dynamo_output_graph",
        "aot_joint_graph",
        "aot_forward_graph",
        "aot_backward_graph",
        "aot_inference_graph",
        "inductor_pre_grad_graph",
        "inductor_post_grad_graph",
        "graph_dump",
        "optimize_ddp_split_graph",
        "optimize_ddp_split_child",
        "compiled_autograd_graph",
    }
)
# torch's string artifacts that hold FX graph code
TORCH_GRAPH_ARTIFACTS = frozenset(
    {
        "before_pre_grad_graph",
        "after_pre_grad_graph",
        "before_post_grad_graph",
        "after_post_grad_graph",
        "inductor_pre_grad_graph",
        "inductor_post_grad_graph",
        "before_joint_graph",
        "after_joint_graph",
    }
)

_TORCH_LOG_PREFIX = "dedicated_log_torch_trace_"  # _rank_<R>_<random>.log, or _<random>.log without a rank


def is_torch_log(name: str) -> bool:
    return name.startswith(_TORCH_LOG_PREFIX) and name.endswith(".log") and not name.endswith(logformat.LOG_SUFFIX)


def index_torch_rank(rd: RankRecords) -> None:
    """File a TORCH_TRACE log's graph records by graph id (`t` + the payload's md5), in order."""
    log = rd.log
    assert log is not None
    for rec in log.records:
        kind = rec.kind
        if kind in logformat.SKIMMED_KINDS:
            continue  # never a graph (and its envelope is not decoded for nothing)
        label = None
        if "artifact" in rec.env:
            if kind in TORCH_GRAPH_ARTIFACTS and rec.meta.get("encoding") == "string":
                label = kind
        elif kind in TORCH_GRAPH_KINDS:
            label = kind
            if kind == "graph_dump":
                name = rec.meta.get("name")
                label = f"graph_dump:{name}" if name else kind
        if label is None or not rec.has_payload:
            continue
        md5 = rec.env.get("has_payload")
        gid = "t" + (md5[:16] if isinstance(md5, str) and len(md5) >= 16 else f"{rec.offset:016x}")
        ref = rd.graphs.get(gid)
        if ref is None:
            ref = rd.graphs[gid] = GraphRef(rd.rank, gid, label=label, compile_id=rec.compile_id)
            ref.records[logformat.GRAPH_CODE] = rec
        rd.torch_states.append(
            (
                label,
                ref
                if ref.compile_id == rec.compile_id
                else GraphRef(rd.rank, gid, dict(ref.records), ref.nodes, label, rec.compile_id),
            )
        )


def torch_passes(r: RankRecords) -> list[PassRecord]:
    """Synthesize passes from torch's graph records, one pipeline per compile id."""
    by_cid: OrderedDict[str, list[tuple[str, GraphRef]]] = OrderedDict()
    for label, ref in r.torch_states:
        by_cid.setdefault(ref.compile_id or "", []).append((label, ref))
    passes = _TorchPasses(r.rank)
    for cid, states in by_cid.items():
        passes.compile(cid, states)
    return passes.out


# the graph records that continue the main line (before partitioning): the pass between the
# previous graph and this one, and its subsystem
_MAIN_LINE = {
    "before_pre_grad_graph": ("inductor_entry", None),
    "after_pre_grad_graph": ("pre_grad_passes", "pre_grad_passes"),
    "inductor_pre_grad_graph": ("pre_grad_passes", "pre_grad_passes"),
    "aot_joint_graph": ("aot_autograd", None),
    "aot_inference_graph": ("aot_autograd", None),
}


@dataclass
class _TorchPasses:
    """The passes of one rank, made compile by compile: each graph record names the graph after
    a stage of torch.compile; the pass is the step from the graph before it."""

    rank: int
    out: list[PassRecord] = field(default_factory=list)
    pipeline: int = -1
    seq: int = 0
    # one compile's state
    cid: str = ""
    cur: str | None = None  # the main line before partitioning
    aot_outputs: list[tuple[str, str]] = field(default_factory=list)  # (role, gid) compiled by Inductor in turn
    joint: str | None = None
    fw_bw: dict[str, str] = field(default_factory=dict)
    post_k: int = 0
    post_before: dict[int, str] = field(default_factory=dict)
    joint_before: str | None = None
    started: bool = False

    def add(
        self, name: str, before: str | None, after: dict[str, str], traced: bool, subsystem: str | None = None
    ) -> None:
        self.out.append(
            PassRecord(
                rank=self.rank, seq=self.seq, name=name, before=before, after=after, pipeline=self.pipeline,
                traced=traced, source="torch", subsystem=subsystem, compile_id=self.cid or None, synthetic=True,
            )
        )  # fmt: skip
        self.seq += 1

    def first(self, gid: str, name: str) -> None:
        self.add(name, None, {"out": gid}, True)
        self.started = True

    def step(self, base: str | None, gid: str, label: str, name: str, subsystem: str | None = None) -> None:
        """The pass `name` from `base` to `gid`; the first graph of the pipeline where none is before it."""
        if base is None:
            self.first(gid, label)
        else:
            self.add(name, base, {"out": gid}, False, subsystem)

    def compile(self, cid: str, states: list[tuple[str, GraphRef]]) -> None:
        self.pipeline += 1
        self.cid, self.cur, self.started, self.joint_before = cid, None, False, None
        self._reset_aot()
        for label, ref in states:
            gid = ref.gid
            if label == "dynamo_output_graph":
                if self.started:
                    self.pipeline += 1
                    self._reset_aot()
                self.first(gid, "dynamo")
                self.cur = gid
            elif label in _MAIN_LINE:
                self._main_line(label, gid)
            elif label in ("aot_forward_graph", "aot_backward_graph"):
                self._partitioned(label, gid)
            elif label == "before_joint_graph":
                self._before_joint(gid)
            elif label == "after_joint_graph":
                self._after_joint(gid)
            elif label == "before_post_grad_graph":
                role, base = self.aot_outputs[self.post_k] if self.post_k < len(self.aot_outputs) else ("out", self.cur)
                if base is None:
                    self.first(gid, label)
                else:
                    self.add("inductor_entry", base, {role: gid}, False)
                self.post_before[self.post_k] = gid
            elif label in ("after_post_grad_graph", "inductor_post_grad_graph"):
                self._after_post_grad(label, gid)
            else:
                # graph_dump, compiled autograd, DDP splits ...: graphs of their own
                self.pipeline += 1
                self.add(label, None, {"out": gid}, True)
        if self.fw_bw and not ("fw" in self.fw_bw and "bw" in self.fw_bw):
            base = self.joint or self.cur
            self.add("partition" if self.joint else "aot_autograd", base, dict(self.fw_bw), base is None)

    def _reset_aot(self) -> None:
        self.aot_outputs, self.joint, self.fw_bw, self.post_k, self.post_before = [], None, {}, 0, {}

    def _main_line(self, label: str, gid: str) -> None:
        name, subsystem = _MAIN_LINE[label]
        # the first record of a compile names the pipeline's first graph: by "trace" for Inductor's entry
        self.step(self.cur, gid, "trace" if label == "before_pre_grad_graph" else label, name, subsystem)
        if label == "aot_joint_graph":
            self.joint = gid
        elif label == "aot_inference_graph":
            self.aot_outputs.append(("inference", gid))
        self.cur = gid

    def _partitioned(self, label: str, gid: str) -> None:
        role = "fw" if label == "aot_forward_graph" else "bw"
        self.fw_bw[role] = gid
        self.aot_outputs.append((role, gid))
        if "fw" in self.fw_bw and "bw" in self.fw_bw:
            base = self.joint or self.cur
            if base is None:
                self.first(self.fw_bw["fw"], "aot_forward_graph")
                self.add("aot_backward", None, {"bw": self.fw_bw["bw"]}, True)
            else:
                self.add("partition" if self.joint else "aot_autograd", base, dict(self.fw_bw), False)

    def _before_joint(self, gid: str) -> None:
        # Inductor's joint-graph passes, on the joint graph or on the graph it compiles
        base: str | None
        if self.joint is not None and not self.fw_bw:
            base = self.joint
        elif self.post_k < len(self.aot_outputs):
            base = self.aot_outputs[self.post_k][1]
        else:
            base = self.cur
        self.step(base, gid, "before_joint_graph", "inductor_entry")
        self.joint_before = gid

    def _after_joint(self, gid: str) -> None:
        base = self.joint_before if self.joint_before is not None else (self.joint or self.cur)
        self.step(base, gid, "after_joint_graph", "joint_graph_passes", "joint_graph_passes")
        if self.joint is not None and not self.fw_bw:
            self.joint = gid
        elif self.post_k < len(self.aot_outputs):
            self.aot_outputs[self.post_k] = (self.aot_outputs[self.post_k][0], gid)
        else:
            self.cur = gid
        self.joint_before = None

    def _after_post_grad(self, label: str, gid: str) -> None:
        k, outs = self.post_k, self.aot_outputs
        role = outs[k][0] if k < len(outs) else "out"
        base = self.post_before.get(k) or (outs[k][1] if k < len(outs) else self.cur)
        if base is None:
            self.first(gid, label)
        else:
            self.add("post_grad_passes", base, {role: gid}, False, "post_grad_passes")
        self.post_k += 1
