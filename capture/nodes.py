"""The ranks that record, and each node's own part of a capture folder.

`capture --ranks LIST` (`0-7,512`, or `auto`): a worker decides from its RANK, before anything is
installed, whether it records (`records_here`, by the choice in capture.shared.node_ranks that the
reader makes too); a rank that does not runs untouched: no hook, no file.

Nodes. A job of several hosts runs a `capture` on each (torchrun `--nnodes N --node-rank K`, or
`srun` starting it per task). Each launcher claims its own part, `nodes/<part>/` (os.mkdir:
exclusive on a shared filesystem as on a local one, no lock server), named for its node rank
(torchrun's `--node-rank`, SLURM_NODEID/SLURM_PROCID) or else its host and pid. Its part holds
its record (`nodes/<part>/manifest.json`: host, node rank, command, exit, its ranks' state and
problems) and one small file per rank it started (`rank_<R>.json`, written by the rank at start:
its RANK, LOCAL_RANK, GROUP_RANK, LOCAL_WORLD_SIZE, WORLD_SIZE), so a reader knows which ranks
each node hosts, and tells a rank that ran no captured pass from one whose node's capture is not
in the folders it was given. Logs, blobs and status files are named by rank (and blobs by
content), so nodes sharing one folder never write the same file.

A second node joins a folder the first claimed only for the same job (`job_of`: torchrun's
rendezvous endpoint and id, or SLURM's job and step), and only a folder owned by the user and
writable by no one else; anything else is refused with one line, as before.

No torch here: the launcher and every worker's bootstrap import it.
"""

from __future__ import annotations

import os
import socket
import stat
import time
from dataclasses import dataclass
from typing import Any, Mapping

import orjson

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.capture.shared.node_ranks import (
    NODES_DIR,
    RANK_FILE_PREFIX,
    chosen_ranks,
    rank_files,
    unrecorded,
)
from graphtrain_inspect.capture.shared.rank_ranges import format_ranks

ENV_RANKS = "GTI_CAPTURE_RANKS"  # capture --ranks: "auto" or a rank list; unset: every rank records
ENV_PART = "GTI_CAPTURE_PART"  # the node part (nodes/<part>/) this launcher's ranks announce themselves in

# torchrun's options that take a value (both spellings); the first other word is the script
_TORCHRUN_VALUED = {
    "nnodes", "nproc-per-node", "node-rank", "rdzv-backend", "rdzv-endpoint", "rdzv-id", "rdzv-conf",
    "master-addr", "master-port", "max-restarts", "monitor-interval", "start-method", "role", "log-dir",
    "redirects", "tee", "local-ranks-filter", "local-addr", "logs-specs", "event-log-handler",
    "numa-binding", "signals-to-handle",
}  # fmt: skip


# -- which ranks record --------------------------------------------------------------------------


def _int(env: Mapping[str, str], name: str) -> int | None:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return None


def records_here(env: Mapping[str, str]) -> bool:
    """Whether this process records: every process unless `--ranks` was given and this one is a
    rank (RANK set) not chosen. A launcher's own process (torchrun's agent: no RANK) records, so
    that it can note how its ranks ended."""
    spec = env.get(ENV_RANKS)
    rank = _int(env, "RANK")
    if not spec or rank is None:
        return True
    world = _int(env, "WORLD_SIZE") or rank + 1
    try:
        return rank in chosen_ranks(spec, world, _int(env, "LOCAL_WORLD_SIZE") or world)
    except ValueError:
        return True  # the launcher checked the list; a changed environment records rather than loses


def node_rank_of(env: Mapping[str, str]) -> int | None:
    """This process's node: torchrun's GROUP_RANK, else a scheduler's (SLURM_NODEID), else NODE_RANK."""
    for name in ("GROUP_RANK", "SLURM_NODEID", "NODE_RANK"):
        v = _int(env, name)
        if v is not None:
            return v
    return None


def announce(directory: str, env: Mapping[str, str]) -> None:
    """A rank that records says which node hosts it: `nodes/<part>/rank_<R>.json`, written once
    (O_EXCL: a process the rank starts, with its RANK, leaves the first as it is). Nothing when the
    launcher named no part (a capture started by `start()`), or this process is no rank."""
    part, rank = env.get(ENV_PART), _int(env, "RANK")
    if not part or rank is None or os.sep in part:
        return
    local = _int(env, "LOCAL_RANK")
    doc = {
        "rank": rank,
        "local_rank": local,
        "local_world_size": _int(env, "LOCAL_WORLD_SIZE"),
        "world_size": _int(env, "WORLD_SIZE"),
        "node_rank": node_rank_of(env),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "rendezvous": _worker_rendezvous(env),
    }
    path = os.path.join(directory, NODES_DIR, part, f"{RANK_FILE_PREFIX}{rank}.json")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError:
        return
    with os.fdopen(fd, "wb") as f:
        f.write(orjson.dumps(doc))


def _worker_rendezvous(env: Mapping[str, str]) -> str | None:
    """What every rank of one job shares: the store they meet at (and torchrun's run id)."""
    addr, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    if not addr or not port:
        return None
    rid = env.get("TORCHELASTIC_RUN_ID")
    return f"{addr}:{port}" + (f" id {rid}" if rid else "")


# -- this node, as its launcher sees it ----------------------------------------------------------


@dataclass
class Node:
    job: str | None  # what every node of the job shares; None: a job of one node, as far as can be told
    node_rank: int | None
    nnodes: int | None
    part: str  # its directory under nodes/

    def record(self) -> dict[str, Any]:
        return {"job": self.job, "node_rank": self.node_rank, "nnodes": self.nnodes, "part": self.part}


def _torchrun_options(cmd: list[str]) -> dict[str, str] | None:
    """torchrun's own options in the command (`--node-rank 1`, `--node_rank=1`), or None when the
    command is not torchrun (`torchrun ...`, `python -m torch.distributed.run ...`)."""
    start = None
    for i, tok in enumerate(cmd[:4]):
        if os.path.basename(tok) == "torchrun" or (
            tok in ("torch.distributed.run", "torch.distributed.launch") and i > 0 and cmd[i - 1] == "-m"
        ):
            start = i + 1
            break
    if start is None:
        return None
    opts: dict[str, str] = {}
    i = start
    while i < len(cmd):
        tok = cmd[i]
        if not tok.startswith("-") or tok == "--":
            break
        name, eq, value = tok.lstrip("-").partition("=")
        name = name.replace("_", "-")
        if eq:
            opts[name] = value
        elif name in _TORCHRUN_VALUED and i + 1 < len(cmd):
            opts[name] = cmd[i + 1]
            i += 1
        else:
            opts[name] = ""
        i += 1
    return opts


def node_of(cmd: list[str], env: Mapping[str, str]) -> Node:
    """This launcher's node of the job: torchrun's --node-rank and rendezvous, or a scheduler's."""
    host = _safe(socket.gethostname())
    if env.get("SLURM_JOB_ID"):
        node, task = _int(env, "SLURM_NODEID"), _int(env, "SLURM_PROCID")
        job = f"slurm job {env['SLURM_JOB_ID']} step {env.get('SLURM_STEP_ID', '-')}"
        part = f"node{node if node is not None else host}" + (f".task{task}" if task is not None else "")
        return Node(job, node, _int(env, "SLURM_NNODES") or _int(env, "SLURM_JOB_NUM_NODES"), part)
    opts = _torchrun_options(cmd)
    if opts is not None and "standalone" not in opts:
        nn = opts.get("nnodes", "1")
        try:
            nnodes = max(int(x) for x in nn.split(":"))
        except ValueError:
            nnodes = None
        try:
            node = int(opts["node-rank"]) if "node-rank" in opts else None
        except ValueError:
            node = None
        if nnodes != 1 or node:
            master = f"{opts.get('master-addr', '127.0.0.1')}:{opts.get('master-port', '29500')}"
            where = opts.get("rdzv-endpoint") or master
            job = f"torchrun rendezvous {where} id {opts.get('rdzv-id', 'none')}"
            return Node(job, node, nnodes, f"node{node}" if node is not None else f"{host}.{os.getpid()}")
    return Node(None, None, None, "node0" if opts is not None else f"{host}.{os.getpid()}")


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)[:64] or "host"


# -- the folder: claim a part, or join a capture of the same job ---------------------------------


class JoinRefused(Exception):
    """This node cannot join the folder; one line says why."""


# how long a node waits for the node that claimed the folder at the same moment to write the
# manifest that names its job (it does so right after its claim)
JOIN_WAIT_S = 30.0


def part_dir(out: str, node: Node) -> str:
    return os.path.join(out, NODES_DIR, node.part)


def claim_part(out: str, node: Node) -> None:
    """Make this node's part (exclusive); JoinRefused when another launcher has it."""
    try:
        os.makedirs(os.path.join(out, NODES_DIR), exist_ok=True)
        os.mkdir(part_dir(out, node))
    except FileExistsError:
        raise JoinRefused(
            f"{out} already holds {NODES_DIR}/{node.part} of this job (node {node.node_rank} captured twice?); "
            "choose another --out"
        ) from None
    except OSError as e:
        raise JoinRefused(f"cannot create {part_dir(out, node)}: {e.strerror or e}") from None


def join(out: str, node: Node, refused: str) -> None:
    """Join the capture folder `out` another node of this job claimed: its owner is this user, no
    one else may write it, its manifest names this job. `refused` is the claim's own reason,
    said when the folder is no capture of a job of several nodes. JoinRefused otherwise."""
    if node.job is None:
        raise JoinRefused(refused)
    try:
        st = os.lstat(out)
    except OSError as e:
        raise JoinRefused(f"cannot read {out}: {e.strerror or e}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise JoinRefused(refused)
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise JoinRefused(
            f"{out} is not yours alone (owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}): a node joins "
            "only a capture folder its user owns and no one else can write; choose another --out"
        )
    deadline = time.monotonic() + JOIN_WAIT_S
    theirs: Any = None
    while True:
        theirs = _manifest_job(out)
        if theirs is not _MISSING or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if theirs is _MISSING:
        raise JoinRefused(refused)
    job, status = theirs
    if job != node.job:
        what = f"job {job!r}" if job else "a run of one node"
        raise JoinRefused(f"{out} holds a capture of another job ({what}, not {node.job!r}); choose another --out")
    if status != "running":
        # every node of one run is in its rendezvous before any ends: this is an earlier run's
        raise JoinRefused(
            f"{out} holds an earlier run of this job ({status or 'ended'}; its nodes no longer run); "
            "choose another --out"
        )
    claim_part(out, node)


_MISSING = object()


def _manifest_job(out: str) -> Any:
    try:
        fd = os.open(os.path.join(out, logformat.MANIFEST_NAME), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as f:
            m = orjson.loads(f.read(1 << 24))
    except (OSError, orjson.JSONDecodeError):
        return _MISSING
    node = m.get("node") if isinstance(m, dict) else None
    if not isinstance(node, dict):
        return None, None
    return node.get("job"), m.get("status")


def part_ranks(out: str) -> dict[str, list[int]]:
    """Each part's ranks, from the files its ranks wrote at start."""
    out_map: dict[str, list[int]] = {}
    base = os.path.join(out, NODES_DIR)
    try:
        parts = sorted(os.listdir(base))
    except OSError:
        return out_map
    for p in parts:
        try:
            names = os.listdir(os.path.join(base, p))
        except OSError:
            continue
        ranks = []
        for n in names:
            if n.startswith(RANK_FILE_PREFIX) and n.endswith(".json"):
                try:
                    ranks.append(int(n[len(RANK_FILE_PREFIX) : -len(".json")]))
                except ValueError:
                    pass
        out_map[p] = sorted(ranks)
    return out_map


def others_ranks(out: str, node: Node) -> set[int]:
    """The ranks other nodes' parts hold: not this node's to summarize, sign for or report."""
    return {r for p, rs in part_ranks(out).items() if p != node.part for r in rs}


def release_part(out: str, node: Node, joined: bool) -> bool:
    """Undo this node's part for a command that never ran (only what its launcher wrote); True
    when the node joined another's folder, whose own files stay."""
    pdir = part_dir(out, node)
    try:
        os.unlink(os.path.join(pdir, logformat.MANIFEST_NAME))
    except OSError:
        pass
    for d in (pdir, os.path.join(out, NODES_DIR)):
        try:
            os.rmdir(d)  # only if empty
        except OSError:
            pass
    return joined


def absent_lines(out: str, node: Node, spec: str | None, world: int, present: set[int]) -> list[str]:
    """What the launcher's summary says of the world's ranks without a log on this node: not chosen
    by --ranks, hosted by other nodes, or started here and ran no captured pass."""
    mine = rank_files(part_dir(out, node))
    lws = next((d["local_world_size"] for d in mine if type(d.get("local_world_size")) is int), None)
    skipped = set(unrecorded(spec, world, lws))
    absent = [r for r in range(min(world, 1 << 20)) if r not in present and r not in skipped]
    here = {d["rank"] for d in mine}
    lines = []
    if skipped:
        lines.append(f"rank {format_ranks(skipped)}: not recorded (--ranks {spec})")
    if node.job is not None:
        elsewhere = [r for r in absent if r not in here]
        absent = [r for r in absent if r in here]
        if elsewhere:
            who = f"rank {format_ranks(elsewhere)} of world size {world}"
            lines.append(f"{who}: recorded by the job's other captures (other nodes or tasks)")
    if absent:
        who = f"rank {format_ranks(absent)} of world size {world}"
        lines.append(f"{who}: recorded nothing (no log; ran no captured pass)")
    return lines
