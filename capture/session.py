"""The capture of one process: which rank it is, what it has written, and how a pass is recorded.

A session exists only in a process started under `graphtrain-inspect capture` (or by `start()`).
Every instrumentation step is wrapped so that an error in it becomes a `gti_error` record and the
pass's own result goes back to the training untouched; an exception from the pass itself is
recorded and re-raised unchanged.
"""

from __future__ import annotations

import atexit
import collections
import getpass
import os
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from graphtrain_inspect.capture import lineage
from graphtrain_inspect.capture.deferred_graphs import Pending, resolve, resolved
from graphtrain_inspect.capture.lineage import Lineage
from graphtrain_inspect.capture.session_children import GraphInfo, SessionChildren
from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.capture.writer import RankLog

ENV_DIR = "GTI_CAPTURE_DIR"
ENV_PASSES = "GTI_CAPTURE_PASSES"  # newline-separated MODULE:QUALNAME targets
ENV_INDUCTOR = "GTI_CAPTURE_INDUCTOR"  # "1" to hook Inductor's passes
ENV_BLOBS = "GTI_CAPTURE_BLOBS"  # "1" to write GraphPickler blobs
ENV_RUN_ID = "GTI_CAPTURE_RUN_ID"  # the launcher's id of this run, in every header and the manifest

_CURRENT: "Session | None" = None


def current() -> "Session | None":
    """The capture of this process, or None (none started, or its log stopped: a failing disk
    ends the capture's work too, so the passes run as they would without it)."""
    s = _CURRENT
    return s if s is not None and s.log.stopped is None else None


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


@dataclass
class Frame:
    """A pass in progress; `child_capture_s` is capture time spent in passes nested inside it."""

    seq: int
    name: str
    before: str | Pending | None
    t0: float
    origin: str = "traced"  # lineage.TRACED / FROM_PASS / LOADED: where the received graph came from
    input_from: int | None = None  # the seq of the pass that returned the received graph object
    module: str | None = None  # the module path the received graph's nodes share (a pipeline's start)
    errors: int = 0
    child_capture_s: float = 0.0
    recorded: bool = False  # its gti_pass record is written: later errors cannot be counted in it


@dataclass
class Session(SessionChildren):
    directory: str
    blobs: bool = True
    sources: tuple[str, ...] = ("named", "inductor", "api")
    rank: int = field(default_factory=lambda: _env_int("RANK", 0))
    local_rank: int = field(default_factory=lambda: _env_int("LOCAL_RANK", 0))
    world_size: int = field(default_factory=lambda: _env_int("WORLD_SIZE", 1))

    def __post_init__(self) -> None:
        self.log = RankLog(self.directory, self.rank)
        self.lock = threading.RLock()
        self.seq = 0
        self.pipeline = -1
        self.graphs: dict[str, GraphInfo] = {}  # gid -> what is written for it on this rank
        self.produced: set[str] = set()  # gids some captured pass returned
        self.lineage = Lineage()  # which pass returned each live graph object; loaded graphs
        self.passes = 0
        self.capture_errors = 0
        self.stack: list[Frame] = []
        self.header_written = False
        self.rank_table_key: Any = None
        self.rank_table: dict[str, Any] | None = None  # the last written: node tables' digests name its groups
        self.ended = False
        self.table_cache: Any = None
        self.children: Any = None  # blob_children.Children, made at the first forked blob
        self.blob_wait_s = 0.0  # time the end of the capture waited for blob children
        self.blob_limit_wait_s = 0.0  # time passes waited for a child to finish (GTI_CAPTURE_BLOB_CHILDREN at once)
        # records written while a child makes a graph's records (deferred_graphs): Pending graphs
        # and writes to make, in log order; emptied by _flush as the children finish
        self.queue: collections.deque[Any] = collections.deque()
        self._flushing = False  # _flush is writing: writes go to the log, not the queue
        self._flusher: threading.Thread | None = None
        self._wake = threading.Event()

    # -- records -------------------------------------------------------------------------------

    def _write(self, kind: str, payload: Any, meta: dict | None = None, compile_id: dict | None = None) -> None:
        self._ensure_header()
        if compile_id is None:
            compile_id = _compile_id_fields()  # inside torch.compile: filed under that compile
        # behind a graph a child is still recording: written in turn, its graph ids then known
        self._emit(lambda: self.log.write(kind, resolved(payload), meta=resolved(meta), compile_id=compile_id))

    def _ensure_header(self) -> None:
        if not self.header_written:
            self.header_written = True
            self.log.write(logformat.HEADER, self._header())

    def _emit(self, write: Callable[[], Any]) -> None:
        """Run `write` (it writes records) now, or in turn when records wait in the queue."""
        if self.queue and not self._flushing:
            self.queue.append(write)
        else:
            write()

    def _header(self) -> dict[str, Any]:
        try:
            user = getpass.getuser()
        except Exception:  # noqa: BLE001 - no passwd entry in some containers
            user = str(os.getuid())
        torch_mod = sys.modules.get("torch")
        return {
            "format": logformat.FORMAT_NAME,
            "format_version": logformat.FORMAT_VERSION,
            "rank": self.rank,
            "local_rank": self.local_rank,
            "world_size": self.world_size,
            "group_rank": _env_int("GROUP_RANK", 0),
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "user": user,
            "uid": os.getuid(),
            "argv": list(sys.argv),
            "torch_version": getattr(torch_mod, "__version__", None),
            "python": sys.version.split()[0],
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "run_id": os.environ.get(ENV_RUN_ID),
            "time": time.time(),
            "sources": list(self.sources),
            "blobs": self.blobs,
            **_simulated(),
        }

    def recorded(self, where: str, frame: Frame | None = None) -> Recorded:
        """`with sess.recorded("what"):` an instrumentation step under the capture's policy: an
        error in it is recorded (a `gti_error` record, counted) and swallowed."""
        return Recorded(self, where, frame)

    def error(self, where: str, exc: BaseException, frame: Frame | None = None) -> None:
        """An instrumentation failure: recorded, counted, and otherwise ignored."""
        self._error_record(
            where,
            type(exc).__name__,
            str(exc),
            "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
            frame,
        )

    def _error_record(self, where: str, type_name: str, message: str, tb: str, frame: Frame | None) -> None:
        self.capture_errors += 1
        late = False
        if frame is not None:
            # A blob child's failure may arrive after its pass's record was written: the record's
            # capture_errors cannot count it, so the error says so (`late`) and readers add it.
            if frame.recorded:
                late = True
            else:
                frame.errors += 1
        try:
            self._write(
                logformat.ERROR,
                {
                    "where": where,
                    "seq": frame.seq if frame else None,
                    "pass": frame.name if frame else None,
                    "type": type_name,
                    "message": message[:2000],
                    "traceback": tb[-8000:],
                    **({"late": True} if late else {}),
                },
            )
        except Exception:  # noqa: BLE001 - the error path itself must never raise
            pass

    # -- graphs ----------------------------------------------------------------------------------

    def snapshot(self, gm: Any, frame: Frame | None, role: str) -> str | Pending | None:
        """Write the graph's records once per distinct content; return its gid (None on failure),
        or the Pending standing for it while a forked child makes them (deferred_graphs)."""

        from graphtrain_inspect.capture import graph_tables

        if self.table_cache is None:
            self.table_cache = graph_tables.TableCache()
        cache = self.table_cache
        fingerprint = None
        with self.recorded(f"graph fingerprint ({role})", frame):
            fingerprint = cache.fingerprint_of(gm)
        if fingerprint is not None:
            known = cache.lookup(fingerprint)
            if known is not None:
                return known  # the same graph as the last snapshot, node for node
            pending = self._defer(gm, frame, role, fingerprint.nodes)
            if pending is not None:
                cache.remember(fingerprint, pending, table_made_here=False)
                return pending
        gid, tables_ok, new, shape_env = self._graph_records(gm, frame, role)
        if gid is None:
            return None
        if fingerprint is not None and tables_ok:
            cache.remember(fingerprint, gid)
        if new:
            with self.recorded(f"blob ({role})", frame):
                self.blob(gid, gm, frame, role, shape_env)
        return gid

    def _graph_records(self, gm: Any, frame: Frame | None, role: str) -> tuple[str | None, bool, bool, Any]:
        """Write a graph's records (code, node table, row digests, symbol rows and map, device
        table) unless its gid was written before: (gid or None, whether its table was made,
        whether it is new, its shape env)."""
        from graphtrain_inspect.capture import graph_tables
        from graphtrain_inspect.capture.shared import rank_tokens, row_digests, symbol_rows

        cache = self.table_cache
        with self.recorded(f"graph code ({role})", frame) as step:
            code = graph_tables.readable_code(gm)
        if step.failed:
            return None, False, False, None
        tables = None
        tables_json = b""
        with self.recorded(f"node table ({role})", frame) as step:
            tables = cache.node_tables(gm)
            tables_json = logformat.encode_node_table(tables)
        if step.failed:
            tables = None
        gid = logformat.graph_id(code, tables_json)
        if gid in self.graphs:
            return gid, tables is not None, False, None
        info = GraphInfo(nodes=graph_tables.count_nodes(tables) if tables is not None else 0)
        self.graphs[gid] = info
        meta = {"gid": gid, "nodes": info.nodes}
        self._write(logformat.GRAPH_CODE, code, meta)
        shape_env = None
        if tables is not None:
            # The table is already JSON: splice the gid in rather than encode it twice.
            payload = logformat.node_table_payload(gid, tables_json)
            nodes_meta: dict[str, Any] = meta
            rewrites = None  # what the normalized hash was made with: the row digests' too
            with self.recorded(f"node table digest ({role})", frame):
                norm = rank_tokens.table_norm(payload, self.rank_table, graph_tables.own_device())
                if norm is not None:
                    nodes_meta = {**meta, rank_tokens.NORM: norm}
                    rewrites = rank_tokens.recorded_rewrites(norm)
            self._write(logformat.NODES, payload, nodes_meta)
            subs = None  # the table's rows as lines, split once for the digests and the symbol rows
            with self.recorded(f"row digests ({role})", frame):
                lines = payload.split(b"\n")
                subs = logformat.node_table_rows(lines, payload)
                digests = row_digests.row_digests_payload(gid, lines, subs, graphs=tables["graphs"], rewrites=rewrites)
                if digests is not None:
                    self._write(logformat.ROW_DIGESTS, digests, {"gid": gid, "hash": row_digests.HASH})
            kept = None  # the symbol rows, for their scope events after the symbol map
            with self.recorded(f"symbol rows ({role})", frame):
                kept = symbol_rows.kept_graphs(payload, tables, subs)
                if kept is not None:
                    rows = symbol_rows.kept_payload(gid, kept)
                    self._write(logformat.SYMBOL_ROWS, rows, {"gid": gid, "rule": symbol_rows.RULE})
            symmap = None
            with self.recorded(f"symbol map ({role})", frame):
                shape_env = graph_tables.find_shape_env(gm)
                symmap = graph_tables.symbol_map(gm, tables, shape_env)
                # the uses counted in the envelope: what check's summary line counts, not decoded
                uses = sum(e["uses"] for e in symmap["symbols"].values())
                self._write(logformat.SYMBOLS, {"gid": gid, **symmap}, {"gid": gid, "uses": uses})
            if kept is not None and symmap is not None:
                with self.recorded(f"symbol scopes ({role})", frame):
                    scopes = symbol_rows.scopes_payload(gid, kept, symmap)
                    self._write(logformat.SYMBOL_SCOPES, scopes, {"gid": gid, "rule": symbol_rows.RULE})
        with self.recorded(f"device table ({role})", frame):
            self._write(logformat.DEVICES, {"gid": gid, **graph_tables.device_table(gm)}, {"gid": gid})
        return gid, tables is not None, True, shape_env

    def _maybe_rank_table(self) -> None:
        from graphtrain_inspect.capture import rank_table

        with self.recorded("rank table"):
            key = rank_table.change_key()
            if key != self.rank_table_key:
                self.rank_table_key = key
                self.rank_table = rank_table.rank_table(self.rank, self.world_size)
                self._write(logformat.RANKS, self.rank_table)

    # -- passes ----------------------------------------------------------------------------------

    def begin(self, name: str, gm: Any) -> Frame:
        """Record the graph a pass receives. Runs with every dispatch mode popped (see QuietModes)."""
        t_start = time.perf_counter()
        with self.lock:
            frame = Frame(seq=self.seq, name=name, before=None, t0=0.0)
            self.seq += 1
            self._poll_children()
            with QuietModes():
                self._maybe_rank_table()
                with self.recorded("graph lineage", frame):
                    frame.origin, frame.input_from = self.lineage.origin(gm)
                    if frame.origin != lineage.FROM_PASS:
                        frame.module = lineage.module_path(gm)
                frame.before = self.snapshot(gm, frame, "before")
                self._write(
                    logformat.PASS_START,
                    {"seq": frame.seq, "name": name, "before": frame.before, "time": time.time()},
                    {"seq": frame.seq},
                )
            self.stack.append(frame)
            frame.t0 = time.perf_counter()
            if len(self.stack) > 1:
                self.stack[-2].child_capture_s += frame.t0 - t_start
        return frame

    def end(
        self,
        frame: Frame,
        *,
        qualname: str | None,
        source: str,
        outputs: dict[str, Any],
        exc: BaseException | None = None,
        subsystem: str | None = None,
        t_wall: float | None = None,
        target: str | None = None,
    ) -> None:
        """Record how a pass ended: its output graphs by role, or the exception it raised."""
        wall = (time.perf_counter() - frame.t0) if t_wall is None else t_wall
        wall -= frame.child_capture_s
        t_start = time.perf_counter()
        with self.lock:
            self._poll_children()
            if self.stack and self.stack[-1] is frame:
                self.stack.pop()
            with QuietModes():
                outs: dict[str, str | Pending] = {}
                for role, g in outputs.items():
                    gid = self.snapshot(g, frame, role)
                    if gid is not None:
                        outs[role] = gid
                    with self.recorded("graph lineage", frame):
                        self.lineage.produced(g, frame.seq)
                if source != "inductor" and exc is None:
                    _note_produced(outputs.values(), frame.name)
                self.passes += 1
                # what is known now; the rest once every graph of the pass has its id (_emit)
                fields = {
                    "seq": frame.seq,
                    "name": frame.name,
                    "qualname": qualname,
                    "source": source,
                    "target": target,
                    "subsystem": subsystem,
                    "parent": self.stack[-1].seq if self.stack else None,
                    "rank": self.rank,
                    "local_rank": self.local_rank,
                    "world_size": self.world_size,
                    "compile_id": compile_id_str(),
                }
                cid = _compile_id_fields()
                t_end = time.time()
                exc_rec = _exc_record(exc) if exc is not None else None
                self._emit(lambda: self._pass_record(frame, fields, outs, wall, t_end, exc_rec, cid))
            if self.stack:
                self.stack[-1].child_capture_s += time.perf_counter() - t_start + frame.child_capture_s

    def _pass_record(
        self,
        frame: Frame,
        fields: dict[str, Any],
        outs: dict[str, str | Pending],
        wall: float,
        t_end: float,
        exc_rec: dict[str, str] | None,
        cid: dict[str, int] | None,
    ) -> None:
        """Write a pass's gti_pass record, its graphs' ids known."""
        before = resolve(frame.before)
        after = {r: g for r, g in ((r, resolve(g)) for r, g in outs.items()) if g is not None}
        # Decided before this pass's outputs count as produced: a pass that returns the traced
        # graph unchanged still starts its pipeline.
        traced = before is not None and before not in self.produced
        self.produced.update(after.values())
        if traced:
            self.pipeline += 1
        gids = [before, *after.values()]
        record = {
            **fields,
            "pipeline": max(self.pipeline, 0),
            "traced": traced,
            "time": t_end - wall,
            "wall_s": wall,
            "status": "raised" if exc_rec is not None else "ok",
            "exception": exc_rec,
            "before": before,
            "input": frame.origin,
            "input_from": frame.input_from,
            "module": frame.module,
            "after": after,
            "nodes": {
                "before": self.graphs[before].nodes if before in self.graphs else None,
                "after": {r: self.graphs[g].nodes for r, g in after.items()},
            },
            "blobs": {g: self.graphs[g].blob for g in gids if g in self.graphs and self.graphs[g].blob},
            "capture_errors": frame.errors,
        }
        frame.recorded = True
        self._write(logformat.PASS, record, {"seq": frame.seq, "status": record["status"]}, cid)

    def run_pass(
        self,
        name: str,
        qualname: str | None,
        source: str,
        gm: Any,
        call: Callable[[], Any],
        outputs_of: Callable[[Any], dict[str, Any]],
        subsystem: str | None = None,
        target: str | None = None,
    ) -> Any:
        """Run `call()` (the pass) with its input and outputs recorded; return its result unchanged."""
        with self.recorded("pass start") as step:
            frame = self.begin(name, gm)
        if step.failed:
            return call()
        from graphtrain_inspect.capture import pass_sites  # torch is loaded: a pass is running

        try:
            with pass_sites.noting():  # the line of the pass that makes each new node
                result = call()
        except BaseException as exc:
            wall = time.perf_counter() - frame.t0
            with self.recorded("pass end", frame):
                self.end(
                    frame,
                    qualname=qualname,
                    source=source,
                    outputs={},
                    exc=exc,
                    subsystem=subsystem,
                    t_wall=wall,
                    target=target,
                )
            raise
        wall = time.perf_counter() - frame.t0
        outputs: dict[str, Any] = {}
        with self.recorded("pass outputs", frame):
            outputs = outputs_of(result)
        with self.recorded("pass end", frame):
            self.end(
                frame,
                qualname=qualname,
                source=source,
                outputs=outputs,
                subsystem=subsystem,
                t_wall=wall,
                target=target,
            )
        return result

    # -- lifetime --------------------------------------------------------------------------------

    def finish(self) -> None:
        if self.ended:
            return
        self.ended = True
        self._wake.set()  # the flush thread sees `ended` and leaves
        # (a thread stuck in a pass holds the lock: its children are left to their SIGALRM)
        if self.lock.acquire(timeout=30):
            try:
                self._finish_children()
                self._flush_all()
            finally:
                self.lock.release()
        if self.header_written and self.log.stopped is None:
            self.log.write(
                logformat.END,
                {
                    "records": self.log.records + 1,
                    "bytes": self.log.bytes,
                    "passes": self.passes,
                    "graphs": len(self.graphs),
                    "blobs": sum(1 for g in self.graphs.values() if g.blob),
                    "capture_errors": self.capture_errors,
                    **self._children_totals(),
                    "time": time.time(),
                    **_stopped_after_passes(),
                },
            )
        self.log.end()


class QuietModes:
    """Pop every active dispatch mode (fake, proxy, functional) while the capture looks at a graph,
    and hold the cyclic garbage collector.

    A pass may run under make_fx tracing or a FakeTensorMode; anything the capture computes must
    not be traced into the user's graph or touch its modes. A snapshot allocates a row per node;
    in a process holding tens of millions of objects (a 50k-node graph and its fake tensors),
    every collection those allocations trigger walks them all, which made snapshots grow faster
    than the graph. Collection resumes (and catches up) as soon as the snapshot is done.
    """

    def __enter__(self) -> None:
        import gc

        import torch
        from torch.utils._python_dispatch import _disable_current_modes

        self._gc = gc.isenabled()
        gc.disable()
        self._modes = _disable_current_modes()
        self._modes.__enter__()
        self._grad = torch.no_grad()
        self._grad.__enter__()

    def __exit__(self, *exc: Any) -> None:
        import gc

        self._grad.__exit__(*exc)
        self._modes.__exit__(*exc)
        if self._gc:
            gc.enable()


def _simulated() -> dict[str, Any]:
    """`simulated` in the header of a rank run by `capture --simulate-world` (fake process group)."""
    fw = sys.modules.get("graphtrain_inspect.capture.fake_world")
    if fw is None or not fw.active():
        return {}
    return {"simulated": fw.describe()}


def _note_produced(graphs: Any, pass_name: str) -> None:
    """For `--stop-after-passes`: the graphs a named pass returned, whose first call ends the rank."""
    fw = sys.modules.get("graphtrain_inspect.capture.fake_world")
    if fw is not None and fw.active() and fw.stop_on():
        for g in graphs:
            fw.note_produced(g, pass_name)


def _stopped_after_passes() -> dict[str, Any]:
    """`stopped_after_passes` in the end record of a simulated rank ended after its passes."""
    fw = sys.modules.get("graphtrain_inspect.capture.fake_world")
    return {"stopped_after_passes": dict(fw.STOPPED)} if fw is not None and fw.STOPPED else {}


def _exc_record(exc: BaseException) -> dict[str, str]:
    return {
        "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "message": str(exc)[:4000],
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-8000:],
    }


def _trace_id() -> Any:
    guards = sys.modules.get("torch._guards")
    ctx = getattr(guards, "CompileContext", None)
    getter = getattr(ctx, "current_trace_id", None)
    try:
        return getter() if getter else None
    except Exception:  # noqa: BLE001
        return None


def _compile_id_fields() -> dict[str, int] | None:
    tid = _trace_id()
    if tid is None:
        return None
    cid = tid.compile_id
    return {
        "compiled_autograd_id": getattr(cid, "compiled_autograd_id", None),
        "frame_id": getattr(cid, "frame_id", None),
        "frame_compile_id": getattr(cid, "frame_compile_id", None),
        "attempt": tid.attempt,
    }


class Recorded:
    """The capture's error policy, in one place: an exception (not a KeyboardInterrupt or a
    SystemExit) raised in the `with` body is recorded in the session (when there is one) and
    swallowed, so the training goes on with its own results; `failed` says whether it happened."""

    __slots__ = ("sess", "where", "frame", "failed")

    def __init__(self, sess: Session | None, where: str, frame: Frame | None = None) -> None:
        self.sess, self.where, self.frame, self.failed = sess, where, frame, False

    def __enter__(self) -> Recorded:
        return self

    def __exit__(self, typ: Any, exc: BaseException | None, tb: Any) -> bool:
        if not isinstance(exc, Exception):
            return False
        self.failed = True
        if self.sess is not None:
            self.sess.error(self.where, exc, self.frame)
        return True


def recorded(where: str) -> Recorded:
    """`with session.recorded("what"):` for code outside a Session method: recorded in the
    current session, or swallowed silently where there is none."""
    return Recorded(current(), where)


def compile_id_str() -> str | None:
    fields = _compile_id_fields()
    return logformat.compile_id_of(fields) if fields else None


# ---------------------------------------------------------------------------------------------


def start(directory: str, *, blobs: bool = True, sources: tuple[str, ...] = ("named", "inductor", "api")) -> Session:
    """Begin capturing in this process (the launcher's bootstrap calls this in every worker)."""
    global _CURRENT
    if _CURRENT is not None:
        return _CURRENT
    os.makedirs(directory, exist_ok=True)
    _CURRENT = Session(directory=directory, blobs=blobs, sources=sources)
    atexit.register(stop)
    with _CURRENT.recorded("graph load hook"):
        lineage.install(current)
    return _CURRENT


def stop() -> None:
    global _CURRENT
    failure = sys.modules.get("graphtrain_inspect.capture.failure")
    if failure is not None and _CURRENT is not None:
        failure.note_unhandled()  # an unhandled exception another excepthook saw instead of ours
    sess, _CURRENT = _CURRENT, None
    if sess is not None:
        try:
            sess.finish()
        except Exception:  # noqa: BLE001
            pass
