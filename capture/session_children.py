"""The session's children: blobs, and large graphs' records, made by forked children while the
training goes on (`blob_children`, `deferred_graphs`), and the queue that writes what the rank
records meanwhile in log order once a child's records are there.

A mixin of `session.Session`: its methods share the session's state (the log, the lock, the
graphs written) and run under its lock, as the rest of the session does.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from graphtrain_inspect.capture import deferred_graphs
from graphtrain_inspect.capture.deferred_graphs import Pending
from graphtrain_inspect.capture.shared import logformat

if TYPE_CHECKING:
    import collections

    from graphtrain_inspect.capture.session import Frame, Recorded

FLUSH_POLL_S = 0.05  # how often the flush thread looks for a child's records while some wait
LIMIT_WAIT_S = 60.0  # the most a pass waits for a blob child to finish before making its blob itself


def _wait_s() -> float:
    from graphtrain_inspect.capture.blob_children import ENV_WAIT

    try:
        return float(os.environ.get(ENV_WAIT, 300.0))
    except ValueError:
        return 300.0


@dataclass
class GraphInfo:
    """What is written for a graph on this rank."""

    nodes: int
    blob: dict | None = None
    blob_state: str = ""  # "" none tried, "pending" (a child is making it), "done", "failed"


class SessionChildren:
    """Session's methods for its children (the session's state: `session.Session`)."""

    # the session's state and methods these use, declared for the type checker
    directory: str
    blobs: bool
    rank: int
    log: Any  # a RankLog; in a child recording a graph, a deferred_graphs.BufferLog
    lock: Any
    graphs: dict[str, GraphInfo]
    capture_errors: int
    children: Any
    queue: collections.deque[Any]
    _flushing: bool
    _flusher: threading.Thread | None
    _wake: threading.Event
    ended: bool
    blob_limit_wait_s: float
    blob_wait_s: float

    if TYPE_CHECKING:

        def recorded(self, where: str, frame: Frame | None = None) -> Recorded: ...
        def _write(self, kind: str, payload: Any, meta: dict | None = None, compile_id: dict | None = None) -> None: ...
        def _ensure_header(self) -> None: ...
        def _emit(self, write: Callable[[], Any]) -> None: ...
        def _error_record(self, where: str, type_name: str, message: str, tb: str, frame: Frame | None) -> None: ...
        def _graph_records(self, gm: Any, frame: Frame | None, role: str) -> tuple[str | None, bool, bool, Any]: ...

    # -- graphs recorded by a child (deferred_graphs) ----------------------------------------------

    def _defer(self, gm: Any, frame: Frame | None, role: str, nodes: int) -> Pending | None:
        """Fork a child to write a large graph's records (and its blob); None where the graph is
        to be recorded here (small, no fork possible, or the fork failed)."""
        limit = deferred_graphs.min_nodes()
        if limit <= 0 or nodes < limit or self.log.stopped is not None or not deferred_graphs.worth_a_child(self.blobs):
            return None
        from graphtrain_inspect.capture import blob_children, blobs, graph_tables

        where = f"graph records ({role})"
        unsafe: str | None = "?"
        with self.recorded(where, frame):
            unsafe = blob_children.fork_unsafe(gm)
        if unsafe is not None:
            return None
        with self.recorded(f"{where}: no child process, made in the training process", frame):
            self._ensure_header()  # the child's records come after it, never with one of their own
            if self.blobs:
                blobs.pickler()  # torch's pickler imported here once, not again in every child
            self._room_for_child()
            if len(self.children.running) >= self.children.limit:
                return None  # none finished in time (one hangs?): recorded here, as a blob would be
            pending = deferred_graphs.new_pending(self.directory, self.rank, frame, role, self.blobs)
            own = graph_tables.own_device()  # asked here: a forked child cannot ask CUDA
            self.children.start(pending, where, frame, lambda: self._child_records(pending, gm, frame, role, own))
            self.queue.append(pending)
            self._start_flusher()
            return pending
        return None

    def _room_for_child(self) -> None:
        """The children made, and one slot free for a new one where the children started earlier
        finish within LIMIT_WAIT_S: waiting for one costs less than the work here. Bounded: past
        it (a child that hangs), the caller starts one more."""
        from graphtrain_inspect.capture import blob_children

        if self.children is None:
            self.children = blob_children.Children()
        if len(self.children.running) >= self.children.limit:
            t0 = time.perf_counter()
            self._collect(self.children.wait(min(_wait_s(), LIMIT_WAIT_S), one=True))
            self.blob_limit_wait_s += time.perf_counter() - t0

    def _child_records(  # pragma: no cover - runs in a child
        self, pending: Pending, gm: Any, frame: Frame | None, role: str, own_device: str
    ) -> dict[str, Any]:
        """In the child: the graph's records as the training process would write them, to the
        pending file; then its blob. Returns the child's message."""
        from graphtrain_inspect.capture import blob_children, graph_tables

        try:
            graph_tables.pin_own_device(own_device)
            buf = deferred_graphs.BufferLog(self.log)
            self.log = buf  # writes the same records, kept
            self.queue.clear()  # the parent's; here every write goes to the buffer at once
            self._flushing = True
            errors0, frame_errors0 = self.capture_errors, (frame.errors if frame is not None else 0)
            gid, _, new, shape_env = self._graph_records(gm, frame, role)
            header = {
                "gid": gid,
                "new": new,
                "nodes": self.graphs[gid].nodes if gid is not None and new else 0,
                "errors": self.capture_errors - errors0,
                "frame_errors": (frame.errors if frame is not None else 0) - frame_errors0,
            }
            deferred_graphs.write_file(pending.path, header, buf)
            if pending.blob and gid is not None and new:
                return blob_children.child_dump(self.directory, gm, shape_env)
            return {"records": True}
        except BaseException as e:  # noqa: BLE001 - the child answers whatever happens
            return blob_children.error_message(e)

    def _land(self, p: Pending) -> bool:
        """Write a child's records where its graph's records belong (the queue's head): False
        while the child is still making them."""
        got = None
        with self.recorded(p.where, p.frame) as step:
            got = deferred_graphs.read_file(p.path)
        if got is None and not step.failed:
            if p.failed is None:
                wait = deferred_graphs.wait_s()
                if time.monotonic() - p.t0 < wait:
                    return False
                why = f"no records after {wait:g} s ({deferred_graphs.ENV_WAIT})"
                if self.children is not None:
                    self.children.kill_for(p, why)  # a file it wrote now would name a graph nobody waits for
                if deferred_graphs.read_file(p.path) is None:
                    p.failed, p.failed_type = f"graph records child killed: {why}", "GraphChildTimeout"
                else:
                    return self._land(p)  # written just before the kill
            self._error_record(p.where, p.failed_type, p.failed, p.detail, p.frame)
        elif got is not None:
            header, data = got
            gid = header.get("gid")
            p.gid = gid if isinstance(gid, str) else None
            if p.gid is not None and header.get("new") is True and p.gid not in self.graphs:
                nodes = header.get("nodes")
                self.graphs[p.gid] = GraphInfo(nodes=nodes if isinstance(nodes, int) else 0)
                if self.log.write_encoded(data, int(header.get("records") or 0)):
                    p.landed = True
                    self.graphs[p.gid].blob_state = "pending" if p.blob else ""
                    self.capture_errors += int(header.get("errors") or 0)
                    if p.frame is not None and not p.frame.recorded:
                        p.frame.errors += int(header.get("frame_errors") or 0)
        p.done = True
        deferred_graphs.remove(p.path)
        return True

    def _flush(self) -> None:
        """Write the queue's head while it is ready: writes, and the graphs whose child is done."""
        if self._flushing:
            return
        self._flushing = True
        try:
            while self.queue:
                item = self.queue[0]
                ready = True
                with self.recorded("deferred records") as step:
                    if isinstance(item, Pending):
                        ready = self._land(item)
                    else:
                        item()
                if not ready:
                    return
                if step.failed and isinstance(item, Pending):
                    item.done = True  # its graph goes unnamed; what waits behind it is written
                self.queue.popleft()
        finally:
            self._flushing = False

    def _start_flusher(self) -> None:
        self._wake.set()
        if self._flusher is None:
            t = threading.Thread(target=self._flush_loop, name="graphtrain-inspect records", daemon=True)
            self._flusher = t
            t.start()

    def _flush_loop(self) -> None:
        """The records a child made, written as it finishes (not at the next pass: a training that
        runs no pass for hours, or dies, would keep them from the log)."""
        try:
            while not self.ended:
                if not self.queue:
                    self._wake.wait()
                    self._wake.clear()
                    continue
                time.sleep(FLUSH_POLL_S)
                if self.lock.acquire(blocking=False):  # a pass holds it: try again later
                    try:
                        if not self.ended:
                            self._poll_children()
                    finally:
                        self.lock.release()
        except Exception:  # noqa: BLE001 - the training never sees the capture's errors
            pass

    # -- blobs -----------------------------------------------------------------------------------

    def blob(self, gid: str, gm: Any, frame: Frame | None, role: str, shape_env: Any) -> None:
        """The blob of a graph seen for the first time, as it is now: made by a forked child that
        pickles its copy-on-write snapshot while the training goes on (blob_children), or here
        where a child cannot make it. Replay loads a pass's input graph, and its REPL the output."""
        info = self.graphs.get(gid)
        if not self.blobs or info is None or info.blob_state or self.log.stopped is not None:
            return
        from graphtrain_inspect.capture import blob_children, blobs

        where = f"blob ({role})"
        with self.recorded(where, frame) as step:
            unsafe = blob_children.fork_unsafe(gm)
        if step.failed:
            info.blob_state = "failed"
            return
        if unsafe is None:
            with self.recorded(f"{where}: no child process, made in the training process", frame):
                blobs.pickler()  # torch's pickler imported here once, not again in every child
                self._room_for_child()
                if len(self.children.running) < self.children.limit:
                    self.children.start(gid, where, frame, blob_children.blob_job(self.directory, gm, shape_env))
                    info.blob_state = "pending"
                    return
        with self.recorded(where, frame) as step:
            info.blob = blobs.dump(self.directory, gm, shape_env)
            info.blob_state = "done"
        if step.failed:
            info.blob_state = "failed"

    def _poll_children(self) -> None:
        if self.children is not None and self.children.running:
            with self.recorded("blob children"):
                self._collect(self.children.poll())
        if self.queue:
            self._flush()

    def _collect(self, results: list[Any]) -> None:
        """Record finished children: a `gti_blob` record each, or the capture error. A child that
        made a graph's records and failed before its file was written fails its Pending (_land
        says why); its blob is recorded once the graph's records are written."""
        for res in results:
            key = res.child.gid
            if isinstance(key, Pending):
                if res.error is not None and not key.done and not os.path.exists(key.path):
                    key.failed, key.failed_type, key.detail = res.error, res.error_type, res.detail
                    continue
                self._emit(self._landed_blob(res, key))
            else:
                self._blob_result(res, key)

    def _landed_blob(self, res: Any, p: Pending) -> Callable[[], None]:
        """The blob record of a child's graph, to write once its records are written."""
        return lambda: self._blob_result(res, p.gid if p.landed else None, f"blob ({p.role})")

    def _blob_result(self, res: Any, gid: str | None, where: str | None = None) -> None:
        child = res.child
        if gid is None or (res.ref is None and res.error is None):
            return  # a graph recorded elsewhere, or a child asked for no blob
        info = self.graphs.get(gid)
        if res.ref is not None:
            if info is not None:
                info.blob, info.blob_state = res.ref, "done"
            self._write(
                logformat.BLOB,
                {
                    "gid": gid,
                    **res.ref,
                    "seq": child.frame.seq if child.frame is not None else None,
                    "pass": child.frame.name if child.frame is not None else None,
                    "cpu_s": round(res.cpu_s, 6),
                    "wall_s": round(res.wall_s, 6),
                },
                {"gid": gid},
            )
        else:
            if info is not None:
                info.blob_state = "failed"
            self._error_record(
                where or child.where, res.error_type, res.error or "blob child failed", res.detail, child.frame
            )

    def _flush_all(self) -> None:
        """Every record the queue holds, written: the children are done (or killed), so a graph
        whose file is still missing will not get one."""
        with self.recorded("deferred records"):
            self._flush()
            for item in self.queue:
                if isinstance(item, Pending) and item.failed is None:
                    item.failed = "the child that made the graph's records ended without them"
            self._flush()
        if self.children is not None:
            deferred_graphs.remove_dir(self.directory)  # other ranks' processes may still use it

    def _finish_children(self) -> None:
        """Wait for the blob children (at most GTI_CAPTURE_BLOB_WAIT_S in all), kill the rest,
        reap every one and record what they made."""
        if self.children is None or not self.children.running:
            return
        t0 = time.perf_counter()
        with self.recorded("blob children") as step:
            if self.log.stopped is not None:  # nothing can record their blobs any more
                self._collect(self.children.kill_all("the capture stopped writing"))
            else:
                self._collect(self.children.wait(_wait_s()))
        if step.failed:
            try:
                self.children.kill_all("the capture's wait for them failed")
            except Exception:  # noqa: BLE001
                pass
        self.blob_wait_s = time.perf_counter() - t0

    def _children_totals(self) -> dict[str, Any]:
        c = self.children
        if c is None:
            return {}
        return {
            "blob_children": {
                "forked": c.forked,
                "failed": c.failed,
                "killed": c.killed,
                "cpu_s": round(c.cpu_s, 6),
                "waited_s": round(self.blob_limit_wait_s, 6),
                "waited_at_end_s": round(self.blob_wait_s, 6),
            }
        }
