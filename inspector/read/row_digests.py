"""A node table's `gti_row_digests` record laid over the table's stored payload.

The record (capture/shared/row_digests.py) gives each row's digest, the rows of each subgraph and the
byte length of every payload line, so a reader can say which rows of two tables differ by
comparing digests, and read those rows alone straight from the log, without the md5 check and
split of the whole payload that reading the table costs. Each row read this way is checked
against its digest, and every subgraph head and the table's first and last lines are read and
checked for their form when the record is laid over the payload; a row that is never read is
taken to be what its digest says (the record's own md5 is checked as any payload's). Anything
that does not fit gives None, and the reader reads the table whole as before.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import re
from operator import add, ne
from typing import TYPE_CHECKING, Any, Callable, Sequence, overload

import orjson

from graphtrain_inspect.capture.shared import logformat, rank_tokens, row_digests

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.read.logscan import LogFile, Record

_LIST = {list}
_INT = {int}
# a stored row line's start to its target: name, op and target, strings, in the capture's order
# (a JSON string's body written as runs of plain characters between escapes: the same strings as
# `(?:[^"\\\n]|\\.)*`, matched 3.4x faster)
_BODY = rb'[^"\\\n]*(?:\\.[^"\\\n]*)*'
_STR = rb'"' + _BODY + rb'"'
_ROW_TARGET = re.compile(rb'\n\t\{"name":' + _STR + rb',"op":' + _STR + rb',"target":"(' + _BODY + rb')"')


class RowDigests:
    """Where each line of one stored node table is, and each row's digest."""

    __slots__ = (
        "_buf",
        "_starts",
        "_lens",
        "counts",
        "_line0",
        "_row0",
        "_raw",
        "_digests",
        "heads",
        "_begin",
        "_end",
        "_refs",
        "_cmp",
        "_norm",
        "rewrites",
    )

    def __init__(
        self,
        buf: Any,
        starts: list[int],
        lens: list[int],
        counts: list[int],
        digests: bytes,
        refs: "Refs | None" = None,
        norm: tuple[bytes, rank_tokens.Rewrites] | None = None,
    ):
        self._buf = buf
        # the normalized digests and the rewrites they were made with (`normalized`), or None
        self._norm = norm
        self.rewrites: rank_tokens.Rewrites | None = None  # in a normalized view: its rewrites
        self._refs = refs  # the record's "refs" (decoded when first asked for: `Refs`), or None
        self._starts = starts
        self._lens = lens
        self.counts = counts
        # each subgraph's first row: its line number, and its index among all rows (a subgraph's
        # head and closing line come before and after its rows)
        self._line0 = list(itertools.accumulate((n + 2 for n in counts[:-1]), initial=2))
        self._row0 = list(itertools.accumulate(counts[:-1], initial=0))
        self._raw = digests  # what each row read is checked against
        self._cmp = digests  # what rows are compared by: the digests, or the normalized ones
        self._digests = memoryview(digests).cast("Q")
        self.heads = [self.line(ln - 1) for ln in self._line0]
        self._begin = starts[0]
        self._end = starts[-1] + lens[-1]

    def normalized(self, rewrites: rank_tokens.Rewrites | None) -> "RowDigests | None":
        """This table compared by its rows' normalized digests: where the record has them and they
        were made with `rewrites` (what the reader's normalizer of this rank rewrites, as
        `rank_tokens.digest_rewrites` gives it), else None. Rows are still read and checked by
        their digests."""
        if self._norm is None or rewrites is None or self._norm[1] != rewrites:
            return None
        view = copy.copy(self)
        view._cmp = self._norm[0]
        view._digests = memoryview(self._norm[0]).cast("Q")
        view.rewrites = rewrites
        return view

    def line(self, n: int) -> bytes:
        a = self._starts[n]
        return bytes(self._buf[a : a + self._lens[n]])

    def row(self, sub: int, i: int) -> bytes | None:
        """Row i of subgraph `sub` as `node_table_rows` gives it; None when its bytes are not
        what its digest says (the log changed or is damaged)."""
        line = self.line(self._line0[sub] + i)
        g = (self._row0[sub] + i) * row_digests.DIGEST_BYTES
        if row_digests.row_digest(line) != self._raw[g : g + row_digests.DIGEST_BYTES]:
            return None
        return line

    def sub_digests(self, sub: int) -> Sequence[int]:
        """Each row's digest of subgraph `sub`, as an integer (equal digests, equal integers)."""
        return self._digests[self._row0[sub] : self._row0[sub] + self.counts[sub]]

    def sub_refs(self, sub: int) -> list[list[int]] | None:
        """Each row's refs of subgraph `sub` (capture/shared/row_digests.py `row_refs`: the row numbers
        of the nodes its arguments name, -1 for no row); None where the record has none or they
        are not lists of row numbers of this subgraph."""
        refs = self._refs.get() if self._refs is not None else None
        if not (isinstance(refs, list) and len(refs) == self._row0[-1] + self.counts[-1]):
            return None  # optional: the digests hold without them
        out = refs[self._row0[sub] : self._row0[sub] + self.counts[sub]]
        n = self.counts[sub]
        # at C speed: every row's refs a list, every ref an int (a bool is no row number)
        if not set(map(type, out)) <= _LIST:
            return None
        flat = list(itertools.chain.from_iterable(out))
        if not set(map(type, flat)) <= _INT:
            return None
        if flat and (min(flat) < -1 or max(flat) >= n):
            return None
        return out

    def shared(self, other: "RowDigests") -> int:
        """How many of this table's row digests `other` has too."""
        return len(set(self._digests).intersection(other._digests))

    def differing(self, other: "RowDigests") -> list[tuple[int, int]]:
        """(subgraph, row) of the rows whose digests differ from `other`'s at the same place
        (tables of the same layout)."""
        if self._cmp == other._cmp:
            return []
        rows = itertools.compress(itertools.count(), map(ne, self._digests, other._digests))
        return [self._place(g) for g in rows]

    def rows_with(self, tokens: list[bytes]) -> set[tuple[int, int]]:
        """(subgraph, row) of the rows whose line holds one of `tokens`, found at C speed in the
        stored payload (heads and the table's other lines left out)."""
        out: set[tuple[int, int]] = set()
        buf, starts = self._buf, self._starts
        for tok in tokens:
            at = buf.find(tok, self._begin, self._end)
            while at >= 0:
                n = bisect.bisect_right(starts, at) - 1
                k = bisect.bisect_right(self._line0, n) - 1
                if k >= 0 and n < self._line0[k] + self.counts[k]:
                    out.add((k, n - self._line0[k]))
                at = buf.find(tok, starts[n] + self._lens[n], self._end)
        return out

    def rows_by_target(self, keep: Callable[[str], bool]) -> list[tuple[int, int]] | None:
        """(subgraph, row) of the rows whose target `keep` accepts, read from the start of each
        stored row line (`{"name":...,"op":...,"target":"..."`, the capture's key order) in one
        scan of the payload at C speed, each distinct target decoded once: what the decoded row's
        target would be. None where a row line does not start so (a target that is no string):
        then read the rows. Not checked against their digests: `row` checks a row read."""
        out: list[tuple[int, int]] = []
        decided: dict[bytes, bool] = {}
        starts, lens = self._starts, self._lens
        for k, n in enumerate(self.counts):
            if not n:
                continue
            first = self._line0[k]
            # each line is stored as a tab, the line, a newline: a match starts one row line, and
            # the range holds this subgraph's row lines alone, so n matches are its n rows in order
            raws = _ROW_TARGET.findall(self._buf, starts[first] - 2, starts[first + n - 1] + lens[first + n - 1])
            if len(raws) != n:
                return None
            targets = set(raws)
            for raw in targets.difference(decided):
                try:
                    decided[raw] = keep(orjson.loads(b'"' + raw + b'"'))
                except orjson.JSONDecodeError:
                    return None
            kept = {raw for raw in targets if decided[raw]}
            out.extend((k, i) for i in itertools.compress(range(n), map(kept.__contains__, raws)))
        return out

    def named(self, sub: int, head: bytes) -> list[int]:
        """The rows of subgraph `sub` whose line starts with `head` (a row's `{"name":NAME,`),
        found at C speed in the stored payload; at most two (a caller wants exactly one). Not
        checked against their digests: `row` checks a row read."""
        first = self._line0[sub]
        if not self.counts[sub]:
            return []
        last = first + self.counts[sub] - 1
        # each line is stored as a tab, the line, a newline: a row's start follows "\n\t"
        lo, hi = self._starts[first] - 2, self._starts[last] + self._lens[last]
        needle = b"\n\t" + head
        out: list[int] = []
        at = self._buf.find(needle, lo, hi)
        while at >= 0 and len(out) < 2:
            n = bisect.bisect_left(self._starts, at + 2)
            if n <= last and self._starts[n] == at + 2:
                out.append(n - first)
            at = self._buf.find(needle, at + 1, hi)
        return out

    def sub_lines(self, sub: int) -> "SubLines":
        """Subgraph `sub`'s row lines as `node_table_rows` gives them, each read when indexed."""
        return SubLines(self, sub)

    def _place(self, g: int) -> tuple[int, int]:
        # the last subgraph starting at or before row g (an empty one before it starts there too)
        k = bisect.bisect_right(self._row0, g) - 1
        return k, g - self._row0[k]


class SubLines(Sequence[bytes]):
    """One subgraph's row lines, read from the stored payload as they are indexed, each checked
    against its digest (ValueError where it is not what its digest says)."""

    def __init__(self, table: RowDigests, sub: int):
        self._table, self._sub = table, sub

    def __len__(self) -> int:
        return self._table.counts[self._sub]

    @overload
    def __getitem__(self, i: int) -> bytes: ...
    @overload
    def __getitem__(self, i: slice) -> list[bytes]: ...
    def __getitem__(self, i: int | slice) -> bytes | list[bytes]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        line = self._table.row(self._sub, i % len(self))
        if line is None:
            raise ValueError(f"row {i} of subgraph {self._sub} is not what its digest says")
        return line


def _norm_digests(v: dict, nodes: "Record", size: int) -> tuple[bytes, rank_tokens.Rewrites] | None:
    """The record's normalized digests with the rewrites the table's envelope says its normalized
    hash was made with (the same the capture made these with); None where either is missing or
    not of its form (optional: the digests hold without them)."""
    hexed = v.get("norm_digests")
    rw = rank_tokens.recorded_rewrites(nodes.meta.get(rank_tokens.NORM))
    if not isinstance(hexed, str) or len(hexed) != 2 * size or rw is None:
        return None
    try:
        return bytes.fromhex(hexed), rw
    except ValueError:
        return None


class Refs:
    """A record's "refs", decoded when first asked for: a rank diff of two tables that line up
    never reads them, and reading rank 0's 7 records of the 30k-node benchmark capture takes
    28.6 ms without them against 40.9 ms whole (`python -m benchmarks record-cost`). Where they
    do not parse, the record is read whole then, so that the reading problem is named as it
    would have been."""

    __slots__ = ("_text", "_value", "_log", "_record")

    def __init__(self, value: Any = None, text: bytes | None = None, log: "LogFile | None" = None, record: Any = None):
        self._value, self._text, self._log, self._record = value, text, log, record

    def get(self) -> Any:
        if self._text is not None:
            text, self._text = self._text, None
            try:
                self._value = orjson.loads(text)
            except orjson.JSONDecodeError:
                self._value = None
                if self._log is not None:
                    self._log.payload(self._record)  # names the damage
        return self._value


def payload_and_refs(log: "LogFile", record: "Record") -> tuple[Any, Refs | None]:
    """The record's payload, its "refs" apart (`Refs`): where its text reads back (md5) and holds
    them where the capture writes them (after "digests", before "norm_digests" or the end: a list
    of lists of integers, which holds neither key), they are left undecoded; a payload without
    them is decoded whole from the same text. Else the payload as `log.payload` reads it (which
    names a reading problem), its refs decoded with it."""
    got = log.payload_text(record)
    if got is not None:
        text = got[0]
        at = text.find(b',"refs":[')
        end = text.find(b'],"norm_digests":', at) + 1 if at >= 0 else -1
        if at >= 0 and end <= 0:
            end = len(text) - 1 if text.endswith(b"]}") else -1
        try:
            if at < 0:
                v = orjson.loads(text)
                return v, Refs(value=v["refs"]) if isinstance(v, dict) and "refs" in v else None
            if end > at:
                head = orjson.loads(text[:at] + text[end:])
                if isinstance(head, dict) and "refs" not in head:
                    return head, Refs(text=text[at + len(b',"refs":') : end], log=log, record=record)
        except orjson.JSONDecodeError:
            pass
    v = log.payload(record)
    return v, Refs(value=v["refs"]) if isinstance(v, dict) and "refs" in v else None


def laid_over(log: "LogFile", nodes: "Record", record: "Record", gid: str) -> RowDigests | None:
    """The record's digests over the `gti_nodes` record `nodes` of graph `gid`, or None where the
    record is of another hash or form, or does not fit the stored table line for line."""
    if record.meta.get("hash") != row_digests.HASH:
        return None
    v, refs = payload_and_refs(log, record)
    if not isinstance(v, dict) or v.get("gid") != gid or v.get("hash") != row_digests.HASH:
        return None
    counts, lens, hexed = v.get("rows"), v.get("lines"), v.get("digests")
    if not (isinstance(counts, list) and counts and isinstance(lens, list) and isinstance(hexed, str)):
        return None
    # C-speed checks (a row per line: ~35k lengths); a bool is an int here, and a length it makes
    # wrong fails the sums below or the digest of the row read
    if not (all(map(isinstance, counts, itertools.repeat(int))) and all(map(isinstance, lens, itertools.repeat(int)))):
        return None
    if len(lens) != 2 + sum(counts) + 2 * len(counts) or len(hexed) != 2 * row_digests.DIGEST_BYTES * sum(counts):
        return None
    if min(counts) < 0 or min(lens) < 0:
        return None
    try:
        digests = bytes.fromhex(hexed)
    except ValueError:
        return None
    span = log.stored_span(nodes)
    if span is None:
        return None
    buf, begin, end = span
    # each line is stored as a tab, the line, a newline
    starts = list(itertools.accumulate(map(add, lens[:-1], itertools.repeat(2)), initial=begin + 1))
    if starts[-1] + lens[-1] + 1 != end or buf[begin : begin + 1] != b"\t":
        return None
    table = RowDigests(buf, starts, lens, counts, digests, refs, _norm_digests(v, nodes, len(digests)))
    first = table.line(0)
    if not first.startswith(b'{"gid":"' + gid.encode() + b'",') or not first.endswith(logformat.TABLE_HEAD):
        return None
    if table.line(len(lens) - 1) != b"]}" or not all(h.endswith(logformat.SUB_TAIL) for h in table.heads):
        return None
    return table
