"""A large graph's records made by a forked child, so the training process goes on at once.

Recording a new graph costs the training process its readable code (torch's code generation) and
its node table: 0.14-0.18 s for graph_trainer's 2,334-node graphs, more than its passes cost. A
graph's id is the hash of those two texts, so it is known only once they are made. For a graph of
at least `GTI_CAPTURE_DEFER_NODES` nodes (default 1,000) the session forks a child
(`blob_children`, the same children as the blobs): the child has a copy-on-write snapshot of the
graph as it is at that moment, makes the records exactly as the training process would
(`Session._graph_records`, its writes going to a buffer), writes them to
`<capture>/.pending/<rank>.<pid>.<n>` (a header line, then the encoded records; write then rename),
then makes the blob (blobs mode), and leaves. The pass goes on with a `Pending` in place of the
graph id.

The log stays what it was: every record that the session writes while a `Pending` is unresolved
waits in the session's queue, in order; when the child's file is there, its records are
appended where the graph's records would have been, the `Pending` takes the graph id, and the
records behind it (the pass's, naming the graph) are written with the id. A background thread
empties the queue as children finish, so records do not wait for the next pass; the end of the
capture waits for the children (`GTI_CAPTURE_BLOB_WAIT_S` in all) and writes what is left. A child
that fails, or has written no records `GTI_CAPTURE_DEFER_WAIT_S` (120) seconds after its fork (then
it is killed), leaves its graph unrecorded (the pass names none, as when a snapshot fails in the
process) and a capture error says why.

Graphs a child cannot make (no fork, real accelerator tensors: `blob_children.fork_unsafe`),
small graphs (a fork costs more than their records), and without blobs the graphs of a rank whose
host has no core to spare for a child (`worth_a_child`) are recorded in the process as before.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass, field
from typing import Any

from graphtrain_inspect.capture.shared import logformat

ENV_NODES = "GTI_CAPTURE_DEFER_NODES"  # graphs of at least this many nodes: records made by a child ("0": never)
DEFAULT_NODES = 1000
ENV_WAIT = "GTI_CAPTURE_DEFER_WAIT_S"  # the most the records behind a child's graph wait for it
DEFAULT_WAIT_S = 120.0
PENDING_DIR = ".pending"

_COUNTER = itertools.count()


def worth_a_child(blobs: bool) -> bool:
    """A child is forked for the graph anyway (its blob), or a core is free to run it: where the
    ranks of the host keep every core busy, a child that only records competes with them, and the
    passes wait for it longer than the records take here (graph_trainer's 2 ranks on 2 cores:
    wall 2.0-2.2x plain against 1.7-1.9x, BENCHMARKS.md)."""
    if blobs:
        return True
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        ranks_here = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    except ValueError:
        ranks_here = 1
    return cores > ranks_here


def wait_s() -> float:
    """How long the records behind a graph wait for its child (then it is killed, the graph goes
    unrecorded and the rest is written): a child stuck on a lock another thread of the training
    process held at the fork would otherwise hold every later record until the end."""
    try:
        return float(os.environ.get(ENV_WAIT, DEFAULT_WAIT_S))
    except ValueError:
        return DEFAULT_WAIT_S


def min_nodes() -> int:
    try:
        return int(os.environ.get(ENV_NODES, DEFAULT_NODES))
    except ValueError:
        return DEFAULT_NODES


@dataclass(eq=False)
class Pending:
    """A graph whose records a child is making: its id once the child's file is read (`gid`), or
    None where the child failed (`done` either way)."""

    path: str  # the child's records file
    frame: Any  # the pass it was taken in (its capture errors are counted there)
    role: str  # "before", "out": what the capture errors name
    gid: str | None = None
    done: bool = False
    failed: str | None = None  # why the child made no records, once known
    failed_type: str = "GraphChildError"
    detail: str = ""  # the child's traceback, where it sent one
    blob: bool = False  # the child makes the blob too
    landed: bool = False  # its records were written to the log by this process
    t0: float = field(default_factory=time.monotonic)  # when the child was forked

    @property
    def where(self) -> str:
        return f"graph records ({self.role})"


def resolve(v: Any) -> Any:
    return v.gid if isinstance(v, Pending) else v


def resolved(d: Any) -> Any:
    """A record's payload or meta with each Pending value (one level down) as its graph id."""
    if isinstance(d, dict) and any(isinstance(v, Pending) for v in d.values()):
        return {k: resolve(v) for k, v in d.items()}
    return d


def new_pending(directory: str, rank: int, frame: Any, role: str, blob: bool) -> Pending:
    pdir = os.path.join(directory, PENDING_DIR)
    return Pending(os.path.join(pdir, f"{rank}.{os.getpid()}.{next(_COUNTER)}"), frame, role, blob=blob)


class BufferLog:
    """Stands for the RankLog in the child: records encoded as the log would encode them, kept."""

    def __init__(self, log: Any) -> None:
        self.rank, self.pid = log.rank, log.pid
        self.chunks: list[bytes] = []
        self.records = 0
        self.stopped: str | None = None  # read as on a RankLog (session.current())

    def write(self, kind: str, payload: Any, *, meta: dict | None = None, compile_id: dict | None = None) -> bool:
        data = logformat.encode_record(kind, payload, rank=self.rank, meta=meta, compile_id=compile_id, pid=self.pid)
        self.chunks.append(data)
        self.records += 1
        return True


def write_file(path: str, header: dict[str, Any], buf: BufferLog) -> None:
    """The child's records: one JSON header line, then the records (write, then rename)."""
    import orjson

    tmp = path + ".tmp"
    try:  # not makedirs: a capture directory removed under the run must stay removed
        os.mkdir(os.path.dirname(path), 0o755)
    except FileExistsError:
        pass
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    with os.fdopen(os.open(tmp, flags, 0o644), "wb") as f:
        f.write(orjson.dumps({**header, "records": buf.records}) + b"\n")
        for chunk in buf.chunks:
            f.write(chunk)
    os.replace(tmp, path)


def read_file(path: str) -> tuple[dict[str, Any], bytes] | None:
    """The header and the encoded records of a child's file; None while it is not there."""
    import orjson

    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    nl = data.find(b"\n")
    header = orjson.loads(data[:nl])
    if not isinstance(header, dict):
        raise ValueError(f"{path}: the header is no object")
    return header, data[nl + 1 :]


def remove(path: str) -> None:
    for p in (path, path + ".tmp"):
        try:
            os.unlink(p)
        except OSError:
            pass


def remove_dir(directory: str) -> None:
    """The pending directory, at the end of the capture, if no rank's file is left in it."""
    try:
        os.rmdir(os.path.join(directory, PENDING_DIR))
    except OSError:
        pass
