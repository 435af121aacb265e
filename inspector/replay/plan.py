"""What a replay needs to know before anything is loaded: which pass application, whether the
capture may be unpickled at all, the blob's verified bytes, and the captured rank's environment.

Nothing here imports torch or unpickles anything: trust is decided first, and a refused capture
never reaches the loader (inspector.replay).

Trust: loading a GraphPickler blob runs pickle, which can execute code. A capture is loaded only
when it carries this user's signature over its current manifest and logs (capture.shared.signing: an
HMAC with a key only this user holds, made by `capture` at its end, by `graphtrain-inspect trust
DIR`, or by the bundled-capture loader), or with `--trust` (the user vouches for it). What the
capture says about itself (the manifest's user, host, uid; its files' owner) is shown, never
relied on: anyone who can write a capture can write those. Either way the blob file must be the
one the log names (`blobs/<sha256>.gpkl` inside the capture), a regular file, and its sha256 must
equal the one recorded in the (signed) log.

Read once: the commands that act on a capture (`replay`, `repro`) open it with `open_verified`,
which reads the manifest, the rank logs and the status files once each (inspector.read.read_once)
and parses those bytes; `check_origin` holds the same bytes to the signature, so a file swapped
after it was read changes nothing, and one swapped before is what is verified. A blob is read the
same way: one descriptor, no link followed (the `blobs/` folder included), fstat for its kind, links
and filesystem, the bytes hashed are the bytes loaded.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graphtrain_inspect.capture.shared import logformat, signing
from graphtrain_inspect.inspector.errors import CaptureUnreadable, NotFound, Refused
from graphtrain_inspect.inspector.read import read_once
from graphtrain_inspect.inspector.read.capture_files import blob_link_problem, capture_dir

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.read.capture_reader import Capture
    from graphtrain_inspect.inspector.read.capture_records import PassRecord


# ---------------------------------------------------------------------------------------------
# Choosing the pass application


@dataclass
class Target:
    """One pass application on one rank, chosen for replay."""

    rank: int
    rec: "PassRecord"
    occurrence: int  # index among the rank's applications matching the name
    matches: int  # how many applications matched the name on this rank
    target: str | None = None  # the --pass registry the capture wrapped (module:ATTR), if recorded

    @property
    def label(self) -> str:
        return f"#{self.rec.seq} {self.rec.name}"


def select(cap: "Capture", name: str, rank: int | None, occurrence: int | None) -> Target:
    """The application of pass `name` (name, module:qualname, #SEQ) on `rank` (default: lowest)."""
    if not cap.ranks:
        raise NotFound(f"{cap.path}: no ranks")
    if rank is None:
        rank = cap.ranks[0]
    if rank not in cap.ranks:
        raise NotFound(f"no rank {rank} in {cap.path} (ranks: {', '.join(map(str, cap.ranks))})")
    found = [p for p in cap.find_passes(name, rank) if p.before is not None]
    if not found:
        names = cap.pass_names()
        more = f" (passes: {', '.join(names[:20])}{' ...' if len(names) > 20 else ''})" if names else ""
        raise NotFound(f"no pass {name!r} on rank {rank}{more}")
    k = occurrence if occurrence is not None else 0
    if not 0 <= k < len(found):
        raise NotFound(
            f"pass {name!r} ran {len(found)} time(s) on rank {rank}: --occurrence must be 0..{len(found) - 1}"
        )
    rec = found[k]
    payload = cap.payload(rank, rec.record) if rec.record is not None else None
    tgt = payload.get("target") if isinstance(payload, dict) else None
    return Target(rank, rec, k, len(found), tgt if isinstance(tgt, str) else None)


def peers(cap: "Capture", t: Target) -> dict[int, "PassRecord"]:
    """The same application on the other ranks: same pipeline key, name, and occurrence of the
    name in that pipeline (how inspector.stages lines ranks up)."""

    def key(rank: int, rec: "PassRecord") -> tuple | None:
        pls = cap.pipelines(rank)
        for pl in pls:
            if rec in pl.passes:
                k = sum(1 for p in pl.passes[: pl.passes.index(rec)] if p.name == rec.name)
                return (pl.key, rec.name, k)
        return None

    want = key(t.rank, t.rec)
    out: dict[int, PassRecord] = {}
    if want is None:
        return out
    for r in cap.ranks:
        if r == t.rank:
            continue
        for pl in cap.pipelines(r):
            if pl.key != want[0]:
                continue
            same = [p for p in pl.passes if p.name == want[1]]
            if want[2] < len(same) and same[want[2]].before is not None:
                out[r] = same[want[2]]
    return out


# ---------------------------------------------------------------------------------------------
# Trust


def manifest_claims(cap: "Capture") -> str:
    """Who the capture says made it: shown to the user, never used to decide anything."""
    m = cap.manifest if isinstance(cap.manifest, dict) else None
    if m is None:
        return "it has no readable manifest, so it does not even say who made it"
    return f"its manifest says it was captured by {m.get('user')}@{m.get('host')} (uid {m.get('uid')})"


def open_verified(path: str) -> "Capture":
    """The capture at `path` (a directory, or one log file) read for replay: each file the reader
    opens read once (inspector.read.read_once), the capture parsed from those bytes; `check_origin`
    then holds the same bytes to the signature. Raises CaptureUnreadable."""
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    if not os.path.exists(path):
        raise CaptureUnreadable(f"{path}: no such file or directory")
    try:
        snap = read_once.snapshot(path)
    except OSError as e:
        raise CaptureUnreadable(f"{path}: cannot read: {e.strerror or e}") from None
    return open_capture(path, source="capture", snapshot=snap)


def check_origin(cap: "Capture", ranks: list[int], *, trust: bool) -> str:
    """Raise Refused unless the capture carries this user's signature over its current files
    (or `trust`), and every file replay will read for `ranks` (their logs; a log file given alone
    included) is one the signature lists. For a capture read once (`open_verified`) the bytes read
    are what is checked: each file read must be listed with their sha256, and every signed log and
    the manifest must be among them. Returns a one-line description of why it is trusted. The
    verdict is kept on `cap` (`cap.signature`) so `read_blob` can hold each blob to it."""
    if getattr(cap, "folders", None):
        # each node's folder carries its own signature and blobs: one folder at a time
        where = ", ".join(f"rank {r}: {cap.dir_of(r)}" for r in ranks[:1] if cap.dir_of(r))
        raise Refused(f"{cap.path} is several node folders; replay reads one: give the folder of the rank ({where})")
    claims = manifest_claims(cap)
    if trust:
        return f"trusted with --trust ({claims})"
    base = capture_dir(cap)
    snap = cap.snapshot
    v = signing.verify(base, known=snap.sha256 if snap is not None else None)
    if not v.ok:
        raise Refused(
            f"{cap.path} is not loaded: {v.why}. Replay unpickles graphs (pickle can run code) and loads only "
            f"captures signed with your key; {claims}, which proves nothing. If you trust it, pass --trust, or "
            f"sign it once with `graphtrain-inspect trust {base}`"
        )
    if snap is not None:
        problem = snapshot_problem(snap, v)
        if problem:
            raise Refused(
                f"{problem}. Replay reads only the files your signature lists, as they were signed; if you trust "
                f"it, pass --trust, or sign the capture again with `graphtrain-inspect trust {base}`"
            )
        _drop_unsigned_statuses(cap, snap, v)
    for r in ranks:
        log = cap.log_file(r)
        rel = relative_to(base, log.path) if log is not None else None
        if rel is None or not v.covers(rel):
            name = rel or (log.path if log is not None else f"the log of rank {r}")
            raise Refused(
                f"{name} is not loaded: your signature on {base} does not cover it (added after the capture "
                "was signed, or not a regular file). Replay reads only signed files; if you trust it, pass "
                f"--trust, or sign the capture again with `graphtrain-inspect trust {base}`"
            )
    cap.signature = v
    warn = signing.key_folder_problem()
    return f"{v.why} ({claims})" + (f"; warning: {warn}" if warn else "")


def _drop_unsigned_statuses(cap: "Capture", snap: "read_once.Snapshot", v: "signing.Verdict") -> None:
    """Status files read once but not as signed (added, changed) are left out of `cap.statuses`."""
    for rel, sha in snap.sha256.items():
        if not rel.startswith(logformat.STATUS_DIR + "/") or v.listed.get(rel) == sha:
            continue
        who = logformat.status_of_file_name(rel.rpartition("/")[2])
        if who is not None and who[0] in cap.statuses:
            cap.statuses[who[0]] = [st for st in cap.statuses[who[0]] if st.get("pid") != who[1]]


def snapshot_problem(snap: "read_once.Snapshot", v: "signing.Verdict") -> str | None:
    """Why the bytes read once are not the signed ones (None when they are): a file read that the
    signature does not list, or lists with another sha256 (changed as it was read), a signed log or
    manifest that was not read (removed, or made a link, while it was read)."""
    for rel, sha in sorted(snap.sha256.items()):
        if rel.startswith(logformat.STATUS_DIR + "/"):
            continue  # shown, never deciding: one not as signed is left out (`_drop_unsigned_statuses`)
        if not v.covers(rel):
            return f"{rel} is not loaded: your signature on {snap.base} does not cover it (added after it was signed)"
        if v.listed.get(rel) != sha:
            return f"{rel} is not loaded: the bytes read are not the ones signed (it changed while it was read)"
    if snap.single is None:
        for rel in sorted(v.listed):
            if "/" in rel or rel in snap.sha256:
                continue
            if rel == logformat.MANIFEST_NAME or (
                rel.startswith(logformat.LOG_PREFIX) and rel.endswith(logformat.LOG_SUFFIX)
            ):
                why = snap.problems.get(rel, "missing")
                return f"{rel} is not loaded: it is signed but could not be read as signed ({why})"
    return None


def is_file_spec(spec: str) -> bool:
    """Whether `MODULE:QUALNAME` names a file (`path/to/file.py:fn`) rather than a module."""
    mod_name = spec.strip().rpartition(":")[0]
    return mod_name.endswith(".py") or os.sep in mod_name or "/" in mod_name


def relative_to(base: str, path: str) -> str | None:
    """`path` relative to the capture directory `base`, `/`-separated; None when outside it."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(base))
    if rel == os.curdir or rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        return None
    return rel.replace(os.sep, "/")


@dataclass
class Blob:
    gid: str
    sha256: str
    path: str
    data: bytes = field(repr=False)


def read_blob(cap: "Capture", rec: "PassRecord", gid: str | None, *, trust: bool, what: str = "graph") -> Blob:
    """The verified bytes of the blob of graph `gid` named in the pass record (Refused if none or bad)."""
    if gid is None:
        raise Refused(f"pass #{rec.seq} {rec.name} on rank {rec.rank} has no {what} graph recorded")
    ref = (rec.blobs or {}).get(gid)
    if not isinstance(ref, dict):
        why = "the capture ran with --no-blobs, or the blob could not be written (see `ls`: capture errors)"
        raise Refused(f"no blob of the {what} graph {gid} of #{rec.seq} {rec.name} on rank {rec.rank}: {why}")
    sha = ref.get("sha256")
    if not isinstance(sha, str) or not logformat.is_valid_sha256(sha):
        raise Refused(
            f"the blob reference of {gid} in the log of rank {rec.rank} has no valid sha256; refusing to load it"
        )
    rel = logformat.blob_relpath(sha)
    if ref.get("path") not in (None, rel):
        raise Refused(
            f"the log of rank {rec.rank} names blob path {ref.get('path')!r} for {gid}, not {rel!r}; "
            "refusing to load it"
        )
    base = capture_dir(cap)
    data, st, base_dev = _read_blob_file(base, rel, what, gid)
    if not trust:
        odd = blob_link_problem(base, st, base_dev)
        if odd:
            raise Refused(f"blob {rel} {odd}; refusing to load it without --trust")
        v = cap.signature
        if v is not None and not v.covers(rel):
            raise Refused(
                f"blob {rel} is not covered by your signature on {base} (added after it was signed); refusing to "
                f"load it without --trust (or sign the capture again with `graphtrain-inspect trust {base}`)"
            )
    got = hashlib.sha256(data).hexdigest()
    if got != sha:
        raise Refused(
            f"blob {rel} does not match the sha256 the log recorded (file has {got[:16]}..., log says "
            f"{sha[:16]}...): it changed after the capture; refusing to load it"
        )
    return Blob(gid, sha, rel, data)


def _read_blob_file(base: str, rel: str, what: str, gid: str) -> tuple[bytes, os.stat_result, int]:
    """The bytes of blob `rel`, its fstat and the capture directory's st_dev: read through one
    descriptor, the `blobs/` folder and the file each opened without following a link (a linked
    folder would lead out of the capture). Refused when it cannot be read so."""
    folder, _, name = rel.partition("/")
    try:
        dfd = read_once.open_dir(base)
    except OSError as e:
        raise Refused(f"cannot read blob {rel}: {e.strerror or e}") from None
    try:
        base_dev = os.fstat(dfd).st_dev
        try:
            bfd = read_once.open_dir(folder, dfd, follow=False)
        except FileNotFoundError:
            raise Refused(f"blob {rel} of the {what} graph {gid} is missing from {base}") from None
        except OSError as e:
            real = os.path.realpath(os.path.join(base, folder))
            raise Refused(
                f"blob {rel}: {folder}/ is {e.strerror or e}, resolving to {real}, outside the capture {base} "
                "(a linked directory); refusing to load it"
            ) from None
        try:
            data, st = read_once.read_regular(name, bfd)
        except FileNotFoundError:
            raise Refused(f"blob {rel} of the {what} graph {gid} is missing from {base}") from None
        except OSError as e:
            raise Refused(f"blob {rel} is not a regular file ({e.strerror or e}); refusing to load it") from None
        finally:
            os.close(bfd)
    finally:
        os.close(dfd)
    return data, st, base_dev


# ---------------------------------------------------------------------------------------------
# The captured rank's environment


# Set by the capture itself, never by the training: not replayed.
_SKIP_ENV_PREFIXES = ("GTI_",)


def rank_environment(cap: "Capture", rank: int) -> dict[str, str]:
    """Environment variables the captured rank ran with, as far as the capture knows them:
    torchrun's rank variables from the header (and the rank table), and the manifest's recorded
    settings (TORCH_*, NCCL_*, CUDA_*, MASTER_* ...), minus the capture's own GTI_* variables."""
    env: dict[str, str] = {}
    m = cap.manifest if isinstance(cap.manifest, dict) else {}
    for k, v in (m.get("env") or {}).items():
        if isinstance(k, str) and isinstance(v, str) and not k.startswith(_SKIP_ENV_PREFIXES):
            env[k] = v
    h = cap.header(rank) or {}
    if not launched_distributed(cap, rank):
        # A plain single-process run: torchrun's variables were not set there, so not here either.
        return env
    world = w if isinstance(w := h.get("world_size"), int) else cap.world_size
    local = h.get("local_rank") if isinstance(h.get("local_rank"), int) else rank
    host = h.get("host")
    same_host = [r for r in cap.ranks if (cap.header(r) or {}).get("host") == host] if host else []
    # Ranks of this host in the capture (all of them when every rank was captured).
    local_world = len(same_host) if same_host and len(cap.ranks) == world else None
    env.update(
        {
            "RANK": str(rank),
            "LOCAL_RANK": str(local),
            "WORLD_SIZE": str(world),
            "GROUP_RANK": str(h.get("group_rank", 0) if isinstance(h.get("group_rank"), int) else 0),
            "ROLE_RANK": str(rank),
            "ROLE_WORLD_SIZE": str(world),
        }
    )
    if local_world:
        env["LOCAL_WORLD_SIZE"] = str(local_world)
        env["LOCAL_ROLE_WORLD_SIZE"] = str(local_world)
        if world % local_world == 0:
            env["GROUP_WORLD_SIZE"] = str(world // local_world)
    cvd = h.get("cuda_visible_devices")
    if isinstance(cvd, str):
        env["CUDA_VISIBLE_DEVICES"] = cvd
    return env


_LAUNCHERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch", "torchx", "srun", "mpirun")


def distributed_initialized(cap: "Capture", rank: int) -> bool:
    """Whether torch.distributed was initialized on the rank (its rank table lists groups)."""
    t = cap.rank_table(rank) or {}
    return bool(t.get("groups")) or bool(t.get("backend"))


def launched_distributed(cap: "Capture", rank: int) -> bool:
    """Whether the rank ran under a launcher that sets RANK/WORLD_SIZE (torchrun and the like)."""
    h = cap.header(rank) or {}
    if isinstance(h.get("world_size"), int) and h["world_size"] > 1:
        return True
    if distributed_initialized(cap, rank):
        return True
    cmd = (cap.manifest or {}).get("command") if isinstance(cap.manifest, dict) else None
    words = [str(w) for w in cmd] if isinstance(cmd, list) else []
    return any(any(l in w for l in _LAUNCHERS) for w in words)


def rank_argv(cap: "Capture", rank: int) -> list[str] | None:
    argv = (cap.header(rank) or {}).get("argv")
    return [str(a) for a in argv] if isinstance(argv, list) else None


def torch_versions(cap: "Capture", rank: int) -> str | None:
    """The torch version the capture ran with (the rank's header, else the manifest)."""
    v = (cap.header(rank) or {}).get("torch_version")
    if not v and isinstance(cap.manifest, dict):
        v = cap.manifest.get("torch_version")
    return str(v) if v else None


def major_minor(version: str | None) -> tuple[int, int] | None:
    if not version:
        return None
    parts = version.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


_NOT_OP_NAMESPACES = frozenset({"aten", "prims", "higher_order", "operator", "_operator", "builtins", "torch", "math"})


def op_namespaces(cap: "Capture", rank: int, gid: str) -> set[str]:
    """Operator namespaces the graph's node table uses (`device_mesh`, `_c10d_functional` ...),
    read from the log, so their libraries can be imported before the blob is loaded."""
    t = cap.node_table(rank, gid)
    out: set[str] = set()
    if t is None:
        return out
    for _, row in t.iter_nodes():
        if row.get("op") != "call_function":
            continue
        parts = str(row.get("target") or "").split(".")
        # an OpOverload prints as namespace.op.overload; Python callables as module.qualname
        if len(parts) == 3 and parts[0] not in _NOT_OP_NAMESPACES and parts[0] not in sys.modules:
            out.add(parts[0])
    return out


def describe_env(env: dict[str, Any], keys: tuple[str, ...] = ("RANK", "LOCAL_RANK", "WORLD_SIZE")) -> str:
    return " ".join(f"{k}={env[k]}" for k in keys if k in env)
