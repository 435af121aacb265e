"""Blobs pickled by forked children, so the training process goes on while a blob is made.

`GraphPickler.dumps` costs ~340 us per node, and a blob must show the graph as a pass received
it, before the pass changes it in place. A fork gives the child a copy-on-write snapshot of the
whole process at that moment: the parent runs the pass at once, the child pickles its snapshot,
writes `blobs/<sha256>.gpkl` (write then rename, `blobs.write_blob`), sends the reference back
through a pipe (one write of at most MESSAGE_MAX bytes: below PIPE_BUF, so it is whole and never
blocks) and leaves with `os._exit`. The session collects finished children without blocking at
every later pass start and end, and writes a `gti_blob` record for each (format 3).

The child inherits a process that may have other threads (gloo's, OpenMP's, the user's): only
the thread that forked exists in it, and any lock another thread held stays held. So the child
does nothing but pickle and write its file and pipe: the garbage collector off, stdin/stdout/
stderr on /dev/null (a warning from the pickler never lands in the training's output), every
other inherited descriptor closed (sockets of the process group are not kept open by it), the
default action for the signals that end a process. A child that fails, dies or hangs loses
only its blob: the session records a capture error. At the end of the capture the parent waits
for the children at most `GTI_CAPTURE_BLOB_WAIT_S` seconds in all, kills the ones left with
SIGKILL and reaps every one: no zombie stays.

Where a fork cannot be used, the blob is made in the process as before: no `os.fork`
(not POSIX), a graph holding real tensors on an accelerator (a forked child cannot touch CUDA
once the parent initialized it), `GTI_CAPTURE_BLOB_FORK=0`, or a fork that failed.
"""

from __future__ import annotations

import os
import select
import signal
import time
import traceback
import warnings
from dataclasses import dataclass
from typing import Any, Callable

ENV_FORK = "GTI_CAPTURE_BLOB_FORK"  # "0": pickle in the training process
ENV_CHILDREN = "GTI_CAPTURE_BLOB_CHILDREN"  # children at once (default 2)
ENV_WAIT = "GTI_CAPTURE_BLOB_WAIT_S"  # the most the end of a capture waits for children (default 300)

CHILD_MAX_S = 3600  # a child still running this long is stuck: SIGALRM ends it
NICE = 10  # children run at a lower priority than the training process
MESSAGE_MAX = 3800  # one pipe write, below PIPE_BUF (4096 on Linux, 512 by POSIX: the message is small)
_POLL_S = 0.25  # how often a blocking wait also asks waitpid (a pipe end kept open elsewhere)
# how often a wait asks waitpid for a child whose pipe is at end of file (it is exiting: a pipe at
# its end is always ready, and polling it made the wait spin ~1,000 times per rank on
# graph_trainer while the children's exits unmapped their copy of the training process)
_EXIT_POLL_S = 0.002


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def fork_unsafe(gm: Any) -> str | None:
    """Why this graph's blob must be made in this process (None: a child may make it)."""
    if os.environ.get(ENV_FORK, "1").strip() == "0":
        return f"{ENV_FORK}=0"
    if os.name != "posix" or not hasattr(os, "fork"):
        return "no fork on this platform"
    if holds_accelerator_tensors(gm):
        return "the graph holds real tensors on an accelerator"
    return None


def _no_accelerator_started() -> bool:
    """True where no tensor can live on an accelerator: torch has none (a CPU build, no device),
    or its runtime was never started in this process. False where that cannot be told."""
    import torch

    acc = getattr(torch, "accelerator", None)  # torch >= 2.6
    if acc is None:
        return False
    try:
        device = acc.current_accelerator()
        if device is None:
            return True
        started = getattr(getattr(torch, device.type, None), "is_initialized", None)  # torch.cuda, torch.xpu
        return started is not None and not started()
    except Exception:  # noqa: BLE001 - unknown: the walk tells
        return False


def holds_accelerator_tensors(gm: Any) -> bool:
    """True when the graph module or a nested one holds a real (not fake) tensor off the CPU, as
    a parameter, buffer or attribute, or in a node's `val`: pickling it reads device memory.
    Where no accelerator was started in this process there is none to find: the walk of every
    node (5-11 ms for the 4 forks of a rank on graph_trainer) is skipped."""
    if _no_accelerator_started():
        return False
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    def real_off_cpu(v: Any) -> bool:
        return isinstance(v, torch.Tensor) and not isinstance(v, FakeTensor) and v.device.type not in ("cpu", "meta")

    for mod in gm.modules():
        for v in (*mod._parameters.values(), *mod._buffers.values(), *vars(mod).values()):
            if real_off_cpu(v):
                return True
        graph = getattr(mod, "graph", None)
        for node in getattr(graph, "nodes", ()):
            v = node.meta.get("val")
            for x in v if isinstance(v, (list, tuple)) else (v,):
                if real_off_cpu(x):
                    return True
    return False


@dataclass
class Child:
    pid: int
    fd: int  # read end of the pipe the child answers on
    gid: Any  # the graph's id, or the deferred_graphs.Pending standing for it until it is known
    where: str  # "blob (before)": what the capture error names if the child fails
    frame: Any  # the pass in progress when the child was forked
    t0: float  # time.monotonic() at the fork (CLOCK_MONOTONIC: the child's clock too)
    message: bytes = b""
    eof: bool = False  # its pipe is at end of file: it has answered and is exiting


@dataclass
class Result:
    child: Child
    ref: dict[str, Any] | None  # {"sha256", "path", "bytes"} when the blob was written
    error: str | None  # why not, one line
    detail: str  # the child's traceback, if it sent one
    cpu_s: float  # user + system CPU of the child (from wait4)
    wall_s: float
    error_type: str = "BlobChildError"  # the exception's type in the child, where it sent one


class Children:
    """The children of one session (blobs, graph records). Not thread-safe: the session calls it
    under its lock."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        self.limit = max(1, int(_env_float(ENV_CHILDREN, 2)))
        self.running: dict[int, Child] = {}
        self.forked = 0
        self.cpu_s = 0.0
        self.failed = 0
        self.killed = 0

    # -- starting --------------------------------------------------------------------------------

    def start(self, gid: Any, where: str, frame: Any, job: Callable[[], dict[str, Any]]) -> Child:
        """Fork a child that runs `job()` on its copy-on-write snapshot of this process and answers
        with what it returns (`blob_job`; session_children's graph records). Raises OSError when
        no child could be made (the caller does the work itself)."""
        r, w = os.pipe()  # both ends close on exec; the child keeps only w
        try:
            with warnings.catch_warnings():
                # Python 3.12+ warns about fork in a process with threads: the child is built for it.
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except BaseException:
            os.close(r)
            os.close(w)
            raise
        if pid == 0:  # pragma: no cover - runs in the child, which leaves through os._exit
            _child_main(job, r, w)
        os.close(w)
        os.set_blocking(r, False)
        child = Child(pid, r, gid, where, frame, time.monotonic())
        self.running[pid] = child
        self.forked += 1
        return child

    # -- collecting ------------------------------------------------------------------------------

    def poll(self) -> list[Result]:
        """The children that have finished, reaped; never blocks."""
        if os.getpid() != self.owner:  # a fork of the training process: its children are not ours
            return []
        out = []
        for child in list(self.running.values()):
            res = self._reap(child, block=False)
            if res is not None:
                out.append(res)
        return out

    def wait(self, timeout_s: float, *, one: bool = False) -> list[Result]:
        """Wait until every child has finished, at most `timeout_s`; then the children still
        running are killed and reported as such. With `one`: until any child has finished, and
        none is killed (the caller makes its blob itself when none did)."""
        if os.getpid() != self.owner:
            return []
        deadline = time.monotonic() + max(0.0, timeout_s)
        out = self.poll()
        while self.running and not (one and out):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            live = [c.fd for c in self.running.values() if not c.eof]
            step = _POLL_S if len(live) == len(self.running) else _EXIT_POLL_S
            if live:
                ready = _ready(live, min(left, step))
            else:
                time.sleep(min(left, step))
                ready = set()
            for child in [c for c in self.running.values() if c.fd in ready]:
                self._read(child)
            out += self.poll()
        if one:
            return out
        for child in list(self.running.values()):
            out.append(self._kill(child, f"still running after {timeout_s:g} s ({ENV_WAIT})"))
        return out

    def kill_all(self, why: str) -> list[Result]:
        if os.getpid() != self.owner:
            return []
        return [self._kill(c, why) for c in list(self.running.values())]

    def kill_for(self, gid: Any, why: str) -> list[Result]:
        """Kill (and reap) the children working on `gid` (a gid or a deferred_graphs.Pending)."""
        if os.getpid() != self.owner:
            return []
        return [self._kill(c, why) for c in list(self.running.values()) if c.gid is gid]

    def _read(self, child: Child) -> None:
        while True:
            try:
                data = os.read(child.fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                return
            if not data:
                child.eof = True
                return
            child.message += data[: max(0, 2 * MESSAGE_MAX - len(child.message))]

    def _reap(self, child: Child, *, block: bool) -> Result | None:
        try:
            pid, status, usage = os.wait4(child.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored, a wait() in user code)
            pid, status, usage = child.pid, None, None
        except InterruptedError:
            return None
        if pid == 0:
            return None
        self._read(child)
        try:
            os.close(child.fd)
        except OSError:
            pass
        del self.running[child.pid]
        cpu = (usage.ru_utime + usage.ru_stime) if usage is not None else 0.0
        self.cpu_s += cpu
        return self._result(child, status, cpu)

    def _kill(self, child: Child, why: str) -> Result:
        try:
            os.kill(child.pid, signal.SIGKILL)
        except OSError:
            pass
        res = self._reap(child, block=True)
        if res is None:  # interrupted: the child is dead or dying; reap it whenever it is
            del self.running[child.pid]
            res = Result(child, None, None, "", 0.0, time.monotonic() - child.t0)
        self.killed += 1
        if res.ref is None:
            res.error, res.error_type = f"blob child {child.pid} killed: {why}", "BlobChildError"
        return res

    def _result(self, child: Child, status: int | None, cpu: float) -> Result:
        import orjson

        msg: Any = None
        if child.message:
            try:
                msg = orjson.loads(child.message)
            except orjson.JSONDecodeError:
                msg = None
        done = msg.get("done") if isinstance(msg, dict) else None
        # from the fork to the child's end (it says when), else to now
        wall = (done if type(done) is float and done >= child.t0 else time.monotonic()) - child.t0
        ref = msg.get("ref") if isinstance(msg, dict) else None
        if isinstance(ref, dict) and isinstance(ref.get("sha256"), str):
            return Result(child, ref, None, "", cpu, wall)
        if isinstance(msg, dict) and msg.get("records") is True and "error" not in msg:
            return Result(child, None, None, "", cpu, wall)  # a job that made no blob, as asked
        self.failed += 1
        err = msg.get("error") if isinstance(msg, dict) else None
        if isinstance(err, dict):
            return Result(
                child,
                None,
                str(err.get("message")),
                str(err.get("traceback") or ""),
                cpu,
                wall,
                str(err.get("type") or "BlobChildError"),
            )
        if status is None:
            how = "was reaped by someone else"
        elif os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = str(sig)
            how = f"died of signal {name}"
        else:
            how = f"exited with status {os.WEXITSTATUS(status)}"
        return Result(child, None, f"blob child {child.pid} {how} without a blob", "", cpu, wall)


def _ready(fds: list[int], timeout_s: float) -> set[int]:
    """The descriptors with data or at end of file, waiting at most timeout_s (poll: select has
    a 1024 descriptor limit, and a training process may hold more)."""
    if hasattr(select, "poll"):
        p = select.poll()
        for fd in fds:
            p.register(fd, select.POLLIN)
        try:
            return {fd for fd, _ in p.poll(timeout_s * 1000)}
        except OSError:
            time.sleep(timeout_s)
            return set()
    try:
        return set(select.select(fds, [], [], timeout_s)[0])
    except (OSError, ValueError):
        time.sleep(timeout_s)
        return set()


def _child_main(job: Callable[[], dict[str, Any]], r: int, w: int) -> None:  # pragma: no cover - child
    """The child: run the job (pickle and write), answer, _exit. Nothing here may return or raise."""
    code = 3
    try:
        import gc

        gc.disable()  # a collection would walk (and copy) every object of the training process
        os.close(r)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM):
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):
                pass
        signal.alarm(CHILD_MAX_S)  # a child that hangs after its parent was killed ends anyway
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        keep = sorted({w, 0, 1, 2})
        lo = 3
        for fd in keep:
            if fd >= lo:
                os.closerange(lo, fd)
                lo = fd + 1
        os.closerange(lo, _max_fd())
        try:
            os.nice(NICE)  # the training comes first where cores are short
        except OSError:
            pass
        code = 1
        msg = job()
        msg["done"] = time.monotonic()
        if "ref" in msg or msg.get("records") is True:
            code = 0
        os.write(w, _encode_message(msg))
    except BaseException:  # noqa: BLE001 - the child leaves through _exit whatever happens
        pass
    finally:
        os._exit(code)


def _max_fd() -> int:
    try:
        return min(os.sysconf("SC_OPEN_MAX"), 1 << 20)
    except (OSError, ValueError):
        return 65536


def blob_job(directory: str, gm: Any, shape_env: Any) -> Callable[[], dict[str, Any]]:
    """A child's job: the blob of `gm` as it is at the fork."""
    return lambda: child_dump(directory, gm, shape_env)


def child_dump(directory: str, gm: Any, shape_env: Any) -> dict[str, Any]:
    from graphtrain_inspect.capture import blobs

    try:
        return {"ref": blobs.dump(directory, gm, shape_env)}
    except BaseException as e:  # noqa: BLE001
        return error_message(e)


def error_message(e: BaseException) -> dict[str, Any]:
    """A child's answer for a failure: its type, message and traceback."""
    return {
        "error": {
            "type": type(e).__name__,
            "message": str(e)[:600],
            "traceback": "".join(traceback.format_exception(type(e), e, e.__traceback__))[-2400:],
        }
    }


def _encode_message(msg: dict[str, Any]) -> bytes:
    import orjson

    data = orjson.dumps(msg)
    if len(data) > MESSAGE_MAX and "error" in msg:
        err = dict(msg["error"])
        err["traceback"] = ""
        err["message"] = str(err.get("message"))[:300]
        data = orjson.dumps({"error": err})
    return data[:MESSAGE_MAX]
