"""incomplete-capture: what the capture is missing, so nothing else is read as the whole story.

Not a bug in the training: a fact about the capture that bounds what the other checks can see.
One finding per rank and problem (`evidence.problem`):

* `missing-rank`: a rank the manifest (or a writer's status file) names has no log, or a log
  with no readable record (a rank that never ran a captured pass has no log, rightly: not this);
* `no-end-record`: a rank's log does not end with the end record a process writes when it exits
  cleanly: it was killed, crashed, or is still running (info while the manifest says running);
* `stopped`: the rank's capture stopped writing while training went on (a failed write, a full
  disk, its log deleted), from the writers' status files or the manifest;
* `pass-unfinished`: a pass started and never finished (its rank died inside it);
* `damaged`: lines of the rank's log that could not be read (truncated, garbage, bad md5), as
  found so far (`ls --verify` decodes every payload);
* `missing-blob`: GraphPickler blobs named by the rank's pass records and absent from `blobs/`
  (replay cannot load those graphs);
* `bad-blob-reference`: a blob reference that is not `blobs/<sha256>.gpkl` (a path such as
  `../../etc/passwd`): refused, never opened;
* `linked-blobs`: `blobs/` is a symbolic link, or blob files named by a rank's passes are links
  (or not regular files): replay refuses them (its blobs must be files inside the capture);
* `no-manifest` (info): no readable manifest.json, so the command and how it ended are unknown;
* `stray-log`: a log whose records say they are another rank's (a copy of rank 1's log saved as
  rank 5's): the reader left it out, so it is in no cross-rank comparison;
* `empty-log`: an empty log: not counted as a rank;
* `pass-not-captured`: a `--pass` target the workers imported and could not wrap (no such
  attribute: a typo the launcher could not see), with the workers' reason.

All are warnings (info for a capture still running), so `check`'s exit status still says whether
the training has a bug. Capture-level findings have no pass (`introduced_by` is None) except
`pass-unfinished`, which names the pass. Torch's own TORCH_TRACE logs have no headers, end
records or blobs: for them only `damaged` applies.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Any

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.checks.findings import Finding

KIND = "incomplete-capture"
DESCRIPTION = (
    "ranks, records, passes or blobs the capture is missing (killed rank, full disk, damaged log, copied without blobs)"
)


def _finding(rank: int | None, problem: str, message: str, severity: str = "warning", **evidence: Any) -> Finding:
    return Finding(
        kind=KIND,
        severity=severity,
        message=message,
        ranks=[rank] if rank is not None else [],
        evidence={"problem": problem, **({"rank": rank} if rank is not None else {}), **evidence},
    )


def _ended_how(manifest: dict[str, Any] | None) -> str:
    if not manifest:
        return ""
    code, sig, status = manifest.get("exit_code"), manifest.get("signal"), manifest.get("status")
    if status == "running":
        return " (the capture is still running)"
    if sig:
        return f" (the command was stopped by {sig})"
    if isinstance(code, int) and code != 0:
        return f" (the command exited with {code})"
    return ""


def expected_ranks(cap: Any) -> list[int]:
    """Ranks the capture should have: those with a log, those the manifest lists (the launcher saw
    their logs at the end of the run) and those with a writer's status file. Not 0..world_size-1:
    a rank that never ran a captured pass (compile on one rank) writes no log, rightly."""
    want: set[int] = set(cap.ranks)
    m = cap.manifest if isinstance(cap.manifest, dict) else {}
    ranks = m.get("ranks")
    if isinstance(ranks, dict):
        want.update(int(k) for k in ranks if isinstance(k, str) and k.isdigit() and len(k) < 8)
    want.update(r for r in getattr(cap, "statuses", {}) if type(r) is int)
    return sorted(want)


@dataclass
class _Capture:
    """What every finding of this check reads of the capture."""

    cap: Any
    ours: bool  # written by `graphtrain-inspect capture` (not torch's own logs)
    base: str  # its folder
    how: str  # how the run ended, as a clause (", the run failed", ...) or ""
    running: bool  # the manifest says it is still running


def run(ctx: CheckContext) -> list[Finding]:
    cap = ctx.cap
    manifest = cap.manifest if isinstance(getattr(cap, "manifest", None), dict) else None
    c = _Capture(
        cap,
        ours=getattr(cap, "kind", None) == "capture",
        base=cap.path if os.path.isdir(cap.path) else os.path.dirname(os.path.abspath(cap.path)),
        how=_ended_how(manifest),
        running=bool(manifest and manifest.get("status") == "running"),
    )
    findings = _capture_findings(c, manifest)
    left_out = getattr(cap, "left_out", {})
    for r in expected_ranks(cap) if c.ours else cap.ranks:
        if r not in left_out:
            findings += _rank_findings(c, r)
    if c.ours:
        findings.extend(_unwrapped_targets(cap))
    return findings


def _capture_findings(c: _Capture, manifest: dict | None) -> list[Finding]:
    """The capture's own: no manifest, a linked blobs folder, logs left out of the reading."""
    cap = c.cap
    findings: list[Finding] = []
    if c.ours and manifest is None:
        why = next(
            (e.message for e in cap.errors if os.path.basename(e.path) == logformat.MANIFEST_NAME), "no manifest.json"
        )
        findings.append(
            _finding(None, "no-manifest", f"{why}: which command ran and how it ended are unknown", "info", detail=why)
        )
    blob_dir = os.path.join(c.base, logformat.BLOB_DIR)
    if c.ours and os.path.islink(blob_dir):
        target = os.readlink(blob_dir)
        findings.append(
            _finding(
                None,
                "linked-blobs",
                f"{logformat.BLOB_DIR}/ is a link (to {target[:200]}): replay refuses every blob "
                "in it (blobs must be files inside the capture)",
                detail=target[:200],
            )
        )
    for r, (path, problem, why) in sorted(getattr(cap, "left_out", {}).items()):
        findings.append(_finding(r, problem, f"{os.path.basename(path)}: {why}", log=path, detail=why))
    return findings


def _rank_findings(c: _Capture, r: int) -> list[Finding]:
    """One rank's log: missing, stopped, without its end, damaged; then its passes and blobs."""
    cap, how = c.cap, c.how
    findings: list[Finding] = []
    log = cap.log_file(r)
    records = log.records if log is not None else []
    stopped = cap.stopped(r) if c.ours else None
    if c.ours and not records:
        path = log.path if log is not None else os.path.join(_dir_of(c, r), logformat.log_file_name(r))
        if log is None:
            why = f"{os.path.basename(path)} is missing"
        else:
            why = f"no readable record: {log.errors[0].message if log.errors else 'empty'}"
        findings.append(
            _finding(
                r,
                "missing-rank",
                f"rank {r}'s capture log: {why}; nothing of this rank can be compared{how}",
                log=path,
                detail=why,
            )
        )
    if stopped:
        findings.append(
            _finding(
                r,
                "stopped",
                f"rank {r}'s capture stopped writing while training went on: {stopped}; later passes of "
                "this rank are missing",
                reason=stopped,
                records=len(records),
            )
        )
    if c.ours and log is not None and records and cap.end(r) is None and not stopped:
        last = records[-1]
        findings.append(
            _finding(
                r,
                "no-end-record",
                f"rank {r}'s log has no end record: its process was killed, crashed or is still "
                f"running{how}; it ends after {len(records)} records",
                "info" if c.running else "warning",
                log=log.path,
                records=len(records),
                last_record=last.kind,
                detail=f"last record: {last.kind} at line {log.line_of(last.offset)}",
            )
        )
    if log is not None and log.errors and records:
        first = log.errors[0]
        findings.append(
            _finding(
                r,
                "damaged",
                f"{len(log.errors)} damaged or unreadable line(s) in rank {r}'s log; everything else is "
                f"read (first: {first})",
                log=log.path,
                count=len(log.errors),
                first=str(first),
                detail=str(first),
            )
        )
    if not c.ours or not records:
        return findings
    if not stopped:  # a stopped capture misses its records, not a dead rank
        findings += _unfinished_passes(cap, r, how)
    findings.extend(_blob_findings(cap, r, _dir_of(c, r)))
    return findings


def _unfinished_passes(cap: Any, r: int, how: str) -> list[Finding]:
    """Passes the rank started and never finished: it died inside them."""
    findings = []
    for p in cap.passes(r):
        if p.status == "incomplete":
            f = _finding(
                r,
                "pass-unfinished",
                f"pass {p.label} started on rank {r} and never finished: the rank stopped inside it{how}",
                seq=p.seq,
                pass_name=p.name,
            )
            f.introduced_by = f.pass_ = p.name
            f.introduced_seq = f.last_seq = p.seq
            findings.append(f)
    return findings


def _unwrapped_targets(cap: Any) -> list[Finding]:
    """A `--pass` the workers imported and could not wrap (a typo in its name): none of its runs
    is in the capture, so "no findings" would say nothing about it. One finding per target."""
    why: dict[str, str] = {}
    ranks: dict[str, list[int]] = {}
    for r in cap.ranks:
        for e in cap.capture_errors(r):
            where = str(e.get("where") or "")
            if where.startswith("--pass "):
                t = where.removeprefix("--pass ")
                msg = str(e.get("message") or "").strip().splitlines()
                why.setdefault(t, f"{e.get('type') or 'error'}: {msg[0] if msg else ''}")
                ranks.setdefault(t, []).append(r)
    return [
        _finding(
            None,
            "pass-not-captured",
            f"--pass {t} was not captured: {why[t]}; none of its runs is in the capture",
            target=t,
            detail=why[t],
        )
        for t in why
    ]


def _dir_of(c: _Capture, rank: int) -> str:
    """The folder of the rank's own files: its node's, when the capture is several folders."""
    dir_of = getattr(c.cap, "dir_of", None)
    return (dir_of(rank) if callable(dir_of) else None) or c.base


def _blob_findings(cap: Any, rank: int, base: str) -> list[Finding]:
    """Blob references of the rank's passes: refused when not blobs/<sha256>.gpkl, missing when
    the file is absent. Only the canonical name inside the capture is ever looked at (lstat)."""
    refs: dict[str, dict] = {}
    bad: list[str] = []
    for p in cap.passes(rank):
        for gid, ref in (p.blobs or {}).items():
            sha = ref.get("sha256") if isinstance(ref, dict) else None
            if not isinstance(sha, str) or not logformat.is_valid_sha256(sha):
                bad.append(f"#{p.seq} {p.name}: {gid}: no valid sha256")
                continue
            path = ref.get("path")
            if path not in (None, logformat.blob_relpath(sha)):
                bad.append(f"#{p.seq} {p.name}: {gid}: path {str(path)[:200]!r}")
                continue
            refs.setdefault(sha, ref)
    out = []
    if bad:
        out.append(
            _finding(
                rank,
                "bad-blob-reference",
                f"{len(bad)} blob reference(s) of rank {rank} are not "
                f"{logformat.BLOB_DIR}/<sha256>{logformat.BLOB_SUFFIX}: "
                f"refused, never opened (first: {bad[0]})",
                references=bad[:20],
                detail=bad[0],
            )
        )
    missing, linked = [], []
    for sha in refs:
        try:
            st = os.lstat(os.path.join(base, logformat.blob_relpath(sha)))
        except OSError:
            missing.append(sha)
            continue
        if not stat.S_ISREG(st.st_mode):
            linked.append(logformat.blob_relpath(sha))
    if linked:
        out.append(
            _finding(
                rank,
                "linked-blobs",
                f"{len(linked)} blob file(s) named by rank {rank}'s passes are links or not regular files: "
                f"replay refuses them (first: {linked[0]})",
                blobs=linked[:20],
                count=len(linked),
                detail=linked[0],
            )
        )
    if missing:
        out.append(
            _finding(
                rank,
                "missing-blob",
                f"{len(missing)} of {len(refs)} blobs named by rank {rank}'s passes are missing from "
                f"{logformat.BLOB_DIR}/: replay cannot load those graphs",
                missing=[logformat.blob_relpath(s) for s in missing[:20]],
                count=len(missing),
                detail=logformat.blob_relpath(missing[0]),
            )
        )
    return out


def evidence_lines(f: Finding) -> list[str]:
    """The finding's evidence as lines of text (`check`, `report`, the TUI and SARIF show them)."""
    if f.layer == "codegen":
        from graphtrain_inspect.inspector.checks.codegen_sites import code_evidence_lines

        return code_evidence_lines(f)
    detail = str((f.evidence or {}).get("detail") or "")
    return [detail] if detail else []
