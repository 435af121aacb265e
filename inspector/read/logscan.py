"""One structured log file (ours or torch's TORCH_TRACE), indexed by record offsets in one scan.

Opening a log maps it into memory and finds every record's first line with one regular-expression
scan for line starts that are not payload lines (payload lines start with a tab), so the scan
never looks inside payloads: only envelopes are parsed. Payloads are decoded (md5 checked, JSON
parsed) only when asked, through a small LRU cache.

Anything wrong with the file becomes a `ReadError` naming the file and line; the records that
are readable stay usable. Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import re
import stat
from dataclasses import dataclass
from typing import Any

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.inspector.read.weighted_cache import WeightedLRU

# A line start that is not a payload line: an envelope, garbage, or an empty line (`is_blank`:
# tlparse drops empty lines, CRLF ones included, wherever they are, so one inside a payload does not
# end it; they are rare, and filtering them here keeps the regex a plain one). The lookahead leaves
# that line's first byte unconsumed, so an empty line does not hide the line after it
LINE_START_RE = re.compile(rb"\n(?=[^\t])")


def is_blank(buf: Any, at: int) -> bool:
    """Whether the line starting at `at` is empty (LF or CRLF)."""
    c = buf[at : at + 1]
    return c == b"\n" or (c == b"\r" and buf[at + 1 : at + 2] == b"\n")


# The longest first line of a record (the envelope: glog prefix and JSON metadata) the reader
# reads. Ours are under 1 KB and torch's under 30 KB (tlparse's test logs: 25 KB at most); a
# longer line (a writer killed mid-line, garbage, someone hostile) is one ReadError and is never
# copied, parsed or kept mapped: scanning it costs a few times this, not its length.
ENVELOPE_LINE_LIMIT = 1 << 20
# How much of an overlong line is searched for its end at once (then those pages are released).
_SKIP_CHUNK = 4 << 20
_PAYLOAD_CACHE_SIZE = 48
# decoded payloads cost several times their bytes: keep at most this many payload bytes per log
_PAYLOAD_CACHE_BYTES = 16 << 20
_EMPTY_MD5 = hashlib.md5(b"").hexdigest()  # an empty payload may be written without a payload line
# off: every line is read the one general way (tests compare the two on real logs)
FAST_SKIMMED_LINES = True


def open_regular(path: str, *, base: str | None = None):
    """Open `path` for reading in binary mode, only if it is a regular file (a FIFO or a device
    named like a log would block or never end) and, with `base`, only if it resolves inside `base`
    (a link out of a capture directory is not followed). Raises OSError with a one-line reason."""
    if base is not None:
        real, root = os.path.realpath(path), os.path.realpath(base)
        if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
            raise OSError(f"a link to {real}, outside {root}; not followed")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError("not a regular file")
        if hasattr(os, "O_NONBLOCK"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def kind_problem(kind: str, env: dict[str, Any] | bytes) -> str | None:
    """Why a record of this kind cannot be read (None: it can): an unknown gti_* kind, or one of
    ours with another payload encoding than the format's."""
    if not kind.startswith("gti_") or not isinstance(env, dict):
        return None  # torch's (a skimmed envelope is one of torch's)
    expected = logformat.KINDS.get(kind)
    if expected is None:
        return f"unknown record kind {kind!r} (written by a newer graphtrain-inspect?)"
    art = env.get("artifact")
    encoding = art.get("encoding") if isinstance(art, dict) else None
    if encoding != expected:
        return f"{kind} record with encoding {encoding!r}, expected {expected!r}"
    return None


@dataclass(frozen=True)
class ReadError:
    """A problem reading the input: one line, naming the file and the line."""

    path: str
    line: int | None
    message: str
    rank: int | None = None

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.message}"


class Record:
    """One record of a log: where it is and its envelope; the payload is read on demand, and the
    envelope of a skimmed kind (`logformat.SKIMMED_KINDS`) when it is first read."""

    __slots__ = ("index", "kind", "offset", "payload_start", "end", "_env")

    def __init__(self, index: int, kind: str, offset: int, payload_start: int, end: int, env: dict[str, Any] | bytes):
        self.index = index
        self.kind = kind  # our artifact name (gti_pass ...), torch's artifact name, or torch's envelope key
        self.offset = offset  # first byte of the envelope line
        self.payload_start = payload_start  # first byte of the payload lines (== end when there is none)
        self.end = end  # first byte after the record
        self._env = env  # the envelope, or a skimmed one's JSON text

    def __repr__(self) -> str:
        return f"Record(index={self.index}, kind={self.kind!r}, offset={self.offset}, end={self.end})"

    @property
    def env(self) -> dict[str, Any]:
        env = self._env
        if isinstance(env, bytes):
            env = self._env = logformat.decode_skimmed(env)
        return env

    @property
    def meta(self) -> dict[str, Any]:
        """The artifact object (our index keys: gid, seq, nodes ...) or torch's metadata object."""
        art = self.env.get("artifact")
        if isinstance(art, dict):
            return art
        v = self.env.get(self.kind)
        return v if isinstance(v, dict) else {}

    @property
    def rank(self) -> int | None:
        r = self.env.get("rank")
        return r if isinstance(r, int) else None

    @property
    def compile_id(self) -> str | None:
        return logformat.compile_id_of(self.env)

    @property
    def has_payload(self) -> bool:
        return self.end > self.payload_start

    @property
    def payload_bytes(self) -> int:
        return self.end - self.payload_start


class LogFile:
    """Index of one log file. `records` in file order; `errors` found so far (scan and decode)."""

    def __init__(
        self,
        path: str,
        *,
        rank: int | None = None,
        ours: bool | None = None,
        base: str | None = None,
        snapshot: Any = None,
    ):
        self.path = path
        self.base = base  # the capture directory: the log must resolve inside it
        # the bytes read once (inspector.read.read_once.Snapshot): this log is never opened by path
        self.snapshot = snapshot
        self.rank = rank
        self.records: list[Record] = []
        self.errors: list[ReadError] = []
        self.size = 0
        self._buf: Any = b""
        self._fh = None
        self._cache = WeightedLRU(_PAYLOAD_CACHE_BYTES, _PAYLOAD_CACHE_SIZE)
        self._bad: set[int] = set()  # records known damaged by the scan (truncated)
        self._bad_payload: set[int] = set()  # records whose payload failed to decode
        self._trailing_noted: set[int] = set()  # records read without damaged lines after them (said once)
        self._line_marks: list[tuple[int, int]] = [(0, 1)]  # (offset, line number at offset)
        self.truncated = False
        self._open()

    # -- scanning ------------------------------------------------------------------------------

    def _err(self, offset: int | None, message: str) -> None:
        line = None if offset is None else self.line_of(offset)
        self.errors.append(ReadError(self.path, line, message, self.rank))

    def _open(self) -> None:
        if self.snapshot is not None:
            try:
                self._buf = self.snapshot.read(self.path)
            except OSError as e:
                self.errors.append(ReadError(self.path, None, f"cannot read: {e.strerror or e}", self.rank))
                return
            self.size = len(self._buf)
            if self.size == 0:
                self.errors.append(ReadError(self.path, None, "empty file", self.rank))
                return
            self._scan()
            return
        try:
            self._fh = fh = open_regular(self.path, base=self.base)
            self.size = os.fstat(fh.fileno()).st_size
        except OSError as e:
            self.errors.append(ReadError(self.path, None, f"cannot read: {e.strerror or e}", self.rank))
            return
        if self.size == 0:
            self.errors.append(ReadError(self.path, None, "empty file", self.rank))
            return
        try:
            self._buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            self._buf = fh.read()
        self._scan()

    def _line_after(self, newline: int) -> int:
        """The first line start (a line not starting with a tab) after the newline at `newline`,
        searched a chunk at a time: the pages of a chunk searched in vain (a long payload line)
        are released, so what this process holds does not follow a line's length."""
        buf, size, search = self._buf, self.size, LINE_START_RE.search
        pos = newline
        while pos < size:
            stop = min(size, pos + _SKIP_CHUNK)
            look = min(size, stop + 1)  # one byte past the chunk: the lookahead of a newline at its end
            m = search(buf, pos, look)
            while m is not None and is_blank(buf, m.start() + 1):
                m = search(buf, m.start() + 1, look)
            if m is not None:
                return m.start() + 1
            if stop - newline > _SKIP_CHUNK:
                self._release(pos, stop)
            pos = stop
        return size

    def _scan(self) -> None:
        buf = self._buf
        size = self.size
        line_after = self._line_after
        start = 0
        if buf[0:1] == b"\t":
            self._err(0, "payload line before the first record")
            start = line_after(0)
        self.truncated = buf[size - 1 : size] != b"\n"
        records = self.records
        glog_match = logformat.GLOG_RE.match
        fast = FAST_SKIMMED_LINES
        while start < size:
            nl = buf.find(b"\n", start, start + ENVELOPE_LINE_LIMIT + 2)
            if nl < 0 and size - start > ENVELOPE_LINE_LIMIT + 1:
                nl = self._overlong(start, size)
                start = line_after(nl) if nl >= 0 else size
                continue
            line_end = size if nl < 0 else nl
            line = buf[start:line_end] if nl < 0 else logformat.envelope_line(buf[start:line_end])
            if not line:  # empty lines at the start of the file: tlparse skips them, so do we
                start = line_after(line_end) if nl >= 0 else size
                continue
            problem = None
            env: Any = None
            glog = glog_match(line)
            if glog is None:
                problem = f"not a structured-log line: {preview(line)}"
            else:
                try:
                    kind, env = logformat.scan_envelope(line, glog)
                except logformat.FormatError as e:
                    problem = f"truncated record (file ends mid-line): {e}" if nl < 0 else str(e)
                else:
                    # a skimmed record (torch's: no payload length, no problem of ours) whose next
                    # line is no payload line and not empty: the record the steps below make of
                    # it, without them (most of the lines of torch's logs beside a make_fx
                    # capture: describe_tensor, guard_added_fast ...)
                    if (
                        fast
                        and type(env) is bytes
                        and nl >= 0
                        and buf[nl + 1 : nl + 2] != b"\t"
                        and not is_blank(buf, nl + 1)
                    ):
                        records.append(Record(len(records), kind, start, nl + 1, nl + 1, env))
                        start = nl + 1
                        continue
                    problem = kind_problem(kind, env)
            if problem is not None:
                self._err(start, problem)
                start = line_after(line_end) if nl >= 0 else size
                continue
            nxt = self._payload_end(env, nl) if nl >= 0 else size
            if nxt is None:
                nxt = line_after(line_end)
            payload_start = min(line_end + 1, nxt)
            end = self._payload_region_end(kind, payload_start, nxt)
            records.append(Record(len(records), kind, start, payload_start, blank_tail(buf, payload_start, end), env))
            start = nxt
        if self.truncated and records and records[-1].end == size:
            self._check_final(records[-1])

    def _overlong(self, start: int, end: int) -> int:
        """Report the line at `start`, longer than ENVELOPE_LINE_LIMIT, and find its newline before
        `end` (-1: none) a chunk at a time, releasing each chunk's pages as it goes."""
        nl = self._newline_in(start + ENVELOPE_LINE_LIMIT, end)
        length = (nl if nl >= 0 else end) - start
        self._err(
            start,
            f"a line of {length / (1 << 20):.1f} MB, longer than the {ENVELOPE_LINE_LIMIT >> 20} MB a record's "
            f"first line may have: not read ({preview(bytes(self._buf[start : start + 60]))})",
        )
        return nl

    def _newline_in(self, pos: int, end: int) -> int:
        """The first newline in [pos, end) (-1: none), looked for a chunk at a time, each chunk's
        pages released as it goes (the line can be as long as the log)."""
        buf = self._buf
        while pos < end:
            stop = min(end, pos + _SKIP_CHUNK)
            nl = buf.find(b"\n", pos, stop)
            self._release(pos, stop)
            if nl >= 0:
                return nl
            pos = stop
        return -1

    def _payload_region_end(self, kind: str, payload_start: int, nxt: int) -> int:
        """Where the payload of a `kind` record in [payload_start, nxt) ends: `nxt`, or the start of
        its first line over logformat.PAYLOAD_LINE_LIMIT (said as a reading problem: the line and
        what follows it in the region are not read, the record is read without them)."""
        if nxt - payload_start <= logformat.PAYLOAD_LINE_LIMIT:
            return nxt
        long = self._long_line(payload_start, nxt)
        if long is None:
            return nxt
        self._err(
            long[0],
            f"a payload line of {long[1] / (1 << 20):.1f} MB at byte offset {long[0]}, longer than the "
            f"{logformat.PAYLOAD_LINE_LIMIT >> 20} MB a payload line may have: not read (the {kind} record "
            "before it is read without it)",
        )
        return long[0]

    def _long_line(self, lo: int, hi: int) -> tuple[int, int] | None:
        """The first line in [lo, hi) longer than logformat.PAYLOAD_LINE_LIMIT, as (offset, length),
        or None. Only a region longer than the limit is looked at: its newlines are found at memchr
        speed, a limit's worth at most at once, and the pages looked at are released."""
        buf, limit = self._buf, logformat.PAYLOAD_LINE_LIMIT
        pos = lo
        while pos < hi:
            stop = min(hi, pos + limit + 1)
            nl = buf.find(b"\n", pos, stop)
            self._release(pos, stop)
            if nl >= 0:
                pos = nl + 1
                continue
            if stop - pos <= limit:
                return None  # the region's last line, without its newline, and short
            nl = self._newline_in(stop, hi)
            return pos, (nl if nl >= 0 else hi) - pos
        return None

    def _release(self, start: int, end: int) -> None:
        """Drop the pages of [start, end) from this process's memory (they stay in the page cache
        and come back when a payload is read): what the process holds is the index, not the file."""
        advise = getattr(self._buf, "madvise", None)
        flag = getattr(mmap, "MADV_DONTNEED", None)
        if advise is None or flag is None:
            return
        page = mmap.PAGESIZE
        a = (start // page) * page
        b = (end // page) * page
        if b > a:
            try:
                advise(flag, a, b - a)
            except (OSError, ValueError):
                pass

    def _check_final(self, rec: Record) -> None:
        """The last record of a file that does not end with a newline: whole when its envelope
        parsed and its payload's md5 matches (tlparse reads it so), else truncated."""
        md5 = rec.env.get("has_payload")
        if not isinstance(md5, str) or (self.payload_lines(rec) is not None if rec.has_payload else md5 == _EMPTY_MD5):
            return
        self._err(rec.offset, f"last record ({rec.kind}) is truncated: the file ends mid-line")
        self._bad.add(rec.index)

    def _payload_end(self, env: dict[str, Any] | bytes, newline: int) -> int | None:
        """Where the record whose envelope line ends at `newline` ends, from the payload length its
        writer put in the envelope (format 2), when the bytes there agree: the payload starts with
        a tab and ends with a newline that starts a line of no tab. None: look for the next line
        start (format 1, torch's own logs, a skimmed envelope, or a damaged record)."""
        if not isinstance(env, dict):
            return None  # a skimmed envelope: torch's, which writes no payload length
        art = env.get("artifact")
        n = art.get(logformat.PAYLOAD_BYTES) if isinstance(art, dict) else None
        if type(n) is not int or n < 2:
            return None
        buf, end = self._buf, newline + 1 + n
        if buf[newline - 1 : newline] == b"\r":  # a CRLF copy: the lengths are not the writer's
            return None
        if end > self.size or buf[newline + 1 : newline + 2] != b"\t" or buf[end - 1 : end] != b"\n":
            return None
        if end < self.size and buf[end : end + 1] == b"\t":
            return None
        return end

    # -- lines ---------------------------------------------------------------------------------

    def line_of(self, offset: int) -> int:
        """1-based line number of the byte at `offset` (counted lazily, cached by position)."""
        best = (0, 1)
        for mark in self._line_marks:
            if mark[0] <= offset and mark[0] >= best[0]:
                best = mark
        line = best[1]
        for a in range(best[0], offset, _SKIP_CHUNK):  # in chunks: an overlong line may lie between
            line += bytes(self._buf[a : min(offset, a + _SKIP_CHUNK)]).count(b"\n")
            if offset - best[0] > _SKIP_CHUNK:
                self._release(a, min(offset, a + _SKIP_CHUNK))  # a long way: hold no more than a chunk
        self._line_marks.append((offset, line))
        if len(self._line_marks) > 64:
            self._line_marks = sorted(self._line_marks)[-32:]
        return line

    # -- payloads ------------------------------------------------------------------------------

    def raw_payload(self, rec: Record) -> bytes:
        """The payload lines as tlparse reads them (tabs on, CRLF ends and empty lines dropped),
        without the final newline."""
        raw, ended = self._stored_payload(rec)
        return logformat.payload_region(raw, ended=ended)

    def _stored_payload(self, rec: Record) -> tuple[bytes, bool]:
        """The payload's bytes as stored, without its final newline, and whether it had one."""
        end = rec.end
        ended = end > rec.payload_start and self._buf[end - 1 : end] == b"\n"
        return bytes(self._buf[rec.payload_start : end - 1 if ended else end]), ended

    def payload_lines(self, rec: Record) -> list[bytes] | None:
        """The payload's lines (tabs off), undecoded, when their md5 matches the envelope's; None
        otherwise (then `payload` reads the record, with its repairs and its error lines)."""
        got = self.payload_text(rec)
        return got[1] if got is not None else None

    def payload_bytes(self, rec: Record) -> bytes | None:
        """The text of `payload_text` alone, for readers that hash or search it whole: the stored
        bytes with every tab deleted (one C pass, no list of lines) when that text's md5 is the
        envelope's. A JSON payload (node tables, symbol maps) holds no tab but the one that starts
        each line, so that is the same text; a payload that holds others, or empty lines, fails
        the md5 and is read by `payload_text`."""
        md5 = rec.env.get("has_payload")
        if not rec.has_payload or not isinstance(md5, str) or rec.index in self._bad or rec.index in self._bad_payload:
            return None
        raw = self._stored_payload(rec)[0]
        if raw[:1] == b"\t" and b"\r" not in raw:
            text = raw.translate(None, b"\t")
            if hashlib.md5(text).hexdigest() == md5:
                return text
        got = self.payload_text(rec)
        return got[0] if got is not None else None

    def stored_span(self, rec: Record) -> tuple[Any, int, int] | None:
        """(the log's buffer, first byte, end) of the record's payload as stored, for readers that
        find its lines by their lengths (`gti_row_digests`) and check each one they read; None for
        a record without a payload or one known damaged."""
        if not rec.has_payload or rec.index in self._bad or rec.index in self._bad_payload:
            return None
        return self._buf, rec.payload_start, rec.end

    def payload_text(self, rec: Record) -> tuple[bytes, list[bytes]] | None:
        """`payload_lines`, and the lines joined with newlines (what the md5 is of), for readers
        that search the whole payload: one join serves both."""
        md5 = rec.env.get("has_payload")
        if not rec.has_payload or not isinstance(md5, str) or rec.index in self._bad or rec.index in self._bad_payload:
            return None
        raw, ended = self._stored_payload(rec)
        lines = raw.split(b"\n\t") if raw[:1] == b"\t" and b"\r" not in raw else None
        if lines is None or raw.count(b"\n") != len(lines) - 1:
            # not every newline starts a tabbed line (an empty line, a CRLF copy): the region as
            # tlparse reads it first. Else the bytes are that region already, which this count
            # (one byte, at memchr speed) tells at a third of the cost of looking for b"\n\n".
            raw = logformat.payload_region(raw, ended=ended)
            if raw[:1] != b"\t":
                return None
            # every payload line starts with a tab (a line that does not starts a record): one
            # split takes the lines and their tabs off (the first one's after it: no copy)
            lines = raw.split(b"\n\t")
        lines[0] = lines[0][1:]
        text = b"\n".join(lines)
        if hashlib.md5(text).hexdigest() != md5:
            return None
        return text, lines

    def payload(self, rec: Record, *, verify: bool = True) -> Any:
        """The decoded payload, or None when the record has none or it is damaged (then an error)."""
        cached = self._cache.get(rec.index)
        if cached is not None:
            return cached
        if rec.index in self._bad_payload:
            return None
        if not rec.has_payload:
            md5 = rec.env.get("has_payload")
            if isinstance(md5, str) and md5 != _EMPTY_MD5 and rec.index not in self._bad:
                self._bad_payload.add(rec.index)
                self._err(rec.offset, f"{rec.kind}: the record has no payload lines (cut off or damaged)")
            return None
        if not isinstance(rec.env.get("has_payload"), str):
            # A writer sets has_payload whenever there is a payload (ours and torch's): these lines
            # belong to a record whose envelope line is gone, not to this one.
            if rec.index not in self._trailing_noted:
                self._trailing_noted.add(rec.index)
                self._err(
                    rec.payload_start,
                    f"payload line(s) after the {rec.kind} record at line {self.line_of(rec.offset)}, "
                    "which has none (a damaged or missing envelope line); ignored",
                )
            return None
        # the text its md5 vouches for, by one C pass where it can be (a 12 MB graph code: a
        # split and a join of its 110k lines took 0.09 s); else read below, line by line, with
        # the repairs and the error line
        text = self.payload_bytes(rec)
        if text is not None:
            try:
                value = logformat.decode_payload_text(text, rec.env, verify=False)
            except logformat.FormatError:
                pass
            else:
                self._cache.put(rec.index, value, rec.end - rec.payload_start)
                return value
        lines = self.raw_payload(rec).split(b"\n")
        try:
            value = logformat.decode_payload(lines, rec.env, verify=verify)
        except logformat.FormatError as e:
            value = self._decode_prefix(rec, lines, verify) if verify else None
            if value is None:
                self._bad_payload.add(rec.index)
                if rec.index not in self._bad:  # a truncated last record was reported by the scan
                    self._err(rec.offset, f"{rec.kind}: {e}")
                return None
        self._cache.put(rec.index, value, rec.end - rec.payload_start)
        return value

    def _decode_prefix(self, rec: Record, lines: list[bytes], verify: bool) -> Any:
        """The payload when its md5 matches the first lines only: lines of damage that follow a
        whole record (garbage starting with a tab, a deleted envelope line whose payload lines
        fall under the record before it) must not cost the record. None if no prefix matches."""
        expected = rec.env.get("has_payload")
        if not isinstance(expected, str) or len(lines) < 2:
            return None
        h = hashlib.md5()
        for i, line in enumerate(lines[:-1]):
            if i:
                h.update(b"\n")
            h.update(line[1:] if line.startswith(b"\t") else line)
            if h.copy().hexdigest() == expected:
                try:
                    value = logformat.decode_payload(lines[: i + 1], rec.env, verify=False)
                except logformat.FormatError:
                    return None
                if rec.index in self._trailing_noted:
                    return value
                self._trailing_noted.add(rec.index)
                extra = sum(len(l) + 1 for l in lines[: i + 1])
                self._err(
                    rec.payload_start + extra,
                    f"{len(lines) - i - 1} payload line(s) after the {rec.kind} record at line "
                    f"{self.line_of(rec.offset)} do not belong to it (damaged); the record is read without them",
                )
                return value
        return None

    def verify(self) -> int:
        """Decode every payload (md5 checked); return how many are damaged. Errors are recorded."""
        bad = 0
        for rec in self.records:
            if rec.has_payload and self.payload(rec) is None:
                bad += 1
        return bad

    def close(self) -> None:
        self._cache.clear()
        if isinstance(self._buf, mmap.mmap):
            try:
                self._buf.close()
            except BufferError:
                pass
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def blank_tail(buf: Any, lo: int, hi: int) -> int:
    """`hi` (the start of the next record's line) moved back over the empty lines (LF or CRLF)
    that end the region [lo, hi) after a record's envelope line: they belong to no record, and a
    record with nothing else after it has no payload."""
    while hi > lo and buf[hi - 1 : hi] == b"\n":
        if buf[hi - 2 : hi - 1] == b"\n" and hi - 2 >= lo - 1:
            hi -= 1
        elif buf[hi - 3 : hi - 1] == b"\n\r" and hi - 3 >= lo - 1:
            hi -= 2
        else:
            break
    return hi


def preview(line: bytes, n: int = 60) -> str:
    text = line[:n].decode("utf-8", "replace")
    return repr(text + ("..." if len(line) > n else ""))
