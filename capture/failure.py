"""The exception that ended a rank's training, as a `gti_failure` record in the rank's log.

A training that failed is still a capture, and its failure is the first thing a reader needs: which
exception, on which rank, and where its traceback runs through code the capture recorded. Python
tells a process's unhandled exception to `sys.excepthook` (then exits with 1): `install` chains a
hook after whatever is there (the previous hook runs first, so the traceback prints as it always
did), and `note_unhandled`, run by the capture's exit handler, picks up an exception that reached
the top while another hook had replaced ours (`sys.last_exc`, `sys.last_value` before 3.12: the
interpreter sets them before it calls the hook). torchelastic's error file
(TORCHELASTIC_ERROR_FILE) is written only by a program whose entry point has `@record`: not relied on.

Frames in generated code are tied to what the capture recorded of it, at the time of the failure
(the objects are gone after): a frame in a file whose bytes are an Inductor output code this
process recorded gets that code's `oid` (the same sha256 as `gti_output_code`), and a frame in an
FX GraphModule's generated forward (`<eval_with_key>.N`) gets the FX node its line computes (FX's
own line map, where the torch has one) and, when a captured pass returned that module's graph,
that pass's `seq`.

A rank killed by a signal runs none of this: its parent records how it ended (child_exits). A
launcher (torchrun's own process, an elastic agent; any process without RANK that wrote no record)
raises when a rank failed: not a rank, not recorded. Whatever goes wrong here is swallowed: the
exit status and the printed traceback are Python's own.
"""

from __future__ import annotations

import hashlib
import linecache
import os
import sys
import time
from typing import Any

from graphtrain_inspect.capture import session
from graphtrain_inspect.capture.shared import logformat

MAX_FRAMES = 40  # the innermost frames kept; a deep recursion's outer frames say nothing more
_MAX_HASHED_BYTES = 16 << 20  # a frame's file larger than this is no output code of ours
# the exceptions recorded by this process (one record each), held rather than their id(): an id is
# reused once its object is freed, and a later exception of a long-lived process (a notebook, a
# test run) would then read as already recorded
_noted: list[BaseException] = []


def install() -> None:
    previous = sys.excepthook

    def excepthook(typ: Any, value: Any, tb: Any) -> None:
        try:
            previous(typ, value, tb)
        finally:
            record(value, tb)

    excepthook._gti_previous = previous  # type: ignore[attr-defined]  # a marker on the function object
    sys.excepthook = excepthook


def note_unhandled() -> None:
    """At exit: the exception that reached the top of the program, where our hook did not see it."""
    exc = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if isinstance(exc, BaseException):
        record(exc, exc.__traceback__)


def _is_launcher(sess: session.Session) -> bool:
    """A process that started ranks rather than being one, and wrote no record: torchrun's own (an
    elastic agent, no LOCAL_RANK of its own), or any process without RANK (a launcher's parent
    that re-raises its child's failure would be filed as rank 0, next to the real rank 0)."""
    if sess.header_written:
        return False
    agent = "torch.distributed.elastic.agent.server.api" in sys.modules
    return (agent and "LOCAL_RANK" not in os.environ) or "RANK" not in os.environ


def record(exc: Any, tb: Any) -> None:
    try:
        sess = session.current()
        if sess is None or not isinstance(exc, BaseException) or any(e is exc for e in _noted) or _is_launcher(sess):
            return
        if isinstance(exc, SystemExit):  # an exit the program asked for (its code says how)
            return
        _noted.append(exc)
        payload = describe(sess, exc, tb)
        if sess.lock.acquire(timeout=10):
            try:
                sess._write(logformat.FAILURE, payload, {"type": payload["type"]})
            finally:
                sess.lock.release()
    except Exception:  # noqa: BLE001 - the program's own ending goes on unchanged
        pass


def describe(sess: session.Session, exc: BaseException, tb: Any) -> dict[str, Any]:
    import traceback

    return {
        "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "message": str(exc)[:4000],
        "traceback": "".join(traceback.format_exception(type(exc), exc, tb))[-8000:],
        "frames": frames(sess, tb),
        "pid": os.getpid(),
        "time": time.time(),
    }


def frames(sess: session.Session, tb: Any) -> list[dict[str, Any]]:
    """The traceback's frames, outermost first (the last MAX_FRAMES), each {file, line, function,
    code} and where it runs generated code the capture recorded: `oid`, or `node` and `pass_seq`."""
    out: list[dict[str, Any]] = []
    codes = sess.__dict__.get("_gti_output_codes") or set()
    hashed: dict[str, str | None] = {}
    last = None
    while tb is not None:
        out.append(_frame(sess, tb.tb_frame, tb.tb_lineno, codes, hashed))
        last = tb.tb_frame
        tb = tb.tb_next
    cut = _cut_fx_frame(sess, last) if last is not None else None
    if cut is not None:
        out.append(cut)
    return out[-MAX_FRAMES:]


def _cut_fx_frame(sess: session.Session, frame: Any) -> dict[str, Any] | None:
    """The forward's frame FX cut off the traceback, where it did: when the error is raised on a
    line of the forward itself, FX's call wrapper prints that line and re-raises the exception
    without its traceback (`e.with_traceback(None)`), so the innermost frame left is the wrapper's,
    which still holds the graph module (`obj`) and the line (`topmost_framesummary`). Those local
    names are torch's own: where a torch has others, nothing is added."""
    try:
        local = frame.f_locals
        summary, gm = local.get("topmost_framesummary"), local.get("obj")
        fname = getattr(summary, "filename", None)
        lineno = getattr(summary, "lineno", None)
        if not isinstance(fname, str) or not fname.startswith("<eval_with_key>") or type(lineno) is not int:
            return None
        row: dict[str, Any] = {
            "file": fname,
            "line": lineno,
            "function": str(getattr(summary, "name", "") or ""),
            "code": str(getattr(summary, "line", "") or "").strip()[:500],
        }
        row.update(_fx_frame(sess, gm, lineno))
        return row
    except Exception:  # noqa: BLE001 - the traceback as it is
        return None


def _frame(sess: session.Session, frame: Any, lineno: int, codes: set, hashed: dict) -> dict[str, Any]:
    fname = frame.f_code.co_filename
    row: dict[str, Any] = {
        "file": fname,
        "line": lineno,
        "function": frame.f_code.co_name,
        "code": linecache.getline(fname, lineno).strip()[:500],
    }
    try:
        if codes and fname.endswith(".py"):
            if fname not in hashed:
                hashed[fname] = _oid_of_file(fname)
            if hashed[fname] in codes:
                row["oid"] = hashed[fname]
        elif fname.startswith("<eval_with_key>"):
            row.update(_fx_frame(sess, frame.f_locals.get("self"), lineno))
    except Exception:  # noqa: BLE001 - a frame we cannot tie is still a frame
        pass
    return row


def _oid_of_file(path: str) -> str | None:
    """`gti_output_code`'s oid of the file's bytes (Inductor loads the code it saved as is)."""
    try:
        if os.path.getsize(path) > _MAX_HASHED_BYTES:
            return None
        with open(path, "rb") as f:
            return "o" + hashlib.sha256(f.read()).hexdigest()[:16]
    except OSError:
        return None


def _fx_frame(sess: session.Session, gm: Any, lineno: int) -> dict[str, Any]:
    """The FX node a GraphModule's generated forward runs at `lineno`, and the captured pass
    that returned its graph."""
    out: dict[str, Any] = {}
    graph = getattr(gm, "graph", None)
    if graph is None or not hasattr(graph, "nodes"):
        return out
    line_map = getattr(gm, "_lineno_map", None)  # torch's own map (fx.graph.PythonCode), where it has one
    start = getattr(gm, "_prologue_start", 0)
    if isinstance(line_map, dict) and isinstance(start, int):
        idx = line_map.get(lineno - start)
        if isinstance(idx, int):
            for i, node in enumerate(graph.nodes):
                if i == idx:
                    out["node"] = node.name
                    break
    from graphtrain_inspect.capture import lineage

    origin, seq = sess.lineage.origin(gm)
    if origin == lineage.FROM_PASS and seq is not None:
        out["pass_seq"] = seq
    return out
