"""Open a capture directory or torch's own TORCH_TRACE logs: ranks, passes, graphs, errors.

    cap = open_capture("captures/run1")          # or a TORCH_TRACE dir, or one log file
    cap.ranks                                    # [0, 1]
    for p in cap.passes(0): print(p.seq, p.name, p.before, p.after)
    tables = cap.node_table(0, gid)              # GraphTables (parsed on demand, LRU-cached)
    cap.graph_code(0, gid); cap.symbols(0, gid); cap.devices(0, gid); cap.rank_table(0)
    cap.errors                                   # ReadError: file, line, message

Opening scans each log once for record offsets (envelopes only) and decodes the small pass
records; graph payloads are decoded when asked. Two sources are understood:

* a capture (`kind == "capture"`): our `gti_*` records, passes as the capture recorded them.
* torch's TORCH_TRACE logs (`kind == "torch_trace"`): graph records (`dynamo_output_graph`,
  `aot_*_graph`, `before/after_*_grad_graph`, `inductor_*_graph`, `graph_dump` ...) become the
  graph states of one pipeline per compile id, linked by synthetic passes: `inductor_entry`,
  `pre_grad_passes`, `aot_autograd`, `partition` (roles fw, bw), `post_grad_passes`. Their graph
  ids are `t` + the record's payload md5, and their node tables are parsed from the text.

Nothing here imports torch; nothing is ever unpickled.

This module opens (directories, manifest, status files, stray logs) and indexes (`index_logs`:
each log filed under its rank, its records by kind); the progressive reader indexes its logs
scanned so far by the same function. `Capture` and its caches are in capture_reader, the records
it is made of in capture_records, the passes synthesized from torch's logs in torch_trace, the
payload checks in validators.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import orjson

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.inspector.errors import CaptureUnreadable
from graphtrain_inspect.inspector.read import node_parts
from graphtrain_inspect.inspector.read.capture_reader import Capture
from graphtrain_inspect.inspector.read.capture_records import GraphRef, RankRecords, int_or, str_or_none
from graphtrain_inspect.inspector.read.logscan import LogFile, ReadError, Record, open_regular
from graphtrain_inspect.inspector.read.torch_trace import index_torch_rank, is_torch_log
from graphtrain_inspect.inspector.read.validators import clean_manifest


def is_our_log(name: str) -> bool:
    return name.startswith(logformat.LOG_PREFIX) and name.endswith(logformat.LOG_SUFFIX)


def open_capture(path: str, *, source: str = "auto", snapshot: Any = None) -> Capture:
    """Open a capture directory, a TORCH_TRACE directory or one log file; or the folders of one
    job's nodes as one world (`A:B`, or a folder of node folders: node_parts).

    `source`: "auto" (our logs if any, else torch's), "capture" or "torch" (the `torch_trace/`
    subdirectory of a capture, or torch's logs in the directory). `snapshot`: the capture's files
    read once (inspector.read.read_once.Snapshot): the capture is read from those bytes alone,
    nothing is opened by its path, and torch's logs are not read. Raises CaptureUnreadable.
    """
    if snapshot is not None:
        return _open_snapshot(path, snapshot)
    folders = node_parts.node_folders(path)
    if not folders:
        return _open_one(path, source)
    caps: list[Capture] = []
    try:
        for f in folders:
            caps.append(_open_one(f, source))
        return node_parts.join(caps, folders)
    except CaptureUnreadable:
        for c in caps:
            c.close()
        raise


def _open_one(path: str, source: str) -> Capture:
    if not os.path.exists(path):
        raise CaptureUnreadable(f"{path}: no such file or directory")
    if os.path.isfile(path):
        return _open_files(path, [path], None, source)
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        raise CaptureUnreadable(f"{path}: cannot list directory: {e.strerror or e}") from None
    manifest = None
    manifest_error = None
    if logformat.MANIFEST_NAME in names:
        mpath = os.path.join(path, logformat.MANIFEST_NAME)
        try:
            manifest = read_manifest(mpath, path)
        except (OSError, ValueError) as e:
            manifest = None
            manifest_error = ReadError(mpath, None, f"manifest does not parse: {e}")
    ours = [os.path.join(path, n) for n in names if is_our_log(n)]
    torch_dir = os.path.join(path, "torch_trace")
    torch_logs = [os.path.join(path, n) for n in names if is_torch_log(n)]
    if not torch_logs and os.path.isdir(torch_dir):
        torch_logs = [os.path.join(torch_dir, n) for n in sorted(os.listdir(torch_dir)) if is_torch_log(n)]
    if source == "torch" or (source == "auto" and not ours and torch_logs):
        if not torch_logs:
            raise CaptureUnreadable(f"{path}: no TORCH_TRACE logs (dedicated_log_torch_trace_rank_*.log)")
        cap = _open_files(path, torch_logs, None, "torch")
    else:
        if not ours and _ours(manifest):
            # Our launcher ran the command and no rank wrote a record (the training failed before
            # its first captured pass, or is starting): a capture of no ranks, read from its manifest
            # and status files, so `ls` and `check` can say how the run ended.
            cap = Capture(path, "capture")
        elif not ours:
            other = [n for n in names if n.endswith(".log")]
            hint = f" (found {', '.join(other[:3])})" if other else ""
            raise CaptureUnreadable(
                f"{path}: not a capture: no {logformat.LOG_PREFIX}<R>{logformat.LOG_SUFFIX} logs{hint}"
            )
        else:
            cap = _open_files(path, ours, manifest, "capture")
    if manifest_error is not None:
        cap.errors.insert(0, manifest_error)
    if cap.kind == "capture":
        read_beside(cap, path, manifest)
    else:
        cap.manifest = manifest
        check_manifest(cap, path)
    return cap


def _ours(manifest: dict[str, Any] | None) -> bool:
    return isinstance(manifest, dict) and manifest.get("format") == logformat.FORMAT_NAME


def _open_snapshot(path: str, snap: Any) -> Capture:
    """`open_capture` of the bytes in `snap` (our logs only: replay reads no other kind)."""
    if snap.single is not None:
        cap = _open_files(path, [path], None, "capture", snap)
        cap.snapshot = snap
        return cap
    names = snap.names()
    manifest = None
    manifest_error = None
    if logformat.MANIFEST_NAME in names:
        mpath = os.path.join(path, logformat.MANIFEST_NAME)
        try:
            manifest = parse_manifest(snap.read(mpath))
        except (OSError, ValueError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else e
            manifest_error = ReadError(mpath, None, f"manifest does not parse: {why}")
    ours = [os.path.join(path, n) for n in names if is_our_log(n)]
    if not ours:
        raise CaptureUnreadable(f"{path}: not a capture: no {logformat.LOG_PREFIX}<R>{logformat.LOG_SUFFIX} logs")
    cap = _open_files(path, ours, manifest, "capture", snap)
    cap.snapshot = snap
    if manifest_error is not None:
        cap.errors.insert(0, manifest_error)
    cap.manifest = manifest
    check_manifest(cap, path)
    read_statuses(cap, path, snap)
    return cap


MANIFEST_LIMIT = 64 << 20


def read_manifest(mpath: str, base: str) -> dict[str, Any]:
    """The manifest as a dict; OSError or ValueError (one line) when it cannot be read."""
    with open_regular(mpath, base=base) as f:
        data = f.read(MANIFEST_LIMIT + 1)
    return parse_manifest(data)


def parse_manifest(data: bytes) -> dict[str, Any]:
    """A manifest's bytes as a dict; ValueError (one line) when they are not one."""
    if len(data) > MANIFEST_LIMIT:
        raise ValueError(f"larger than {MANIFEST_LIMIT >> 20} MB")
    m = orjson.loads(data)
    if not isinstance(m, dict):
        raise ValueError("not a JSON object")
    return m


def read_statuses(cap: Capture, path: str, snap: Any = None) -> None:
    """Each writer's status file (DIR/status/rank_<R>.<pid>.json) into `cap.statuses`; a file that
    is not one becomes a ReadError. Files are read only inside the capture, a few KB at most
    (from `snap` alone when given: inspector.read.read_once)."""
    sdir = os.path.join(path, logformat.STATUS_DIR)
    if snap is not None:
        if not snap.has_folder(logformat.STATUS_DIR):
            return
        names = snap.names(logformat.STATUS_DIR)
    elif not os.path.isdir(path) or not os.path.isdir(sdir):
        return
    else:
        try:
            names = sorted(os.listdir(sdir))
        except OSError as e:
            cap.errors.append(ReadError(sdir, None, f"cannot list: {e.strerror or e}"))
            return
    cap.statuses = {}
    for name in names:
        who = logformat.status_of_file_name(name)
        if who is None:
            continue
        spath = os.path.join(sdir, name)
        try:
            if snap is not None:
                doc = logformat.decode_status(snap.read(spath)[: logformat.STATUS_BYTES * 4])
            else:
                with open_regular(spath, base=path) as f:
                    doc = logformat.decode_status(f.read(logformat.STATUS_BYTES * 4))
        except (OSError, logformat.FormatError) as e:
            cap.errors.append(
                ReadError(
                    spath, None, f"status file unreadable: {e.strerror if isinstance(e, OSError) and e.strerror else e}"
                )
            )
            continue
        rank, pid = who
        cap.statuses.setdefault(rank, []).append({
            "pid": pid,
            "state": str(doc.get("state")),
            "reason": str_or_none(doc.get("reason")),
            "records": int_or(doc.get("records"), None),
            # how the writer's process ended, where its parent recorded it (capture.child_exits)
            "exit_code": int_or(doc.get("exit_code"), None),
            "signal": str_or_none(doc.get("signal")),
        })  # fmt: skip


def check_manifest(cap: Capture, path: str) -> None:
    m = cap.manifest
    if m is None:
        if cap.kind == "capture":
            cap.errors.append(
                ReadError(
                    os.path.join(path, logformat.MANIFEST_NAME),
                    None,
                    "no manifest (capture still running or copied without it)",
                )
            )
        return
    m, wrong = clean_manifest(m)  # a value of the wrong type is a reading problem, never met by a reader
    cap.manifest = m
    for what in wrong:
        cap.errors.append(ReadError(os.path.join(path, logformat.MANIFEST_NAME), None, what))
    version = m.get("format_version")
    if isinstance(version, int) and version > logformat.FORMAT_VERSION:
        cap.errors.append(
            ReadError(
                os.path.join(path, logformat.MANIFEST_NAME),
                None,
                f"format version {version} is newer than this reader's {logformat.FORMAT_VERSION}; "
                "reading what is understood",
            )
        )
    ranks = m.get("ranks")
    if isinstance(ranks, dict):
        for key, info in ranks.items():
            try:
                r = int(key)
            except ValueError:
                continue
            if cap.rank_records(r) is None and r not in cap.left_out:
                log = info.get("log") if isinstance(info, dict) else None
                cap.errors.append(
                    ReadError(os.path.join(path, log or logformat.log_file_name(r)), None, f"rank {r}: log missing", r)
                )


def _open_files(path: str, files: list[str], manifest: dict | None, source: str, snap: Any = None) -> Capture:
    base = path if os.path.isdir(path) else None  # logs of a directory must not lead out of it
    by_rank: dict[int, list[str]] = {}
    unranked: list[str] = []
    for f in files:
        r = logformat.rank_of_log_name(os.path.basename(f))
        if r is None:
            unranked.append(f)
        else:
            by_rank.setdefault(r, []).append(f)
    errors: list[ReadError] = []
    logs: dict[int, LogFile] = {}
    run_id = manifest.get("run_id") if isinstance(manifest, dict) else None
    run_id = run_id if isinstance(run_id, str) else None  # read before the manifest is cleaned
    for r, fs in sorted(by_rank.items()):
        if len(fs) == 1:
            logs[r] = LogFile(fs[0], rank=r, base=base, snapshot=snap)
            continue
        logs[r] = _rank_log(r, fs, base, run_id, errors, snap)
    for f in unranked:
        log = LogFile(f, base=base, snapshot=snap)
        r = next((rec.rank for rec in log.records if rec.rank is not None), None)
        if r is None:
            r = 0
        log.rank = r
        if r in logs:
            errors.append(ReadError(f, None, f"another log for rank {r}; ignored", r))
            log.close()
            continue
        logs[r] = log
    if not logs:
        raise CaptureUnreadable(f"{path}: no logs to read")
    kind = "torch_trace" if source == "torch" else "capture"
    if source == "auto":
        kind = (
            "capture"
            if any(rec.kind == logformat.HEADER for lg in logs.values() for rec in lg.records[:50])
            else "torch_trace"
        )
        if kind == "capture" and not any(rec.kind.startswith("gti_") for lg in logs.values() for rec in lg.records):
            kind = "torch_trace"
    if not any(log.records for log in logs.values()):
        msgs = "; ".join(str(e) for lg in logs.values() for e in lg.errors[:1])
        raise CaptureUnreadable(f"{path}: no readable records ({msgs})" if msgs else f"{path}: no readable records")
    return index_logs(path, kind, logs, errors)


def index_logs(path: str, kind: str, logs: Mapping[int, LogFile], errors: list[ReadError]) -> Capture:
    """A Capture of opened logs, each its rank's: their records filed by kind (our logs), or the
    passes synthesized from torch's; logs that are not their rank's left out. The one indexing of
    a capture: opening does it once, the progressive reader (inspector.read.progressive) again on
    each snapshot of the logs scanned so far, where an error said before is not said again."""
    cap = Capture(path, kind)
    cap.errors.extend(errors)
    for r, log in sorted(logs.items()):
        rd = cap.add_rank(r, log)
        if kind != "capture":
            index_torch_rank(rd)
            continue
        n = len(log.errors)
        _index_capture_rank(cap, rd)
        if len(log.errors) > n:
            log.errors[n:] = [e for e in log.errors[n:] if e not in log.errors[:n]]
    if kind == "capture":
        leave_out_strays(cap)
    return cap


def read_beside(cap: Capture, path: str, manifest: dict[str, Any] | None) -> None:
    """What a capture of our logs reads beside them: torch's own logs (`torch_trace/`), the manifest
    (checked against the ranks read), each writer's status file and the job's node parts."""
    torch_dir = os.path.join(path, "torch_trace")
    if os.path.isdir(torch_dir):
        cap.torch_trace_dir = torch_dir
    cap.manifest = manifest
    check_manifest(cap, path)
    read_statuses(cap, path)
    node_parts.read_parts(cap, path, read_manifest)


def _header_of(log: LogFile) -> dict[str, Any] | None:
    for rec in log.records[:50]:
        if rec.kind == logformat.HEADER:
            h = log.payload(rec)
            if isinstance(h, dict):
                return h
    return None


def _rank_log(
    r: int, files: list[str], base: str | None, run_id: Any, errors: list[ReadError], snap: Any = None
) -> LogFile:
    """Of several logs named as rank `r`'s, the one its content says is: a header of rank `r`,
    of this capture's run (the manifest's run id), under the name the capture writes; the
    largest only among equals. Each other is reported with why it was not taken, never read as
    the rank: a copy of another rank's log saved under this name changes nothing."""
    canonical = logformat.log_file_name(r)
    scored = []
    for f in files:
        log = LogFile(f, rank=r, base=base, snapshot=snap)
        h = _header_of(log) or {}
        owner = h.get("rank") if type(h.get("rank")) is int else None
        same_run = run_id is None or h.get("run_id") == run_id
        size = log.size
        score = (owner == r, same_run, os.path.basename(f) == canonical, owner is not None, size)
        scored.append((score, f, log, owner, same_run))
    scored.sort(key=lambda t: t[0], reverse=True)
    chosen = scored[0]
    for _, f, log, owner, same_run in scored[1:]:
        if owner is None:
            why = "it has no readable header"
        elif owner != r:
            why = f"its header says rank {owner}"
        elif not same_run:
            why = "its header names another run than this capture's manifest"
        else:
            why = f"a second log of rank {r} (a copy?)"
        errors.append(
            ReadError(
                f, None, f"another log named as rank {r}'s: {why}; ignored, reading {os.path.basename(chosen[1])}", r
            )
        )
        log.close()
    return chosen[2]


def _owner(rd: RankRecords) -> int | None:
    """The rank a log's records say they belong to: its header's, else most of its records'."""
    h = rd.header
    if isinstance(h, dict) and type(h.get("rank")) is int:
        return h["rank"]
    counts: dict[int, int] = {}
    for rec in rd.log.records if rd.log is not None else ():
        if rec.kind.startswith("gti_") and rec.rank is not None:
            counts[rec.rank] = counts.get(rec.rank, 0) + 1
    if not counts:
        return None
    best = max(counts, key=lambda k: counts[k])
    return best if 2 * counts[best] > sum(counts.values()) else None


def leave_out_strays(cap: Capture) -> None:
    """Take out of the capture's ranks the logs that are not that rank's: an empty log (not a byte:
    nothing says a rank ran), and a log whose records say they are another
    rank's (a copy of rank 1's log saved as rank 5's). Compared as the rank of their name, a copy
    doubles a real rank's values and turns rank-derived findings into "equals no rank-derived
    value"; so they are reported (`left_out`, a read error, the incomplete-capture check) and
    kept out of every cross-rank comparison."""
    for r in cap.ranks:
        rd = cap.rank_records(r)
        if rd is None or rd.log is None:
            continue
        log = rd.log
        if not log.records and [e.message for e in log.errors] == ["empty file"]:  # opened, and empty
            problem, why = "empty-log", f"empty log: not counted as rank {r}"
        else:
            owner = _owner(rd)
            if owner is None or owner == r:
                continue
            problem = "stray-log"
            why = (
                f"its records say they are rank {owner}'s (a copy or a misnamed log?): "
                f"left out, not compared as rank {r}"
            )
        cap.leave_out(r, problem, why)


def _index_capture_rank(cap: Capture, rd: RankRecords) -> None:
    log = rd.log
    assert log is not None
    n_other = 0
    headers: list[Record] = []
    for rec in log.records:
        kind = rec.kind
        if kind.startswith("gti_") and rec.rank is None:
            log.errors.append(ReadError(log.path, log.line_of(rec.offset), f"{kind} record without a rank", rd.rank))
        elif kind.startswith("gti_") and rec.rank is not None and rec.rank != rd.rank:
            log.errors.append(
                ReadError(
                    log.path,
                    log.line_of(rec.offset),
                    f"{kind} record of rank {rec.rank} in the log of rank {rd.rank}",
                    rd.rank,
                )
            )
        if kind in logformat.GRAPH_KINDS:
            gid = rec.meta.get("gid")
            if not isinstance(gid, str):
                log.errors.append(ReadError(log.path, log.line_of(rec.offset), f"{kind} record without a gid", rd.rank))
                continue
            ref = rd.graphs.get(gid)
            if ref is None:
                ref = rd.graphs[gid] = GraphRef(rd.rank, gid)
            if kind in ref.records:
                ref.alternates.setdefault(kind, []).append(rec)
                continue
            ref.records[kind] = rec
            if type(rec.meta.get("nodes")) is int:
                ref.nodes = rec.meta["nodes"]
        elif kind == logformat.PASS:
            rd.pass_recs.append(rec)
        elif kind == logformat.PASS_START:
            rd.start_recs.append(rec)
        elif kind == logformat.BLOB:
            rd.blob_recs.append(rec)
        elif kind == logformat.RANKS:
            rd.rank_recs.append(rec)
        elif kind == logformat.ERROR:
            rd.error_recs.append(rec)
        elif kind == logformat.END:
            rd.end_rec = rec
        elif kind == logformat.HEADER:
            headers.append(rec)
        else:
            n_other += 1
    for rec in headers:  # the first that reads (one per writer process; a damaged one is skipped)
        h = log.payload(rec)
        if isinstance(h, dict):
            rd.header_rec, rd.header = rec, h
            break
    if rd.header is not None and rd.header_rec is not None:
        v = rd.header.get("format_version")
        if isinstance(v, int) and v > logformat.FORMAT_VERSION:
            log.errors.append(
                ReadError(
                    log.path,
                    log.line_of(rd.header_rec.offset),
                    f"format version {v} is newer than this reader's {logformat.FORMAT_VERSION}; "
                    "reading what is understood",
                    rd.rank,
                )
            )
    elif log.records and not headers:
        log.errors.append(ReadError(log.path, None, "no gti_header record", rd.rank))
