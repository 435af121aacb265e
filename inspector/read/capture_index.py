"""Open a capture directory or torch's own TORCH_TRACE logs: ranks, passes, graphs, errors.

    cap = open_capture("captures/run1")          # or a TORCH_TRACE dir, or one log file
    cap.ranks                                    # [0, 1]
    for p in cap.passes(0): print(p.seq, p.name, p.before, p.after)
    tables = cap.node_table(0, gid)              # GraphTables (parsed on demand, LRU-cached)
    cap.graph_code(0, gid); cap.symbols(0, gid); cap.devices(0, gid); cap.rank_table(0)
    cap.errors                                   # ReadError: file, line, message

Opening scans each log once for record offsets (envelopes only) and decodes the small pass
records; graph payloads are decoded when asked. Two sources are understood:

* a capture (`kind == "capture"`): our `gti_*` records, passes as the capture recorded them.
* torch's TORCH_TRACE logs (`kind == "torch_trace"`): graph records (`dynamo_output_graph`,
  `aot_*_graph`, `before/after_*_grad_graph`, `inductor_*_graph`, `graph_dump` ...) become the
  graph states of one pipeline per compile id, linked by synthetic passes: `inductor_entry`,
  `pre_grad_passes`, `aot_autograd`, `partition` (roles fw, bw), `post_grad_passes`. Their graph
  ids are `t` + the record's payload md5, and their node tables are parsed from the text.

Nothing here imports torch; nothing is ever unpickled.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from itertools import compress, repeat
from operator import is_
from dataclasses import dataclass, field
from typing import Any

import orjson

from graphtrain_inspect.capture import logformat
from graphtrain_inspect.inspector.errors import CaptureUnreadable
from graphtrain_inspect.inspector.read.fxtext import parse_graph_code
from graphtrain_inspect.inspector.read.graphmodel import GraphTables, SubGraph, _row_ok, derive_devices, derive_symbols
from graphtrain_inspect.inspector.read.logscan import LogFile, ReadError, Record, open_regular
from graphtrain_inspect.inspector.read.weighted_cache import WeightedLRU

_TABLE_CACHE_SIZE = 256
# parsed node tables cost ~1 KB a node: keep at most this many nodes (a few of the largest graphs)
_TABLE_CACHE_NODES = 600_000
# node-table rows as undecoded lines (`node_rows`), by payload bytes
_ROWS_CACHE_BYTES = 96 << 20
# decoded rows kept by their line (bytes) so that a row the next pass or another rank left as it
# was is decoded and validated once: the pool is emptied when it holds this many rows, which
# bounds it whatever the capture's size
_ROW_POOL_ROWS = 300_000

# torch's own record kinds that hold FX graph code (top-level envelope keys)
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


class Capture:
    """A capture directory or a set of TORCH_TRACE logs, indexed. See the module docstring."""

    def __init__(self, path: str, kind: str):
        self.path = path
        self.kind = kind  # "capture" | "torch_trace"
        self.manifest: dict[str, Any] | None = None
        self.errors: list[ReadError] = []
        self.torch_trace_dir: str | None = None
        # each writer process's status file (status/rank_<R>.<pid>.json), by rank: how its log ended
        self.statuses: dict[int, list[dict[str, Any]]] = {}
        self._ranks: dict[int, _Rank] = {}
        # logs not read as the rank their name says (`_leave_out_strays`): rank -> (path, problem, why)
        self.left_out: dict[int, tuple[str, str, str]] = {}
        self._tables = WeightedLRU(_TABLE_CACHE_NODES, _TABLE_CACHE_SIZE)
        self._rows = WeightedLRU(_ROWS_CACHE_BYTES, _TABLE_CACHE_SIZE)
        self._derived: dict[tuple[str, int, str | None], Any] = {}
        self._row_pool: dict[bytes, Any] = {}  # row line -> its row dict, or False (not a row)

    # -- ranks, headers --------------------------------------------------------------------------

    @property
    def ranks(self) -> list[int]:
        return sorted(self._ranks)

    @property
    def world_size(self) -> int:
        sizes = [r.header.get("world_size") for r in self._ranks.values() if r.header]
        sizes = [s for s in sizes if isinstance(s, int)]
        return max(sizes) if sizes else (max(self._ranks) + 1 if self._ranks else 0)

    def all_errors(self) -> list[ReadError]:
        """Read errors of the capture and of every log, in file order (decode errors included)."""
        out = list(self.errors)
        for r in self.ranks:
            log = self._ranks[r].log
            if log is not None:
                out.extend(log.errors)
        return out

    def log_file(self, rank: int) -> LogFile | None:
        return self._ranks[rank].log if rank in self._ranks else None

    def header(self, rank: int) -> dict[str, Any] | None:
        return self._ranks[rank].header if rank in self._ranks else None

    def end(self, rank: int) -> dict[str, Any] | None:
        r = self._ranks.get(rank)
        if r is None or r.end_rec is None or r.log is None:
            return None
        v = r.log.payload(r.end_rec)
        return v if isinstance(v, dict) else None

    def stopped(self, rank: int) -> str | None:
        """Why the rank's capture stopped writing before its process ended (a failed write, its log
        deleted), from the writers' status files or the manifest; None if it did not stop."""
        for st in self.statuses.get(rank, ()):
            if st.get("state") == "stopped":
                return str(st.get("reason") or "stopped writing")
        m = self.manifest or {}
        stopped = m.get("stopped_ranks")
        if isinstance(stopped, dict) and stopped.get(str(rank)):
            return str(stopped[str(rank)])
        return None

    def records(self, rank: int) -> list[Record]:
        r = self._ranks.get(rank)
        return r.log.records if r is not None and r.log is not None else []

    def payload(self, rank: int, record: Record) -> Any:
        log = self.log_file(rank)
        return None if log is None else log.payload(record)

    def rank_table(self, rank: int) -> dict[str, Any] | None:
        """The last `gti_ranks` record of the rank (process groups, meshes, coordinates)."""
        r = self._ranks.get(rank)
        if r is None or r.log is None:
            return None
        for rec in reversed(r.rank_recs):
            v = r.log.payload(rec)
            if isinstance(v, dict):
                return _clean_rank_table(v)
        return None

    def local_rank(self, rank: int) -> int | None:
        h = self.header(rank)
        if h and isinstance(h.get("local_rank"), int):
            return h["local_rank"]
        return None

    def capture_errors(self, rank: int) -> list[dict[str, Any]]:
        """`gti_error` payloads of the rank: instrumentation failures (training went on)."""
        r = self._ranks.get(rank)
        if r is None or r.log is None:
            return []
        out = []
        for rec in r.error_recs:
            v = r.log.payload(rec)
            if isinstance(v, dict):
                out.append(v)
        return out

    # -- passes ------------------------------------------------------------------------------------

    def passes(self, rank: int) -> list[PassRecord]:
        """Pass applications of the rank in order (seq), raised and unfinished ones included."""
        r = self._ranks.get(rank)
        if r is None:
            return []
        if r.passes is None:
            r.passes = self._torch_passes(r) if self.kind == "torch_trace" else self._capture_passes(r)
        return r.passes

    def pass_by_seq(self, rank: int, seq: int) -> PassRecord | None:
        for p in self.passes(rank):
            if p.seq == seq:
                return p
        return None

    def find_passes(self, name: str, rank: int | None = None) -> list[PassRecord]:
        """Passes whose name (or `module:qualname`, or `#seq`) matches, on one rank or all."""
        out = []
        for r in [rank] if rank is not None else self.ranks:
            for p in self.passes(r):
                if name in (p.name, p.qualname, f"#{p.seq}", str(p.seq)) or (p.qualname and p.qualname.endswith(":" + name)):
                    out.append(p)
        return out

    def pass_names(self) -> list[str]:
        seen: dict[str, None] = {}
        for r in self.ranks:
            for p in self.passes(r):
                seen.setdefault(p.name, None)
        return list(seen)

    def pipelines(self, rank: int) -> list[Pipeline]:
        groups: dict[int, list[PassRecord]] = {}
        for p in self.passes(rank):
            groups.setdefault(p.pipeline, []).append(p)
        out = []
        ordinal: dict[str, int] = {}
        for idx in sorted(groups):
            ps = groups[idx]
            cid = next((p.compile_id for p in ps if p.compile_id), None) or ""
            k = ordinal.get(cid, 0)
            ordinal[cid] = k + 1
            traced = next((p.before for p in ps if p.traced), None) or (ps[0].before if ps else None)
            out.append(Pipeline(rank, idx, f"{cid}#{k}", ps, traced))
        return out

    def _capture_passes(self, r: _Rank) -> list[PassRecord]:
        log = r.log
        assert log is not None
        by_seq: dict[int, PassRecord] = {}
        for rec in r.pass_recs:
            v = log.payload(rec)
            if not isinstance(v, dict) or type(v.get("seq")) is not int:
                continue
            # A log may come from anywhere: every field is taken only with the type it must have.
            after = v.get("after") if isinstance(v.get("after"), dict) else {}
            blobs = v.get("blobs") if isinstance(v.get("blobs"), dict) else {}
            by_seq[v["seq"]] = PassRecord(
                rank=r.rank,
                seq=v["seq"],
                name=str(v.get("name") or "?"),
                before=_str(v.get("before")),
                after={str(k): g for k, g in after.items() if isinstance(g, str) and g},
                pipeline=_int(v.get("pipeline"), 0),
                traced=bool(v.get("traced")),
                status=str(v.get("status") or "ok"),
                qualname=_str(v.get("qualname")),
                source=_str(v.get("source")),
                subsystem=_str(v.get("subsystem")),
                compile_id=_str(v.get("compile_id")),
                exception=v.get("exception") if isinstance(v.get("exception"), dict) else None,
                nodes=v.get("nodes") if isinstance(v.get("nodes"), dict) else None,
                wall_s=_num(v.get("wall_s")),
                time=_num(v.get("time")),
                capture_errors=_int(v.get("capture_errors"), 0),
                parent=_int(v.get("parent"), None),
                blobs={str(k): ref for k, b in blobs.items() if (ref := logformat.blob_ref(b)) is not None},
                record=rec,
            )
        last_pipeline = max((p.pipeline for p in by_seq.values()), default=0)
        for rec in r.start_recs:
            v = log.payload(rec)
            if not isinstance(v, dict) or type(v.get("seq")) is not int or v["seq"] in by_seq:
                continue
            by_seq[v["seq"]] = PassRecord(
                rank=r.rank,
                seq=v["seq"],
                name=str(v.get("name") or "?"),
                before=_str(v.get("before")),
                after={},
                pipeline=last_pipeline,
                status="incomplete",
                time=_num(v.get("time")),
                record=rec,
            )
        out = [by_seq[k] for k in sorted(by_seq)]
        self._merge_blobs(r, out)
        _recompute_pipelines(out)
        return out

    def _merge_blobs(self, r: _Rank, passes: list[PassRecord]) -> None:
        """Since format 3 a graph's blob may be named after the pass records of its graph, by a
        `gti_blob` record (written when the child that made it finished): each pass record that
        names the graph without its blob gets it from there, as a pass record of format 2 named the
        blob of each of its graphs. Blob errors reported after their pass's record (`late`) are
        added to its capture errors. A log without these records (format 1 and 2) reads as it did."""
        log = r.log
        assert log is not None
        refs: dict[str, dict[str, Any]] = {}
        for rec in r.blob_recs:
            v = log.payload(rec)
            ref = logformat.blob_ref(v)
            if ref is not None and isinstance(v.get("gid"), str):
                refs.setdefault(v["gid"], ref)
        late: dict[int, int] = {}
        for rec in r.error_recs:
            v = log.payload(rec)
            if isinstance(v, dict) and v.get("late") is True and type(v.get("seq")) is int:
                late[v["seq"]] = late.get(v["seq"], 0) + 1
        if not refs and not late:
            return
        for p in passes:
            for gid in (p.before, *p.after.values()):
                if gid is not None and gid not in p.blobs and gid in refs:
                    p.blobs[gid] = refs[gid]
            p.capture_errors += late.get(p.seq, 0)

    def _torch_passes(self, r: _Rank) -> list[PassRecord]:
        """Synthesize passes from torch's graph records, one pipeline per compile id."""
        by_cid: OrderedDict[str, list[tuple[str, GraphRef]]] = OrderedDict()
        for label, ref in r.torch_states:
            by_cid.setdefault(ref.compile_id or "", []).append((label, ref))
        out: list[PassRecord] = []
        pipeline = -1
        seq = 0

        def add(name: str, before: str | None, after: dict[str, str], traced: bool, cid: str, subsystem: str | None = None) -> None:
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

    # -- graphs --------------------------------------------------------------------------------

    def graphs(self, rank: int) -> dict[str, GraphRef]:
        r = self._ranks.get(rank)
        return r.graphs if r is not None else {}

    def graph(self, rank: int, gid: str) -> GraphRef | None:
        return self.graphs(rank).get(gid)

    def node_count(self, rank: int, gid: str | None) -> int | None:
        ref = self.graph(rank, gid) if gid else None
        if ref is None:
            return None
        if ref.nodes is None:
            tables = self.node_table(rank, gid)
            if tables is not None:
                ref.nodes = tables.node_count
        return ref.nodes

    def _payload(self, rank: int, gid: str, kind: str) -> Any:
        ref = self.graph(rank, gid)
        if ref is None:
            return None
        rec = ref.records.get(kind)
        log = self.log_file(rank)
        if rec is None or log is None:
            return None
        v = log.payload(rec)
        for alt in ref.alternates.get(kind, ()) if v is None else ():
            v = log.payload(alt)
            if v is not None:
                break
        return v

    def graph_code(self, rank: int, gid: str) -> str | None:
        v = self._payload(rank, gid, logformat.GRAPH_CODE)
        return v if isinstance(v, str) else None

    def node_table(self, rank: int, gid: str) -> GraphTables | None:
        """Node tables of a graph: the captured table, else parsed from its code; None if neither."""
        key = self._table_key(rank, gid)
        if key in self._tables:
            return self._tables.get(key)
        tables = self._table_from_rows(rank, gid)
        if tables is None:
            v = self._payload(rank, gid, logformat.NODES)
            if isinstance(v, dict) and isinstance(v.get("graphs"), list):
                tables = GraphTables.from_payload(gid, v, source="table")
            else:
                code = self.graph_code(rank, gid)
                if code is not None:
                    parsed, warnings = parse_graph_code(code)
                    tables = GraphTables.from_payload(gid, parsed, source="text", warnings=warnings)
        self._tables.put(key, tables, 1 + (tables.node_count if tables is not None else 0))
        return tables

    def node_row(self, rank: int, gid: str, path: str, name: str) -> tuple[bool, dict[str, Any] | None]:
        """(whether the graph has that subgraph, `node_table(...).subgraph(path).node(name)`)
        without decoding the whole table when it is not decoded yet: the one row line of that
        name, found in the undecoded rows. The whole table where the lines cannot say (no such
        line, several, or one that is not a valid row)."""
        got = self._lines_named(rank, gid, path, name)
        if got is not None and len(got[1]) == 1:
            row = self.decoded_row(got[0][got[1][0]])
            if row is not None:
                return True, row
        tables = self.node_table(rank, gid)
        sub = tables.subgraph(path) if tables is not None else None
        return (True, sub.node(name)) if sub is not None else (False, None)

    def rows_around(self, rank: int, gid: str, path: str, name: str, reach: int) -> list[dict[str, Any]] | None:
        """The rows of subgraph `path` within `reach` rows of node `name` (its row among them),
        what `node_table(...).subgraph(path).nodes` holds there, decoded from the undecoded rows
        alone when the table is not decoded yet; None where the lines cannot say (no such line,
        several, or a row in reach that is not valid, which the decoded table would leave out):
        then read the whole table."""
        got = self._lines_named(rank, gid, path, name)
        if got is None or len(got[1]) != 1:
            return None
        lines, (at,) = got
        try:
            rows = [self.decoded_row(ln) for ln in lines[max(0, at - reach) : at + reach + 1]]
        except orjson.JSONDecodeError:
            return None
        return rows if all(rows) else None  # type: ignore[return-value]

    def _lines_named(self, rank: int, gid: str, path: str, name: str) -> tuple[list[bytes], list[int]] | None:
        """The undecoded row lines of subgraph `path` of a table not decoded yet, and the indices
        of those that are the row named `name` (a row line starts with its name); None when the
        lines are not there to read, no subgraph head says `path`, or a head does not parse."""
        subs = self.node_rows(rank, gid) if self._table_key(rank, gid) not in self._tables else None
        if subs is None:
            return None
        head = b'{"name":' + orjson.dumps(name) + b","
        for h, lines in subs:
            try:
                if str(logformat.decode_sub_head(h).get("path") or "") != path:
                    continue
            except (orjson.JSONDecodeError, AttributeError):
                return None
            return lines, [i for i, ln in enumerate(lines) if ln.startswith(head)]
        return None

    def decoded_row(self, line: bytes) -> dict[str, Any] | None:
        """One row line of `node_rows`, decoded and validated through the row pool (None: not a
        valid row). Raises orjson.JSONDecodeError when the line does not parse."""
        pool = self._row_pool
        r = pool.get(line)
        if r is None:
            if len(pool) > _ROW_POOL_ROWS:
                pool.clear()
            r = logformat.decode_row(line)
            r = pool[line] = r if _row_ok(r) else False
        return r or None

    def _table_from_rows(self, rank: int, gid: str) -> GraphTables | None:
        """The node table from its undecoded rows (`node_rows`), each distinct row decoded and
        validated once per capture (the row pool): the same tables `GraphTables.from_payload`
        makes of the whole payload, row dicts shared with every table that has the same line.
        None when the table is not laid out one row per line or a line does not parse alone."""
        subs = self.node_rows(rank, gid)
        if subs is None:
            return None
        pool = self._row_pool
        if len(pool) > _ROW_POOL_ROWS:
            pool.clear()
        graphs = []
        try:
            for head, lines in subs:
                h = logformat.decode_sub_head(head)
                if not isinstance(h, dict):
                    return None
                got = list(map(pool.get, lines))
                todo = list(compress(range(len(got)), map(is_, got, repeat(None))))
                if todo:
                    # the rows not in the pool, decoded in one call: a JSON array of their lines,
                    # each without its separating comma (as logformat.decode_row reads one)
                    body = b",".join([ln[:-1] if ln[-1:] == b"," else ln for ln in map(lines.__getitem__, todo)])
                    rows = orjson.loads(b"[" + body + b"]")
                    if len(rows) != len(todo):
                        return None  # a line holding more than one value: not a row per line
                    for i, row in zip(todo, rows):
                        got[i] = pool[lines[i]] = row if _row_ok(row) else False
                parent = h.get("parent_node")
                graphs.append(SubGraph(str(h.get("path") or ""), parent if isinstance(parent, str) else None, list(filter(None, got))))
        except orjson.JSONDecodeError:
            return None
        if not graphs:
            graphs = [SubGraph("", None, [])]
        return GraphTables(gid, graphs, source="table")

    def node_rows(self, rank: int, gid: str) -> list[tuple[bytes, list[bytes]]] | None:
        """A node table's rows as undecoded JSON lines, per subgraph ([(head, rows)]), for readers
        that compare or filter rows before parsing any (logformat.node_table_rows); None when the
        table is not laid out one row per line or its record does not read back exactly."""
        key = self._table_key(rank, gid)
        if key in self._rows:
            return self._rows.get(key)
        ref = self.graph(rank, gid)
        rec = ref.records.get(logformat.NODES) if ref is not None else None
        log = self.log_file(rank)
        rows = None
        if rec is not None and log is not None:
            got = log.payload_text(rec)
            rows = logformat.node_table_rows(got[1], got[0]) if got is not None else None
        self._rows.put(key, rows, 1 + (rec.end - rec.payload_start if rec is not None else 0))
        return rows

    def _table_key(self, rank: int, gid: str) -> tuple:
        """The same graph logged by several ranks (same id, same node-table md5) is parsed once."""
        ref = self.graph(rank, gid)
        rec = ref.records.get(logformat.NODES) if ref is not None else None
        md5 = rec.env.get("has_payload") if rec is not None else None
        return (gid, md5) if isinstance(md5, str) and md5 else (rank, gid)

    def symbols(self, rank: int, gid: str) -> dict[str, Any] | None:
        """The graph's symbol map (`gti_symbols`), or one derived from its node rows."""
        v = self._payload(rank, gid, logformat.SYMBOLS)
        if isinstance(v, dict) and isinstance(v.get("symbols"), dict):
            return _clean_symbols(v)
        key = ("sym", rank, gid)
        if key not in self._derived:
            t = self.node_table(rank, gid)
            self._derived[key] = derive_symbols(t) if t is not None else None
        return self._derived[key]

    def devices(self, rank: int, gid: str) -> dict[str, Any] | None:
        """The graph's device table (`gti_devices`) on this rank, or one derived from node rows;
        read and validated once (the checks ask for it per rank diff and per stage)."""
        key = ("dev", rank, gid)
        if key not in self._derived:
            v = self._payload(rank, gid, logformat.DEVICES)
            if isinstance(v, dict) and isinstance(v.get("literals"), list):
                self._derived[key] = _clean_devices(v)
            else:
                t = self.node_table(rank, gid)
                self._derived[key] = derive_devices(t) if t is not None else None
        return self._derived[key]

    def own_device(self, rank: int, gid: str | None = None) -> str | None:
        """The device this rank computes on, from a device table (captured or inferred)."""
        # asked for every rank diff of every stage; a device table lists every device literal
        # of its graph, which is a lot to decode again each time
        key = ("own", rank, gid)
        if key not in self._derived:
            self._derived[key] = self._own_device(rank, gid)
        return self._derived[key]

    def _own_device(self, rank: int, gid: str | None) -> str | None:
        if gid is not None:
            d = self.devices(rank, gid)
            if d and d.get("own_device"):
                return d["own_device"]
        for g in self.graphs(rank):
            rec = self.graph(rank, g).records.get(logformat.DEVICES)  # type: ignore[union-attr]
            if rec is not None:
                d = self.payload(rank, rec)
                if isinstance(d, dict) and d.get("own_device"):
                    return d["own_device"]
        return None

    def close(self) -> None:
        for r in self._ranks.values():
            if r.log is not None:
                r.log.close()

    def __enter__(self) -> "Capture":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Capture({self.path!r}, {self.kind}, ranks={self.ranks})"


def _clean_symbols(v: dict[str, Any]) -> dict[str, Any]:
    """A `gti_symbols` payload with the schema's types (entries of other types dropped, in place)."""
    syms = v["symbols"]
    for k in [k for k, e in syms.items() if not isinstance(e, dict)]:
        del syms[k]
    for e in syms.values():
        for key in ("bound_by", "inputs", "used_by"):
            if key in e:
                e[key] = [w for w in e[key] if isinstance(w, dict)] if isinstance(e[key], list) else []
        if "range" in e and not isinstance(e["range"], list):
            del e["range"]
    if not isinstance(v.get("renamings"), dict):
        v["renamings"] = {}
    v["renamings"] = {k: r for k, r in v["renamings"].items() if isinstance(r, str)}
    if "deferred_asserts" in v:
        da = v["deferred_asserts"]
        v["deferred_asserts"] = [a for a in da if isinstance(a, dict)] if isinstance(da, list) else []
    return v


def _clean_rank_table(v: dict[str, Any]) -> dict[str, Any]:
    """A `gti_ranks` payload with the schema's types (entries of other types dropped, in place)."""
    groups = v.get("groups")
    v["groups"] = {str(k): g for k, g in groups.items() if isinstance(g, dict)} if isinstance(groups, dict) else {}
    for g in v["groups"].values():
        if not isinstance(g.get("ranks"), list):
            g.pop("ranks", None)
        if not isinstance(g.get("desc"), (str, type(None))):
            g["desc"] = None
    meshes = v.get("meshes")
    v["meshes"] = [m for m in meshes if isinstance(m, dict)] if isinstance(meshes, list) else []
    for m in v["meshes"]:
        for key in ("shape", "dim_names", "coordinate"):
            if key in m and not isinstance(m[key], list):
                del m[key]
        if "group_names" in m and not isinstance(m["group_names"], dict):
            del m["group_names"]
        if "mesh" in m and not isinstance(m["mesh"], list):
            del m["mesh"]
    for key in ("rank", "world_size"):
        if key in v and type(v[key]) is not int:
            del v[key]
    return v




_STR_OR_NONE = (str, type(None))


def _device_entry_ok(x: Any) -> bool:
    # unrolled over _DEVICE_STR_FIELDS: a device table lists every value of a large graph
    if type(x) is not dict:
        return False
    g = x.get
    ok = _STR_OR_NONE
    return (type(g("graph")) in ok and type(g("node")) in ok and type(g("target")) in ok and type(g("where")) in ok
            and type(g("device")) in ok and type(g("kind")) in ok and type(g("dtype")) in ok)  # fmt: skip


def _clean_devices(v: dict[str, Any]) -> dict[str, Any]:
    """A `gti_devices` payload with the schema's types (entries of other types dropped, in place)."""
    for key in ("literals", "values"):
        items = v.get(key)
        v[key] = [x for x in items if _device_entry_ok(x)] if isinstance(items, list) else []
    if not isinstance(v.get("own_device"), (str, type(None))):
        v["own_device"] = None
    if "local_rank" in v and type(v["local_rank"]) is not int:
        v["local_rank"] = None
    return v


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


# ---------------------------------------------------------------------------------------------
# Opening


_TORCH_LOG_PREFIX = "dedicated_log_torch_trace_"  # _rank_<R>_<random>.log, or _<random>.log without a rank


def _is_torch_log(name: str) -> bool:
    return name.startswith(_TORCH_LOG_PREFIX) and name.endswith(".log") and not name.endswith(logformat.LOG_SUFFIX)


def _is_our_log(name: str) -> bool:
    return name.startswith(logformat.LOG_PREFIX) and name.endswith(logformat.LOG_SUFFIX)


def open_capture(path: str, *, source: str = "auto") -> Capture:
    """Open a capture directory, a TORCH_TRACE directory or one log file.

    `source`: "auto" (our logs if any, else torch's), "capture" or "torch" (the `torch_trace/`
    subdirectory of a capture, or torch's logs in the directory). Raises CaptureUnreadable.
    """
    if not os.path.exists(path):
        raise CaptureUnreadable(f"{path}: no such file or directory")
    if os.path.isfile(path):
        return _open_files(path, [path], None, source)
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        raise CaptureUnreadable(f"{path}: cannot list directory: {e.strerror or e}") from None
    manifest = None
    manifest_error = None
    if logformat.MANIFEST_NAME in names:
        mpath = os.path.join(path, logformat.MANIFEST_NAME)
        try:
            manifest = read_manifest(mpath, path)
        except (OSError, ValueError) as e:
            manifest = None
            manifest_error = ReadError(mpath, None, f"manifest does not parse: {e}")
    ours = [os.path.join(path, n) for n in names if _is_our_log(n)]
    torch_dir = os.path.join(path, "torch_trace")
    torch_logs = [os.path.join(path, n) for n in names if _is_torch_log(n)]
    if not torch_logs and os.path.isdir(torch_dir):
        torch_logs = [os.path.join(torch_dir, n) for n in sorted(os.listdir(torch_dir)) if _is_torch_log(n)]
    if source == "torch" or (source == "auto" and not ours and torch_logs):
        if not torch_logs:
            raise CaptureUnreadable(f"{path}: no TORCH_TRACE logs (dedicated_log_torch_trace_rank_*.log)")
        cap = _open_files(path, torch_logs, None, "torch")
    else:
        if not ours:
            other = [n for n in names if n.endswith(".log")]
            hint = f" (found {', '.join(other[:3])})" if other else ""
            raise CaptureUnreadable(f"{path}: not a capture: no {logformat.LOG_PREFIX}<R>{logformat.LOG_SUFFIX} logs{hint}")
        cap = _open_files(path, ours, manifest, "capture")
        if os.path.isdir(torch_dir):
            cap.torch_trace_dir = torch_dir
    if manifest_error is not None:
        cap.errors.insert(0, manifest_error)
    cap.manifest = manifest
    _check_manifest(cap, path)
    if cap.kind == "capture":
        read_statuses(cap, path)
    return cap


MANIFEST_LIMIT = 64 << 20


def read_manifest(mpath: str, base: str) -> dict[str, Any]:
    """The manifest as a dict; OSError or ValueError (one line) when it cannot be read."""
    with open_regular(mpath, base=base) as f:
        data = f.read(MANIFEST_LIMIT + 1)
    if len(data) > MANIFEST_LIMIT:
        raise ValueError(f"larger than {MANIFEST_LIMIT >> 20} MB")
    m = orjson.loads(data)
    if not isinstance(m, dict):
        raise ValueError("not a JSON object")
    return m


def read_statuses(cap: Capture, path: str) -> None:
    """Each writer's status file (DIR/status/rank_<R>.<pid>.json) into `cap.statuses`; a file that
    is not one becomes a ReadError. Files are read only inside the capture, a few KB at most."""
    sdir = os.path.join(path, logformat.STATUS_DIR)
    if not os.path.isdir(path) or not os.path.isdir(sdir):
        return
    try:
        names = sorted(os.listdir(sdir))
    except OSError as e:
        cap.errors.append(ReadError(sdir, None, f"cannot list: {e.strerror or e}"))
        return
    cap.statuses = {}
    for name in names:
        who = logformat.status_of_file_name(name)
        if who is None:
            continue
        spath = os.path.join(sdir, name)
        try:
            with open_regular(spath, base=path) as f:
                doc = logformat.decode_status(f.read(logformat.STATUS_BYTES * 4))
        except (OSError, logformat.FormatError) as e:
            cap.errors.append(ReadError(spath, None, f"status file unreadable: {e.strerror if isinstance(e, OSError) and e.strerror else e}"))
            continue
        rank, pid = who
        cap.statuses.setdefault(rank, []).append({
            "pid": pid,
            "state": str(doc.get("state")),
            "reason": _str(doc.get("reason")),
            "records": _int(doc.get("records"), None),
        })  # fmt: skip


def _check_manifest(cap: Capture, path: str) -> None:
    m = cap.manifest
    if m is None:
        if cap.kind == "capture":
            cap.errors.append(ReadError(os.path.join(path, logformat.MANIFEST_NAME), None, "no manifest (capture still running or copied without it)"))
        return
    version = m.get("format_version")
    if isinstance(version, int) and version > logformat.FORMAT_VERSION:
        cap.errors.append(ReadError(os.path.join(path, logformat.MANIFEST_NAME), None, f"format version {version} is newer than this reader's {logformat.FORMAT_VERSION}; reading what is understood"))
    ranks = m.get("ranks")
    if isinstance(ranks, dict):
        for key, info in ranks.items():
            try:
                r = int(key)
            except ValueError:
                continue
            if r not in cap._ranks and r not in cap.left_out:
                log = info.get("log") if isinstance(info, dict) else None
                cap.errors.append(ReadError(os.path.join(path, log or logformat.log_file_name(r)), None, f"rank {r}: log missing", r))


def _open_files(path: str, files: list[str], manifest: dict | None, source: str) -> Capture:
    base = path if os.path.isdir(path) else None  # logs of a directory must not lead out of it
    by_rank: dict[int, list[str]] = {}
    unranked: list[str] = []
    for f in files:
        r = logformat.rank_of_log_name(os.path.basename(f))
        if r is None:
            unranked.append(f)
        else:
            by_rank.setdefault(r, []).append(f)
    errors: list[ReadError] = []
    logs: dict[int, LogFile] = {}
    for r, fs in sorted(by_rank.items()):
        if len(fs) > 1:
            fs = sorted(fs, key=lambda p: os.path.getsize(p), reverse=True)
            for extra in fs[1:]:
                errors.append(ReadError(extra, None, f"another log for rank {r}; reading the largest, {os.path.basename(fs[0])}", r))
        logs[r] = LogFile(fs[0], rank=r, base=base)
    for f in unranked:
        log = LogFile(f, base=base)
        r = next((rec.rank for rec in log.records if rec.rank is not None), None)
        if r is None:
            r = 0
        log.rank = r
        if r in logs:
            errors.append(ReadError(f, None, f"another log for rank {r}; ignored", r))
            log.close()
            continue
        logs[r] = log
    if not logs:
        raise CaptureUnreadable(f"{path}: no logs to read")
    kind = "torch_trace" if source == "torch" else "capture"
    if source == "auto":
        kind = "capture" if any(rec.kind == logformat.HEADER for lg in logs.values() for rec in lg.records[:50]) else "torch_trace"
        if kind == "capture" and not any(rec.kind.startswith("gti_") for lg in logs.values() for rec in lg.records):
            kind = "torch_trace"
    cap = Capture(path, kind)
    cap.errors.extend(errors)
    readable = 0
    for r, log in sorted(logs.items()):
        rd = _Rank(r)
        rd.log = log
        cap._ranks[r] = rd
        if log.records:
            readable += 1
        if kind == "capture":
            _index_capture_rank(cap, rd)
        else:
            _index_torch_rank(cap, rd)
    if readable == 0:
        msgs = "; ".join(str(e) for lg in logs.values() for e in lg.errors[:1])
        raise CaptureUnreadable(f"{path}: no readable records ({msgs})" if msgs else f"{path}: no readable records")
    if kind == "capture":
        leave_out_strays(cap)
    return cap


def _owner(rd: _Rank) -> int | None:
    """The rank a log's records say they belong to: its header's, else most of its records'."""
    h = rd.header
    if isinstance(h, dict) and type(h.get("rank")) is int:
        return h["rank"]
    counts: dict[int, int] = {}
    for rec in rd.log.records if rd.log is not None else ():
        if rec.rank is not None and rec.kind.startswith("gti_"):
            counts[rec.rank] = counts.get(rec.rank, 0) + 1
    if not counts:
        return None
    best = max(counts, key=lambda k: counts[k])
    return best if 2 * counts[best] > sum(counts.values()) else None


def leave_out_strays(cap: Capture) -> None:
    """Take out of the capture's ranks the logs that are not that rank's: an empty log (not a byte:
    nothing says a rank ran), and a log whose records say they are another
    rank's (a copy of rank 1's log saved as rank 5's). Compared as the rank of their name, a copy
    doubles a real rank's values and turns rank-derived findings into "equals no rank-derived
    value"; so they are reported (`left_out`, a read error, the incomplete-capture check) and
    kept out of every cross-rank comparison."""
    for r in sorted(cap._ranks):
        rd = cap._ranks[r]
        log = rd.log
        if log is None:
            continue
        if not log.records and [e.message for e in log.errors] == ["empty file"]:  # opened, and empty
            problem, why = "empty-log", f"empty log: not counted as rank {r}"
        else:
            owner = _owner(rd)
            if owner is None or owner == r:
                continue
            problem = "stray-log"
            why = f"its records say they are rank {owner}'s (a copy or a misnamed log?): left out, not compared as rank {r}"
        del cap._ranks[r]
        cap.left_out[r] = (log.path, problem, why)
        cap.errors.append(ReadError(log.path, None, why, r))


def _index_capture_rank(cap: Capture, rd: _Rank) -> None:
    log = rd.log
    assert log is not None
    n_other = 0
    headers: list[Record] = []
    for rec in log.records:
        kind = rec.kind
        if rec.rank is None and kind.startswith("gti_"):
            log.errors.append(ReadError(log.path, log.line_of(rec.offset), f"{kind} record without a rank", rd.rank))
        elif rec.rank is not None and rec.rank != rd.rank and kind.startswith("gti_"):
            log.errors.append(ReadError(log.path, log.line_of(rec.offset), f"{kind} record of rank {rec.rank} in the log of rank {rd.rank}", rd.rank))
        if kind in logformat.GRAPH_KINDS:
            gid = rec.meta.get("gid")
            if not isinstance(gid, str):
                log.errors.append(ReadError(log.path, log.line_of(rec.offset), f"{kind} record without a gid", rd.rank))
                continue
            ref = rd.graphs.get(gid)
            if ref is None:
                ref = rd.graphs[gid] = GraphRef(rd.rank, gid)
            if kind in ref.records:
                ref.alternates.setdefault(kind, []).append(rec)
                continue
            ref.records[kind] = rec
            if type(rec.meta.get("nodes")) is int:
                ref.nodes = rec.meta["nodes"]
        elif kind == logformat.PASS:
            rd.pass_recs.append(rec)
        elif kind == logformat.PASS_START:
            rd.start_recs.append(rec)
        elif kind == logformat.BLOB:
            rd.blob_recs.append(rec)
        elif kind == logformat.RANKS:
            rd.rank_recs.append(rec)
        elif kind == logformat.ERROR:
            rd.error_recs.append(rec)
        elif kind == logformat.END:
            rd.end_rec = rec
        elif kind == logformat.HEADER:
            headers.append(rec)
        else:
            n_other += 1
    for rec in headers:  # the first that reads (one per writer process; a damaged one is skipped)
        h = log.payload(rec)
        if isinstance(h, dict):
            rd.header_rec, rd.header = rec, h
            break
    if rd.header is not None and rd.header_rec is not None:
        v = rd.header.get("format_version")
        if isinstance(v, int) and v > logformat.FORMAT_VERSION:
            log.errors.append(ReadError(log.path, log.line_of(rd.header_rec.offset), f"format version {v} is newer than this reader's {logformat.FORMAT_VERSION}; reading what is understood", rd.rank))
    elif log.records and not headers:
        log.errors.append(ReadError(log.path, None, "no gti_header record", rd.rank))


def _index_torch_rank(cap: Capture, rd: _Rank) -> None:
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
        rd.torch_states.append((label, ref if ref.compile_id == rec.compile_id else GraphRef(rd.rank, gid, dict(ref.records), ref.nodes, label, rec.compile_id)))
