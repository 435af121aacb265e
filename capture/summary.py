"""What each rank's log holds, read back for the launcher's summary and the manifest.

A light scan of envelopes (payloads are decoded only for the small pass, error and end
records); the full reader with indexes and diffs is inspector/.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

from graphtrain_inspect.capture.shared import logformat


@dataclass
class RankSummary:
    rank: int
    log: str
    bytes: int = 0
    records: int = 0
    passes: int = 0
    raised: int = 0
    graphs: int = 0
    capture_errors: int = 0
    ended: bool = False
    stopped: str | None = None
    targets: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    # one per process that wrote to this rank's log: {pid, state, records, reason, alive}
    processes: list[dict] = field(default_factory=list)
    has_log: bool = True
    # a simulated rank ended on purpose once its passes ran (--stop-after-passes), and where
    stopped_after_passes: bool = False
    stopped_at: str = ""
    world_size: int = 0  # from the log's header: the ranks of the world that wrote no log are named
    # --pass targets a worker could not resolve (imported, but no such attribute...): target -> why
    target_errors: dict[str, str] = field(default_factory=dict)
    # the exception that ended the rank's program (a gti_failure record), "Type: first line"
    failure: str | None = None

    @property
    def alive(self) -> list[int]:
        """Pids of this rank's writers still running (the command ended without them)."""
        return [p["pid"] for p in self.processes if p.get("alive")]

    def state(self) -> str:
        """complete | stopped | incomplete: how the rank's capture ended, in one word."""
        if self.stopped:
            return "stopped"
        return "complete" if self.ended else "incomplete"

    def exit(self) -> dict | None:
        """How this rank's process ended, where its parent recorded it: {"exit_code", "signal"}
        of the last writer that has one (None: not recorded)."""
        for p in reversed(self.processes):
            if p.get("exit_code") is not None:
                return {"exit_code": p["exit_code"], "signal": p.get("signal")}
        return None

    def raised_failure(self) -> str | None:
        """The exception that ended the rank (`failure`), unless its process ended well (exit 0):
        then a helper process with the rank's environment raised it, not the training."""
        ex = self.exit()
        return self.failure if ex is None or ex["exit_code"] != 0 else None

    def ending(self, disk_full: bool = False) -> str:
        """How the rank's capture ended, in words for the summary."""
        if self.stopped:
            return "incomplete: the capture stopped writing (training went on)"
        if self.ended and self.raised_failure():
            return f"complete; the training raised {self.failure}"
        if self.ended:
            return "complete"
        if self.alive:
            return f"incomplete: still running (pid {', '.join(map(str, self.alive))})"
        ex = self.exit()
        if ex is not None and ex["signal"]:
            return f"incomplete: killed by {ex['signal']} after {self.passes} passes (no end record)"
        if ex is not None:
            return f"incomplete: exited with code {ex['exit_code']} after {self.passes} passes, without an end record"
        if disk_full:
            return "incomplete: nothing more could be written (the capture's filesystem is full)"
        return "incomplete: no end record (the process was killed or crashed)"

    def manifest_entry(self) -> dict:
        return {
            "log": os.path.basename(self.log),
            "log_present": self.has_log,
            "bytes": self.bytes,
            "records": self.records,
            "passes": self.passes,
            "capture_errors": self.capture_errors,
            "complete": self.ended and not self.stopped,
            "end_record": self.ended,
            "stopped": self.stopped,
            "damaged_lines": len(self.problems),
            "processes": self.processes,
            "exit": self.exit(),
            **({"failure": self.failure} if self.raised_failure() else {}),
            **({"stopped_after_passes": True} if self.stopped_after_passes else {}),
        }


def summarize(directory: str) -> list[RankSummary]:
    out: dict[int, RankSummary] = {}
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    for name in names:
        if not name.endswith(logformat.LOG_SUFFIX):
            continue
        rank = logformat.rank_of_log_name(name)
        if rank is None:
            continue
        out[rank] = summarize_log(os.path.join(directory, name), rank)
    for rank, status in read_statuses(directory):
        s = out.get(rank)
        if s is None:  # the process wrote a status but its log is gone (deleted) or never opened
            s = out[rank] = RankSummary(
                rank=rank, log=os.path.join(directory, logformat.log_file_name(rank)), has_log=False
            )
        s.processes.append(status)
        if status.get("state") == "stopped" and not s.stopped:
            s.stopped = str(status.get("reason") or "stopped writing")
    return [out[r] for r in sorted(out)]


def read_statuses(directory: str) -> list[tuple[int, dict]]:
    """(rank, {pid, state, records, reason, alive}) of each writer's status file, by rank and pid.
    Unreadable or foreign files are skipped (this is the launcher's own directory)."""
    sdir = os.path.join(directory, logformat.STATUS_DIR)
    try:
        names = sorted(os.listdir(sdir))
    except OSError:
        return []
    out = []
    for name in names:
        who = logformat.status_of_file_name(name)
        if who is None:
            continue
        try:
            with open(os.path.join(sdir, name), "rb") as f:
                doc = logformat.decode_status(f.read(logformat.STATUS_BYTES * 4))
        except (OSError, logformat.FormatError):
            continue
        rank, pid = who
        state = doc.get("state")
        out.append(
            (
                rank,
                {
                    "pid": pid,
                    "state": state,
                    "records": doc.get("records"),
                    "reason": doc.get("reason"),
                    # how the process ended, where its parent recorded it (capture.child_exits)
                    "exit_code": doc.get("exit_code") if type(doc.get("exit_code")) is int else None,
                    "signal": doc.get("signal") if isinstance(doc.get("signal"), str) else None,
                    # a writer still running after the command ended (an orphaned worker) has not finished
                    "alive": state == "writing" and _alive(pid),
                },
            )
        )
    return sorted(out, key=lambda x: (x[0], x[1]["pid"]))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, not ours to signal
    try:  # a zombie has ended
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return True


def summarize_log(path: str, rank: int) -> RankSummary:
    s = RankSummary(rank=rank, log=path)
    try:
        # a regular file only: a log that is a link to a device (/dev/zero, /dev/full) never ends
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise OSError("not a regular file (a link or a device)")
            data = f.read()
    except OSError as e:
        s.problems.append(f"{path}: {e.strerror or e}")
        return s
    s.bytes = len(data)
    for lineno, line, payload_lines in logformat.split_records(data):
        try:
            env = logformat.parse_envelope_line(line)
            kind = logformat.record_kind(env)
        except logformat.FormatError as e:
            s.problems.append(f"{path}:{lineno}: {e}")
            continue
        s.records += 1
        if kind == logformat.GRAPH_CODE:
            s.graphs += 1
        elif kind in (logformat.PASS, logformat.ERROR, logformat.END, logformat.HEADER, logformat.FAILURE):
            try:
                payload = logformat.decode_payload(payload_lines, env)
            except logformat.FormatError as e:
                s.problems.append(f"{path}:{lineno}: {e}")
                continue
            if kind == logformat.PASS:
                s.passes += 1
                s.raised += payload.get("status") == "raised"
                if payload.get("target"):
                    s.targets.add(payload["target"])
            elif kind == logformat.HEADER:
                world = payload.get("world_size") if isinstance(payload, dict) else None
                s.world_size = world if isinstance(world, int) and not isinstance(world, bool) else 0
            elif kind == logformat.FAILURE:
                if isinstance(payload, dict):
                    typ = str(payload.get("type") or "Exception").rsplit(".", 1)[-1]
                    msg = str(payload.get("message") or "").strip().split("\n")[0][:200]
                    s.failure = f"{typ}: {msg}" if msg else typ
            elif kind == logformat.ERROR:
                s.capture_errors += 1
                where = str(payload.get("where") or "") if isinstance(payload, dict) else ""
                target = where.removeprefix("--pass ")
                # "--pass T" alone: T did not resolve (named_passes); "--pass T: wrapping ..." is
                # an instrumentation error of a pass that did (a target has no ": " in it)
                if target != where and ": " not in target:
                    msg = str(payload.get("message") or "").strip().split("\n")[0]
                    why = f"{payload.get('type') or 'error'}: {msg}"
                    s.target_errors.setdefault(target, why)
            else:
                s.ended = True
                stop = payload.get("stopped_after_passes") if isinstance(payload, dict) else None
                s.stopped_after_passes = bool(stop)
                s.stopped_at = str(stop.get("at") or "") if isinstance(stop, dict) else ""
    return s
