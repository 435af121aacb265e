"""What each rank's log holds, read back for the launcher's summary and the manifest.

A light scan of envelopes (payloads are decoded only for the small pass, error and end
records); the full reader with indexes and diffs is inspector/.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from capture import logformat


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

    def manifest_entry(self) -> dict:
        return {
            "log": os.path.basename(self.log),
            "bytes": self.bytes,
            "records": self.records,
            "passes": self.passes,
            "capture_errors": self.capture_errors,
            "complete": self.ended,
            "damaged_lines": len(self.problems),
        }


def summarize(directory: str) -> list[RankSummary]:
    out = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return out
    for name in names:
        if not name.endswith(logformat.LOG_SUFFIX):
            continue
        rank = logformat.rank_of_log_name(name)
        if rank is None:
            continue
        out.append(summarize_log(os.path.join(directory, name), rank))
    return sorted(out, key=lambda s: s.rank)


def summarize_log(path: str, rank: int) -> RankSummary:
    s = RankSummary(rank=rank, log=path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        s.problems.append(f"{path}: {e}")
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
        elif kind in (logformat.PASS, logformat.ERROR, logformat.END):
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
            elif kind == logformat.ERROR:
                s.capture_errors += 1
            else:
                s.ended = True
    return s
