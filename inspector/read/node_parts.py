"""A capture's nodes, read as one world: which ranks each node hosts, which ranks `--ranks` left
out, and so what a rank without a log means (capture/nodes.py writes what is read here, both by
capture.shared.node_ranks).

* Node parts: each node's `nodes/<part>/manifest.json` (its launcher's record: host, node rank,
  command, exit, its ranks' state, problems) and `rank_<R>.json` files (one per rank it started),
  merged into the capture's manifest: `nodes` lists them, `ranks`, `problems`, `incomplete_ranks`,
  `stopped_ranks` gain every node's.
* Several folders of one job (a local `--out` per node): `join` makes one Capture of them, after
  checking that every folder names the same job (torchrun's rendezvous, SLURM's job).
* `absence`: the world's ranks without a log, each told as what it is: not recorded (`--ranks`),
  on a node whose capture is not among the folders read, or started under the capture and ran no
  captured pass (the only absence that says anything about the training: compile on one rank).
  A capture without node parts (older ones) reads as before: every absent rank ran no pass.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

from graphtrain_inspect.capture.shared import logformat, node_ranks
from graphtrain_inspect.capture.shared.rank_ranges import format_ranks
from graphtrain_inspect.inspector.errors import CaptureUnreadable
from graphtrain_inspect.inspector.read.logscan import ReadError

_PART_LIMIT = 4096  # node parts read in one folder (a job of more hosts is read as far as this)


def read_parts(cap: Any, path: str, read_manifest: Callable[[str, str], dict[str, Any]]) -> None:
    """The node parts under `path` into `cap.nodes`; their records merged into `cap.manifest`."""
    base = os.path.join(path, node_ranks.NODES_DIR)
    if not os.path.isdir(base) or os.path.islink(base):
        return
    try:
        names = sorted(os.listdir(base))[:_PART_LIMIT]
    except OSError as e:
        cap.errors.append(ReadError(base, None, f"cannot list: {e.strerror or e}"))
        return
    for name in names:
        pdir = os.path.join(base, name)
        if os.path.islink(pdir) or not os.path.isdir(pdir):
            continue
        record: dict[str, Any] = {}
        mpath = os.path.join(pdir, logformat.MANIFEST_NAME)
        if os.path.lexists(mpath):
            try:
                record = read_manifest(mpath, path)
            except (OSError, ValueError) as e:
                cap.errors.append(ReadError(mpath, None, f"node record does not parse: {e}"))
        ranks = node_ranks.rank_files(pdir)
        cap.nodes.append(_node(name, path, record, ranks))
        cap.nodes.sort(key=lambda n: (n["node_rank"] is None, n["node_rank"] or 0, n["part"]))
        if record and record is not cap.manifest:
            merge_manifest(cap, record)


def _node(part: str, folder: str, record: dict[str, Any], ranks: list[dict[str, Any]]) -> dict[str, Any]:
    got = record.get("node")
    node: dict[str, Any] = got if isinstance(got, dict) else {}
    node_rank = next((d["node_rank"] for d in ranks if type(d.get("node_rank")) is int), node.get("node_rank"))
    lws = next((d["local_world_size"] for d in ranks if type(d.get("local_world_size")) is int), None)
    return {
        "part": part,
        "folder": folder,
        "job": node.get("job") if isinstance(node.get("job"), str) else None,
        "node_rank": node_rank if type(node_rank) is int else None,
        "host": record.get("host") if isinstance(record.get("host"), str) else None,
        "command": record.get("command_line") if isinstance(record.get("command_line"), str) else None,
        "exit_code": record.get("exit_code") if type(record.get("exit_code")) is int else None,
        "status": record.get("status") if isinstance(record.get("status"), str) else None,
        "record_ranks": record.get("record_ranks") if isinstance(record.get("record_ranks"), str) else None,
        "local_world_size": lws,
        "ranks": sorted({d["rank"] for d in ranks}),
        # where its ranks met (the store's address, torchrun's run id): the same on every node of one run
        "rendezvous": next((d["rendezvous"] for d in ranks if isinstance(d.get("rendezvous"), str)), None),
        "problems": [p for p in record.get("problems") or [] if isinstance(p, str)],
    }


def merge_manifest(cap: Any, other: dict[str, Any]) -> None:
    """Another node's record into the capture's manifest: its ranks' entries and problems."""
    m = cap.manifest
    if not isinstance(m, dict):
        cap.manifest = m = dict(other)
        return
    for key in ("ranks", "stopped_ranks", "still_running"):
        theirs = other.get(key)
        if isinstance(theirs, dict):
            had = m.get(key)
            m[key] = {**theirs, **(had if isinstance(had, dict) else {})}
    for key in ("incomplete_ranks", "problems"):
        theirs = other.get(key)
        if isinstance(theirs, list):
            had = m.get(key)
            mine: list[Any] = had if isinstance(had, list) else []
            m[key] = mine + [x for x in theirs if x not in mine]
    if other.get("status") in ("failed", "interrupted", "running") and m.get("status") == "finished":
        m["status"] = other["status"]  # the job ended as its worst node did
        m["exit_code"] = other.get("exit_code")


def job_of(cap: Any) -> str | None:
    m = cap.manifest if isinstance(cap.manifest, dict) else {}
    node = m.get("node")
    job = node.get("job") if isinstance(node, dict) else None
    return job if isinstance(job, str) else None


def join(caps: list[Any], paths: list[str]) -> Any:
    """One Capture of the folders of one job's nodes (each opened); CaptureUnreadable when they are
    not one job's (their jobs differ, or a rank is in two of them)."""
    first, jobs = caps[0], [job_of(c) for c in caps]
    for p, job in zip(paths[1:], jobs[1:]):
        if job is None or job != jobs[0]:
            theirs = f"job {job!r}" if job else "a run of one node"
            mine = f"job {jobs[0]!r}" if jobs[0] else "a run of one node"
            raise CaptureUnreadable(f"{p}: a capture of another job than {paths[0]} ({theirs}, not {mine})")
    met = [{n["rendezvous"] for n in c.nodes if n.get("rendezvous")} for c in caps]
    for p, where in zip(paths[1:], met[1:]):
        if where and met[0] and not where & met[0]:
            # the same launch options, another run: its ranks met at another store
            raise CaptureUnreadable(
                f"{p}: a capture of another run than {paths[0]} (its ranks met at {min(where)}, not {min(met[0])})"
            )
    seen = {r: paths[0] for r in first.ranks}
    first.rank_dirs = {r: paths[0] for r in first.ranks}
    for c, p in zip(caps[1:], paths[1:]):
        for r in c.ranks:
            if r in seen:
                raise CaptureUnreadable(f"{p}: rank {r} is also in {seen[r]}: not two nodes of one job")
            seen[r] = p
            first.adopt_rank(c, r)
            first.rank_dirs[r] = p
        first.errors.extend(c.errors)
        for r, st in c.statuses.items():
            first.statuses.setdefault(r, []).extend(st)
        first.left_out.update(c.left_out)
        first.nodes.extend(c.nodes)
        if isinstance(c.manifest, dict):
            merge_manifest(first, c.manifest)
    first.nodes.sort(key=lambda n: (n["node_rank"] is None, n["node_rank"] or 0, n["part"]))
    first.path = os.pathsep.join(paths)
    first.folders = list(paths)
    return first


def node_folders(path: str) -> list[str] | None:
    """The folders `path` names when it is several captures: `A:B` (os.pathsep, as a command line
    joins them) naming existing folders, or a folder holding only capture folders (each with a
    manifest), one per node. None: one capture."""
    if not os.path.exists(path) and os.pathsep in path:
        parts = [p for p in path.split(os.pathsep) if p]
        if len(parts) > 1 and all(os.path.isdir(p) for p in parts):
            return parts
        return None
    if not os.path.isdir(path) or os.path.exists(os.path.join(path, logformat.MANIFEST_NAME)):
        return None
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return None
    subs = [os.path.join(path, n) for n in names if not os.path.islink(os.path.join(path, n))]
    subs = [s for s in subs if os.path.isdir(s)]
    if len(subs) < 2 or any(n.endswith(logformat.LOG_SUFFIX) for n in names):
        return None
    if all(os.path.isfile(os.path.join(s, logformat.MANIFEST_NAME)) for s in subs):
        return subs
    return None


# -- absence ------------------------------------------------------------------------------------


@dataclass
class Absence:
    """The world's ranks without a log, by what that means."""

    not_recorded: list[int] = field(default_factory=list)  # left out by capture --ranks
    spec: str | None = None  # that --ranks list
    elsewhere: dict[int | None, list[int]] = field(default_factory=dict)  # node (None: unknown) -> ranks
    no_pass: list[int] = field(default_factory=list)  # started under the capture, wrote no log

    def lines(self, world: int) -> list[str]:
        out = []
        if self.not_recorded:
            out.append(f"rank {format_ranks(self.not_recorded)}: not recorded (capture --ranks {self.spec})")
        for node, ranks in sorted(self.elsewhere.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
            where = f"on node {node}" if node is not None else "on a node"
            out.append(f"rank {format_ranks(ranks)}: {where}, not in these folders (its node's capture was not given)")
        if self.no_pass:
            out.append(f"rank {format_ranks(self.no_pass)}: recorded nothing (no log; ran no captured pass)")
        return out


def absence(cap: Any) -> Absence:
    absent = list(cap.absent_ranks)
    nodes = getattr(cap, "nodes", None) or []
    if not nodes:
        return Absence(no_pass=absent)
    spec = next((n["record_ranks"] for n in nodes if n["record_ranks"]), None)
    lws = next((n["local_world_size"] for n in nodes if n["local_world_size"]), None)
    skipped = set(node_ranks.unrecorded(spec, cap.world_size, lws))
    hosted = {r: n["node_rank"] for n in nodes for r in n["ranks"]}
    a = Absence(spec=spec)
    uniform = lws is not None and all(n["local_world_size"] in (None, lws) for n in nodes)
    if uniform and lws and any(node is not None and r // lws != node for r, node in hosted.items()):
        uniform = False  # ranks not laid out node after node: no node is guessed
    present = {n["node_rank"] for n in nodes}
    # a run of one node: every rank ran here, also one that never said so (a program that starts
    # its ranks without RANK in their environment)
    one_node = len(nodes) == 1 and not nodes[0]["job"]
    for r in absent:
        if r in skipped:
            a.not_recorded.append(r)
        elif r in hosted or one_node:
            a.no_pass.append(r)
        else:
            guess = r // lws if uniform and lws else None
            # a node read here that does not say it hosted the rank is not where it ran
            a.elsewhere.setdefault(guess if guess not in present else None, []).append(r)
    return a


def ran_without_log(cap: Any) -> list[int]:
    """Ranks known to have run without recording a pass: those a node says it started (or, in a
    capture without node parts, every rank of the world without a log)."""
    return absence(cap).no_pass
