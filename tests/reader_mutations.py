"""Damage a real capture log and check what the reader keeps: the shared core of the property test
(tests/read/test_reader_fuzz.py) and the longer fuzz run (benchmarks/fuzz_reader.py).

    base = Baseline.of(capture_dir, rank=0)          # the log as captured, read once
    damaged = mutate(base.data, [("flip", 1234, 7), ("delete_line", 40)])
    result = base.check(work_dir, damaged)            # writes the damaged log, reads it back
    result.lost                                       # records before the damage that are gone
    result.crash                                      # an exception from the reader, if any

The damage point is the first byte where the damaged log differs from the original. Every record
that ends before it is byte-for-byte intact, so the reader must return it exactly as before: at
the log level (the record at the same offset decodes to the same payload) and through the
Capture (its pass with the same name, graphs and status; its graph's code and node table; the
header). Records at or after the damage may be lost; each lost one must cost an error line that
names the file. Nothing may raise. No torch here.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from typing import Any

import orjson

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.inspector.errors import CaptureUnreadable
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.logscan import LogFile

# Mutations: (op, ...) tuples, applied in order; positions are taken modulo the current length.
#   ("truncate", pos)            keep the first pos bytes (a rank killed mid-write)
#   ("flip", pos, xor)           one byte xor-ed with 1..255
#   ("delete_line", i)           remove line i (with its newline)
#   ("dup_line", i)              write line i twice
#   ("insert", pos, data)        insert bytes (garbage, an enormous line, a stray envelope)
#   ("json", record_i, path_i, value)   consistent damage: one value inside a JSON payload is
#                                replaced and the record's md5 recomputed (a log someone edited)

GARBAGE = [
    b"\n",
    b"\t",
    b"\n\t",
    b"garbage line\n",
    b"\x00\xff\xfe binary \x80\n",
    b"V1121 20:55:01.123456 4242 graphtrain_inspect/capture.py:1] {\n",
    b"V1121 20:55:01.123456 4242 graphtrain_inspect/capture.py:1] "
    b'{"artifact":{"name":"gti_pass","encoding":"json","seq":99},'
    b'"rank":0,"has_payload":"00000000000000000000000000000000"}\n\t{}\n',
    b"V1121 20:55:01.123456 4242 graphtrain_inspect/capture.py:1] "
    b'{"artifact":{"name":"gti_future","encoding":"json"},"rank":0}\n',
    b"V1121 20:55:01.123456 4242 graphtrain_inspect/capture.py:1] "
    b'{"artifact":{"name":"gti_pass","encoding":"base64"},"rank":0}\n\tAAAA\n',
    b'V1121 20:55:01.123456 4242 graphtrain_inspect/capture.py:1] {"dynamo_start":{"stack":[]},"rank":0}\n',
    b"\r\n",
]


def mutate(data: bytes, ops: list[tuple]) -> bytes:
    out = data
    for op in ops:
        kind = op[0]
        n = len(out)
        if kind == "truncate":
            out = out[: op[1] % (n + 1)]
        elif kind == "flip" and n:
            i = op[1] % n
            out = out[:i] + bytes([out[i] ^ (op[2] % 255 + 1)]) + out[i + 1 :]
        elif kind in ("delete_line", "dup_line") and n:
            lines = out.split(b"\n")
            i = op[1] % len(lines)
            if kind == "delete_line":
                del lines[i]
            else:
                lines.insert(i, lines[i])
            out = b"\n".join(lines)
        elif kind == "insert":
            i = op[1] % (n + 1)
            out = out[:i] + op[2] + out[i:]
        elif kind == "json":
            out = _json_edit(out, op[1], op[2], op[3])
    return out


def _json_edit(data: bytes, record_i: int, path_i: int, value: Any) -> bytes:
    """Replace one value inside the JSON payload of a record (the record_i-th json record), keep
    its md5 right: damage the md5 cannot see (a log edited by hand, or from another writer)."""
    recs = list(logformat.split_records(data))
    json_recs = []
    for idx, (_, line, payload) in enumerate(recs):
        try:
            env = logformat.parse_envelope_line(line)
        except logformat.FormatError:
            continue
        art = env.get("artifact")
        if isinstance(art, dict) and art.get("encoding") == "json" and len(payload) == 1:
            json_recs.append((idx, env))
    if not json_recs:
        return data
    idx, env = json_recs[record_i % len(json_recs)]
    _, line, payload = recs[idx]
    try:
        doc = orjson.loads(payload[0][1:])
    except orjson.JSONDecodeError:
        return data
    slots = list(_slots(doc))
    if not slots:
        return data
    container, key = slots[path_i % len(slots)]
    container[key] = value
    body = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()  # any int size, unlike orjson
    new_md5 = hashlib.md5(body).hexdigest()
    old_md5 = env.get("has_payload")
    new_line = line.replace(old_md5.encode(), new_md5.encode()) if isinstance(old_md5, str) else line
    # rebuild the file: records are whole lines, so splice by position
    start = data.find(line + b"\n" + payload[0] + b"\n")
    if start < 0:
        return data
    old = line + b"\n" + payload[0]
    return data[:start] + new_line + b"\n\t" + body + data[start + len(old) :]


def _slots(doc: Any, depth: int = 0):
    """(container, key) of values in a JSON document (7 levels, 40 per container, 400 in all)."""
    stack = [(doc, 0)]
    seen = 0
    while stack and seen < 400:
        node, d = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in list(items)[:40]:
            yield node, k
            seen += 1
            if d < 7 and isinstance(v, (dict, list)):
                stack.append((v, d + 1))


# ---------------------------------------------------------------------------------------------


@dataclass
class Result:
    damage_at: int
    before: int = 0  # records wholly before the damage
    kept: int = 0  # of those, read back exactly
    lost: list[str] = field(default_factory=list)  # of those, what went missing (should stay empty)
    crash: BaseException | None = None
    errors: int = 0  # reading problems reported
    records_after: int = 0  # records the damaged log still has in all
    unnamed_errors: list[str] = field(default_factory=list)  # errors not naming a file, or not one line
    unreadable: str | None = None  # CaptureUnreadable's line: no readable record left at all


@dataclass
class _Rec:
    offset: int
    end: int
    kind: str
    payload: Any


class Baseline:
    """One rank's log of a capture, read once as captured; `check` compares a damaged copy."""

    def __init__(self, capture_dir: str, rank: int = 0, name: str | None = None):
        """`name`: the log's file name in `capture_dir` (default: our log of `rank`; give torch's
        TORCH_TRACE log name to damage one of those: only its graphs are compared)."""
        self.capture_dir = str(capture_dir)
        self.rank = rank
        self.name = name or logformat.log_file_name(rank)
        self.path = os.path.join(self.capture_dir, self.name)
        with open(self.path, "rb") as f:
            self.data = f.read()
        log = LogFile(self.path)
        assert not log.errors, log.errors
        self.records = [_Rec(r.offset, r.end, r.kind, log.payload(r)) for r in log.records]
        log.close()
        cap = open_capture(self.capture_dir)
        self.passes = {p.seq: p for p in cap.passes(rank)}
        self.pass_end = {}
        self.graph_end: dict[str, int] = {}
        for r in self.records:
            if r.kind in (logformat.PASS, logformat.PASS_START) and isinstance(r.payload, dict):
                self.pass_end[r.payload["seq"]] = max(self.pass_end.get(r.payload["seq"], 0), r.end)
        for gid, ref in cap.graphs(rank).items():
            self.graph_end[gid] = max(rec.end for rec in ref.records.values())
        self.tables = {gid: _rows(cap.node_table(rank, gid)) for gid in self.graph_end}
        self.code = {gid: cap.graph_code(rank, gid) for gid in self.graph_end}
        self.symbols = {gid: cap.symbols(rank, gid) for gid in self.graph_end}
        self.devices = {gid: cap.devices(rank, gid) for gid in self.graph_end}
        self.header = cap.header(rank)
        self.header_end = next((r.end for r in self.records if r.kind == logformat.HEADER), None)
        self.kind = cap.kind
        cap.close()

    def work_dir(self, parent: str) -> str:
        """A copy of the capture without blobs, where `check` writes each damaged log."""
        d = os.path.join(parent, "damaged")
        if not os.path.isdir(d):
            shutil.copytree(self.capture_dir, d, ignore=shutil.ignore_patterns("*.gpkl"))
        return d

    def check(self, work_dir: str, damaged: bytes, *, deep: bool = True, semantic: bool = True) -> Result:
        """Write `damaged` as this rank's log in `work_dir` and read it back. `semantic`: also
        compare passes through the Capture (off for "json" damage, which may legitimately change
        how earlier passes are read, e.g. a later pass naming an earlier one as its parent)."""
        d = common_prefix(self.data, damaged)
        res = Result(damage_at=d)
        path = os.path.join(work_dir, self.name)
        with open(path, "wb") as f:
            f.write(damaged)
        try:
            self._check(work_dir, path, d, res, deep, semantic)
        except CaptureUnreadable as e:  # the documented one-line refusal: fine when nothing was whole
            res.unreadable = str(e)
            if res.before:
                res.lost.append(f"capture unreadable although {res.before} records before the damage are whole: {e}")
            if "\n" in str(e):
                res.unnamed_errors.append(str(e))
        except Exception as e:  # noqa: BLE001 - the property: the reader never raises
            res.crash = e
        return res

    def _check(self, work_dir: str, path: str, d: int, res: Result, deep: bool, semantic: bool) -> None:
        log = LogFile(path)
        try:
            at = {r.offset: r for r in log.records}
            res.records_after = len(log.records)
            for orig in self.records:
                if orig.end > d:
                    continue
                res.before += 1
                rec = at.get(orig.offset)
                if rec is None or rec.kind != orig.kind:
                    res.lost.append(f"log: {orig.kind} at byte {orig.offset}: not indexed")
                elif log.payload(rec) != orig.payload:
                    res.lost.append(f"log: {orig.kind} at byte {orig.offset}: payload differs or unreadable")
                else:
                    res.kept += 1
        finally:
            log.close()
        cap = open_capture(work_dir)
        try:
            r = self.rank
            if cap.kind != self.kind:
                res.lost.append(f"capture: read as {cap.kind}, not {self.kind}")
            passes = {p.seq: p for p in cap.passes(r)}
            for seq, end in self.pass_end.items():
                if end > d or not semantic:
                    continue
                a, b = self.passes[seq], passes.get(seq)
                if b is None or (a.name, a.before, a.after, a.status, a.traced) != (
                    b.name,
                    b.before,
                    b.after,
                    b.status,
                    b.traced,
                ):
                    res.lost.append(f"capture: pass #{seq} {a.name}: {'missing' if b is None else 'differs'}")
            for gid, end in self.graph_end.items():
                if end > d:
                    continue
                if cap.graph_code(r, gid) != self.code[gid] or _rows(cap.node_table(r, gid)) != self.tables[gid]:
                    res.lost.append(f"capture: graph {gid}: code or node table differs")
                if cap.symbols(r, gid) != self.symbols[gid] or cap.devices(r, gid) != self.devices[gid]:
                    res.lost.append(f"capture: graph {gid}: symbols or devices differ")
            if self.header_end is not None and self.header_end <= d and cap.header(r) != self.header:
                res.lost.append("capture: header differs")
            # everything a command reads must work on whatever is left
            cap.pipelines(r)
            cap.capture_errors(r)
            cap.rank_table(r)
            cap.end(r)
            cap.stopped(r)
            for gid in list(cap.graphs(r)):
                cap.node_table(r, gid)
                cap.symbols(r, gid)
                cap.devices(r, gid)
                cap.node_count(r, gid)
            if deep:
                from graphtrain_inspect.inspector.cli.ls import listing
                from graphtrain_inspect.inspector.read.stages import StageIndex

                StageIndex(cap)
                listing(cap)
            errs = cap.all_errors()
            res.errors = len(errs)
            for e in errs:
                s = str(e)
                if "\n" in s or not (e.path.startswith(work_dir)):
                    res.unnamed_errors.append(s)
        finally:
            cap.close()


def common_prefix(a: bytes, b: bytes) -> int:
    """Length of the common prefix of two byte strings (compared in blocks, then bytes)."""
    n = min(len(a), len(b))
    lo = 0
    step = 1 << 16
    while lo + step <= n and a[lo : lo + step] == b[lo : lo + step]:
        lo += step
    while lo < n and a[lo] == b[lo]:
        lo += 1
    return lo


def _rows(tables: Any) -> Any:
    return None if tables is None else [(g.path, g.parent_node, g.nodes) for g in tables.graphs]
