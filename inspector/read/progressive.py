"""Open a capture a chunk at a time, and follow it while it grows.

`open_capture` (inspector.read.capture_index) indexes every log in one scan before returning: on a
1 GB capture that is over a second of memory bandwidth on a small machine, and a capture still
being written would have to be scanned again from the start for every new record. This module
indexes the same logs in steps instead:

    loader = ProgressiveLoader(path)
    while not loader.done:
        loader.step(32 << 20)            # scan the next 32 MB of each log
        cap = loader.snapshot()          # a Capture of what has been indexed so far
    ...
    if loader.grow():                    # the logs grew (training still running)
        cap = loader.snapshot()          # only the new bytes were scanned

A snapshot is an ordinary `Capture` (inspector.read.capture_reader) over the same log objects, so every
reader, diff and check works on it. Logs are `ChunkedLogFile`s: the core's `LogFile` with the scan
done in steps (the same record rules and the same errors, file and line). Inputs other than a
capture directory of our logs (torch's TORCH_TRACE logs, one log file) are opened with
`open_capture` in one go.

A snapshot is indexed by the one indexing of a capture (capture_index.index_logs, read_beside);
tests/tui/test_progressive.py checks that a snapshot of a fully scanned capture equals what
`open_capture` returns. No textual, rich or torch.
"""

from __future__ import annotations

import mmap
import os
from typing import Any

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.inspector.errors import CaptureUnreadable
from graphtrain_inspect.inspector.read import capture_index
from graphtrain_inspect.inspector.read.capture_reader import Capture
from graphtrain_inspect.inspector.read.logscan import (
    ENVELOPE_LINE_LIMIT,
    LINE_START_RE,
    LogFile,
    ReadError,
    Record,
    blank_tail,
    is_blank,
    kind_problem,
    preview,
)


class ChunkedLogFile(LogFile):
    """A `LogFile` indexed in steps (`scan_more`) and extended when its file grows (`grow`)."""

    def __init__(self, path: str, *, rank: int | None = None, base: str | None = None):
        self._pos = 0  # first byte not yet scanned for line starts
        self._open_start: int | None = None  # start of the last record seen; its end is not known yet
        self._tail_errors = 0
        self._final_start: int | None = None  # the line closed at the end of the file
        super().__init__(path, rank=rank, base=base)  # maps the file; _scan below defers the work

    def _scan(self) -> None:  # LogFile.__init__ calls this: scanning happens in scan_more
        if self.size and self._buf[0:1] == b"\t":
            self._err(0, "payload line before the first record")

    @property
    def done(self) -> bool:
        return self._pos >= self.size and self._open_start is None

    @property
    def scanned(self) -> int:
        return min(self._pos, self.size)

    def scan_more(self, max_bytes: int = 32 << 20) -> int:
        """Index the next `max_bytes` of the file (whole lines); return the bytes scanned."""
        if self.size == 0 or self.done:
            return 0
        buf = self._buf
        size = self.size
        start_pos = self._pos
        limit = min(size, self._pos + max_bytes)
        starts: list[int] = []
        if self._pos == 0 and buf[0:1] != b"\t":
            starts.append(0)
        # a line start at `limit` itself is found by the next call (the match needs the newline);
        # empty lines are no line starts (whether one is may look a byte past `limit`)
        starts.extend(
            s
            for s in (m.start() + 1 for m in LINE_START_RE.finditer(buf, max(0, self._pos - 1), limit))
            if not is_blank(buf, s)
        )
        self._pos = limit
        pending = self._open_start
        for s in starts:
            if pending is not None:
                self._add(pending, s)
            pending = s
        self._open_start = pending
        if self._pos >= size and self._open_start is not None:
            self._add(self._open_start, size, last=True)
            self._open_start = None
        # every page scanned, the open record's too (a long payload line may keep it open for many
        # steps): pages released come back from the page cache when a payload is read
        self._release(start_pos, self._pos)
        return limit - start_pos

    def _add(self, start: int, nxt: int, *, last: bool = False) -> None:
        buf = self._buf
        size = self.size
        nl = buf.find(b"\n", start, min(nxt, start + ENVELOPE_LINE_LIMIT + 2)) if nxt > start else -1
        if nl < 0 and nxt - start > ENVELOPE_LINE_LIMIT + 1:
            self._overlong(start, nxt)
            return
        line_end = nxt if nl < 0 else nl
        line = buf[start:line_end] if nl < 0 else logformat.envelope_line(buf[start:line_end])
        if not line:  # empty lines at the start of the file: tlparse skips them, so do we
            return
        if last:
            self.truncated = buf[size - 1 : size] != b"\n"
            self._final_start = start
        errors_before = len(self.errors)
        glog = logformat.GLOG_RE.match(line)
        if glog is None:
            self._err(start, f"not a structured-log line: {preview(line)}")
        else:
            try:
                kind, env = logformat.scan_envelope(line, glog)
            except logformat.FormatError as e:
                msg = str(e)
                if nl < 0 and last and self.truncated:
                    msg = f"truncated record (file ends mid-line): {msg}"
                self._err(start, msg)
            else:
                problem = kind_problem(kind, env)
                if problem is not None:
                    self._err(start, problem)
                else:
                    payload_start = min(line_end + 1, nxt)
                    end = self._payload_region_end(kind, payload_start, nxt)
                    self.records.append(
                        Record(len(self.records), kind, start, payload_start, blank_tail(buf, payload_start, end), env)
                    )
        if last and self.truncated and self.records and self.records[-1].end == size:
            self._check_final(self.records[-1])
        self._tail_errors = len(self.errors) - errors_before if last else 0

    def grow(self) -> bool:
        """Map the file again if it grew; the new bytes are scanned by `scan_more`. True if it grew."""
        try:
            size = os.path.getsize(self.path)
        except OSError:
            return False
        if size <= self.size or self._fh is None:
            return False
        old = self._buf
        try:
            self._buf = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            self._fh.seek(0)
            self._buf = self._fh.read()
        if isinstance(old, mmap.mmap):
            try:
                old.close()
            except BufferError:
                pass
        old_size = self.size
        self.size = size
        # the last record was closed at the old end of the file: reopen it (it may have been cut
        # mid-write and completed since), with the errors said about it
        if self._tail_errors:
            del self.errors[-self._tail_errors :]
            self._tail_errors = 0
        if self._final_start is not None:
            # ... and with what reading its payload said about it since (a record cut between its
            # envelope and its payload lines has "no payload lines" until the rest arrives)
            final_line = self.line_of(self._final_start)
            self.errors[:] = [e for e in self.errors if e.line != final_line]
            if self.records and self.records[-1].offset == self._final_start:
                rec = self.records.pop()
                self._bad.discard(rec.index)
                self._bad_payload.discard(rec.index)
                self._cache.pop(rec.index, None)
            self._open_start = self._final_start
            self._final_start = None
        self._pos = old_size
        self.truncated = False
        if old_size == 0:
            self.errors = [e for e in self.errors if e.message != "empty file"]
            self._pos = 0
            self._scan()
        return True


class ProgressiveLoader:
    """Index a capture directory step by step; `snapshot()` gives a Capture of what is indexed."""

    def __init__(self, path: str, *, source: str = "auto"):
        self.path = path
        self.logs: dict[int, ChunkedLogFile] = {}
        self.fallback: Capture | None = None
        self.extra_errors: list[ReadError] = []
        self.manifest: dict[str, Any] | None = None
        self._manifest_sig: tuple | None = None
        if not os.path.exists(path):
            raise CaptureUnreadable(f"{path}: no such file or directory")
        ours = self._our_logs() if os.path.isdir(path) and source != "torch" else []
        if not ours and self._starting_capture(source):
            return  # a capture whose ranks have not written yet: their logs are picked up by grow()
        if not ours:
            self.fallback = capture_index.open_capture(path, source=source)  # raises CaptureUnreadable
            return
        self._add_logs(ours)

    # -- files ---------------------------------------------------------------------------------------

    def _starting_capture(self, source: str) -> bool:
        """A capture directory made by `capture` (a manifest saying running) with no logs yet."""
        if source == "torch" or not os.path.isdir(self.path):
            return False
        self._read_manifest()
        return isinstance(self.manifest, dict) and self.manifest.get("status") == "running"

    def _our_logs(self) -> list[str]:
        try:
            names = sorted(os.listdir(self.path))
        except OSError as e:
            raise CaptureUnreadable(f"{self.path}: cannot list directory: {e.strerror or e}") from None
        return [os.path.join(self.path, n) for n in names if capture_index.is_our_log(n)]

    def _add_logs(self, files: list[str]) -> None:
        for f in files:
            r = logformat.rank_of_log_name(os.path.basename(f))
            if r is None or r in self.logs:
                continue
            self.logs[r] = ChunkedLogFile(f, rank=r, base=self.path)

    def _read_manifest(self) -> None:
        mpath = os.path.join(self.path, logformat.MANIFEST_NAME)
        try:
            st = os.stat(mpath)
        except OSError:
            self.manifest, self._manifest_sig = None, None
            return
        sig = (st.st_size, st.st_mtime_ns)
        if sig == self._manifest_sig:
            return
        self._manifest_sig = sig
        self.extra_errors = [e for e in self.extra_errors if e.path != mpath]
        try:
            self.manifest = capture_index.read_manifest(mpath, self.path)
        except (OSError, ValueError) as e:
            self.manifest = None
            self.extra_errors.append(ReadError(mpath, None, f"manifest does not parse: {e}"))

    # -- progress ------------------------------------------------------------------------------------

    @property
    def total_bytes(self) -> int:
        return sum(lg.size for lg in self.logs.values())

    @property
    def scanned_bytes(self) -> int:
        return sum(lg.scanned for lg in self.logs.values())

    @property
    def done(self) -> bool:
        return self.fallback is not None or all(lg.done for lg in self.logs.values())

    def step(self, max_bytes: int = 32 << 20) -> int:
        """Scan up to `max_bytes` more of each log; return the bytes scanned."""
        return sum(lg.scan_more(max_bytes) for lg in self.logs.values())

    def grow(self) -> bool:
        """Notice new bytes and new rank logs (a capture still being written). True if anything changed."""
        if self.fallback is not None:
            return False
        changed = False
        known = {lg.path for lg in self.logs.values()}
        new = [f for f in self._our_logs() if f not in known]
        if new:
            self._add_logs(new)
            changed = True
        for lg in self.logs.values():
            changed |= lg.grow()
        sig = self._manifest_sig
        self._read_manifest()
        return changed or sig != self._manifest_sig

    # -- snapshots -----------------------------------------------------------------------------------

    def snapshot(self) -> Capture:
        """A Capture of everything indexed so far (the logs are shared, not copied)."""
        if self.fallback is not None:
            return self.fallback
        if self._manifest_sig is None:
            self._read_manifest()
        cap = capture_index.index_logs(self.path, "capture", self.logs, list(self.extra_errors))
        capture_index.read_beside(cap, self.path, self.manifest)
        return cap

    def release(self) -> None:
        """Drop the log pages this process has mapped (reading pass records and envelopes maps
        their neighbours too); they come back from the page cache when a payload is read again."""
        for lg in self.logs.values():
            lg._release(0, lg.scanned)

    def close(self) -> None:
        if self.fallback is not None:
            self.fallback.close()
        for lg in self.logs.values():
            lg.close()
