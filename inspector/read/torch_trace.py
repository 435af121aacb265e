"""torch's own TORCH_TRACE logs as a capture: which records hold graphs, and the passes between them.

Graph records (`dynamo_output_graph`, `aot_*_graph`, `before/after_*_grad_graph`,
`inductor_*_graph`, `graph_dump` ...) become the graph states of one pipeline per compile id,
linked by synthetic passes: `inductor_entry`, `pre_grad_passes`, `aot_autograd`, `partition`
(roles fw, bw), `joint_graph_passes`, `post_grad_passes`. Their graph ids are `t` + the record's
payload md5.
"""

from __future__ import annotations

from collections import OrderedDict

from graphtrain_inspect.capture import logformat
from graphtrain_inspect.inspector.read.capture_records import GraphRef, PassRecord, _Rank

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


def index_torch_rank(rd: _Rank) -> None:
    """File a TORCH_TRACE log's graph records by graph id (`t` + the payload's md5), in order."""
    log = rd.log
    assert log is not None
    for rec in log.records:
        kind = rec.kind
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


def torch_passes(r: _Rank) -> list[PassRecord]:
    """Synthesize passes from torch's graph records, one pipeline per compile id."""
    by_cid: OrderedDict[str, list[tuple[str, GraphRef]]] = OrderedDict()
    for label, ref in r.torch_states:
        by_cid.setdefault(ref.compile_id or "", []).append((label, ref))
    out: list[PassRecord] = []
    pipeline = -1
    seq = 0

    def add(
        name: str, before: str | None, after: dict[str, str], traced: bool, cid: str, subsystem: str | None = None
    ) -> None:
        nonlocal seq
        out.append(
            PassRecord(
                rank=r.rank, seq=seq, name=name, before=before, after=after, pipeline=pipeline, traced=traced,
                source="torch", subsystem=subsystem, compile_id=cid or None, synthetic=True,
            )
        )  # fmt: skip
        seq += 1

    for cid, states in by_cid.items():
        pipeline += 1
        cur: str | None = None  # the main line before partitioning
        aot_outputs: list[tuple[str, str]] = []  # (role, gid) compiled by Inductor in turn
        joint: str | None = None
        fw_bw: dict[str, str] = {}
        post_k = 0
        post_before: dict[int, str] = {}
        joint_before: str | None = None
        started = False

        def first(gid: str, name: str) -> None:
            nonlocal started
            add(name, None, {"out": gid}, True, cid)
            started = True

        for label, ref in states:
            gid = ref.gid
            if label == "dynamo_output_graph":
                if started:
                    pipeline += 1
                    aot_outputs, joint, fw_bw, post_k, post_before = [], None, {}, 0, {}
                first(gid, "dynamo")
                cur = gid
            elif label == "before_pre_grad_graph":
                if cur is None:
                    first(gid, "trace")
                else:
                    add("inductor_entry", cur, {"out": gid}, False, cid)
                cur = gid
            elif label in ("after_pre_grad_graph", "inductor_pre_grad_graph"):
                if cur is None:
                    first(gid, label)
                else:
                    add("pre_grad_passes", cur, {"out": gid}, False, cid, "pre_grad_passes")
                cur = gid
            elif label in ("aot_joint_graph", "aot_inference_graph"):
                if cur is None:
                    first(gid, label)
                else:
                    add("aot_autograd", cur, {"out": gid}, False, cid)
                if label == "aot_joint_graph":
                    joint = gid
                else:
                    aot_outputs.append(("inference", gid))
                cur = gid
            elif label in ("aot_forward_graph", "aot_backward_graph"):
                role = "fw" if label == "aot_forward_graph" else "bw"
                fw_bw[role] = gid
                aot_outputs.append((role, gid))
                if "fw" in fw_bw and "bw" in fw_bw:
                    base = joint or cur
                    if base is None:
                        first(fw_bw["fw"], "aot_forward_graph")
                        add("aot_backward", None, {"bw": fw_bw["bw"]}, True, cid)
                    else:
                        add("partition" if joint else "aot_autograd", base, dict(fw_bw), False, cid)
            elif label == "before_joint_graph":
                # Inductor's joint-graph passes, on the joint graph or on the graph it compiles
                if joint is not None and not fw_bw:
                    base = joint
                elif post_k < len(aot_outputs):
                    base = aot_outputs[post_k][1]
                else:
                    base = cur
                if base is None:
                    first(gid, label)
                else:
                    add("inductor_entry", base, {"out": gid}, False, cid)
                joint_before = gid
            elif label == "after_joint_graph":
                base = joint_before if joint_before is not None else (joint or cur)
                if base is None:
                    first(gid, label)
                else:
                    add("joint_graph_passes", base, {"out": gid}, False, cid, "joint_graph_passes")
                if joint is not None and not fw_bw:
                    joint = gid
                elif post_k < len(aot_outputs):
                    aot_outputs[post_k] = (aot_outputs[post_k][0], gid)
                else:
                    cur = gid
                joint_before = None
            elif label == "before_post_grad_graph":
                role, base = aot_outputs[post_k] if post_k < len(aot_outputs) else ("out", cur)
                if base is None:
                    first(gid, label)
                else:
                    add("inductor_entry", base, {role: gid}, False, cid)
                post_before[post_k] = gid
            elif label in ("after_post_grad_graph", "inductor_post_grad_graph"):
                role = aot_outputs[post_k][0] if post_k < len(aot_outputs) else "out"
                base = post_before.get(post_k) or (aot_outputs[post_k][1] if post_k < len(aot_outputs) else cur)
                if base is None:
                    first(gid, label)
                else:
                    add("post_grad_passes", base, {role: gid}, False, cid, "post_grad_passes")
                post_k += 1
            else:
                # graph_dump, compiled autograd, DDP splits ...: graphs of their own
                pipeline += 1
                add(label, None, {"out": gid}, True, cid)
        if fw_bw and not ("fw" in fw_bw and "bw" in fw_bw):
            base = joint or cur
            add("partition" if joint else "aot_autograd", base, dict(fw_bw), base is None, cid)
    return out
