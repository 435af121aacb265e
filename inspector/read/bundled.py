"""The captures bundled in samples/captures/ (recorded on GPUs), unpacked on first use.

Each bundled capture is `samples/captures/<name>.tar.xz` holding one directory `<name>/`. It is
unpacked once into the user's cache directory (keyed by the archive's hash, so a newer archive
unpacks afresh) and read from there like any other capture.

The unpacked copy is signed with the user's key as it is unpacked (capture.shared.signing), so `replay`
and the TUI's replay key load it without `--trust`: the archive is part of the installed package,
code the user already runs (whoever can change it can change the tool itself); the captures'
manifests name the GPU hosts and users they were recorded by, which is no reason to trust or
distrust them. The cache key holds the key's id too, so a new key unpacks (and signs) afresh.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import tarfile
from pathlib import Path

from graphtrain_inspect.capture.shared import signing
from graphtrain_inspect.inspector.errors import BundledError

ARCHIVE_SUFFIX = ".tar.xz"
DEFAULT = "h200x2-rank-divergent"  # what `tui` with no argument opens: a real bug to find, on both ranks


def captures_dir() -> Path:
    # The samples package's folder, found without importing it (read imports no later stage).
    spec = importlib.util.find_spec("graphtrain_inspect.samples")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return (
        Path(locations[0]) / "captures" if locations else Path(__file__).resolve().parents[2] / "samples" / "captures"
    )


def names() -> list[str]:
    d = captures_dir()
    if not d.is_dir():
        return []
    return sorted(p.name[: -len(ARCHIVE_SUFFIX)] for p in d.iterdir() if p.name.endswith(ARCHIVE_SUFFIX))


# What each bundled capture holds, one line each for `--list-samples` (the full recording commands
# and what `check` finds are in samples/README.md's table, printed by samples/captures_table.py).
_TRAIN = "sample MoE training"
_COOR = "sample compiled on rank 0, loaded by all"
_CODEGEN = "Inductor code compiled on rank 0, loaded by all"
_FSDP2 = "torch FSDP2 + torch.compile"
DESCRIPTIONS = {
    "clean": f"{_TRAIN}, no bug",
    "rank-baked": f"{_TRAIN}, planted rank-baked slice offset (rank-baked-constant with --shared-graph)",
    "coor-clean": f"{_COOR}, no bug",
    "coor-rank-baked": f"{_COOR}, planted rank-baked slice offset (rank-baked-constant)",
    "device-literal": f"{_TRAIN}, planted device literal (device-baked with --shared-graph)",
    "rank-divergent": f"{_TRAIN}, a pass that diverges across ranks (rank-divergent-graph)",
    "stale-symbol": f"{_TRAIN}, planted stale unbacked symbol (stale-unbacked-symbol)",
    "codegen-coor": f"{_CODEGEN} (device-baked in the generated code)",
    "codegen-virtual": f"{_CODEGEN}, --virtual-local-rank (device-baked)",
    "codegen-per-rank": "Inductor code compiled on each rank, no bug (device-baked with --shared-graph)",
    "fsdp2-compile-clean": f"{_FSDP2}, no bug",
    "fsdp2-compile-rank-literal": f"{_FSDP2}, planted y * (rank + 1) (rank-baked-constant with --shared-graph)",
    "rank-recompile-divergent": "torch.compile where rank 1 alone recompiles (rank-divergent-compile)",
    "rank-recompile-twin": "torch.compile, no rank recompiles, no bug",
    "precompile-load": "rank 0 compiles, every rank loads and runs a load-time pass; baked slice (rank-baked-constant)",
}


def describe(name: str) -> str:
    """One line on what the bundled capture `name` holds: hardware, program, planted bug."""
    m = re.fullmatch(r"h(\d+)x(\d+)-(.+)", name)
    if not m:
        return ""
    what = DESCRIPTIONS.get(m.group(3), m.group(3))
    return f"{m.group(2)} x H{m.group(1)}: {what}"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "graphtrain-inspect" / "captures"


def path_of(name: str | None = None) -> Path:
    """The unpacked directory of a bundled capture (the default one without a name)."""
    available = names()
    if not available:
        raise BundledError(f"no bundled captures in {captures_dir()}")
    name = name or (DEFAULT if DEFAULT in available else available[0])
    if name not in available:
        raise BundledError(f"no bundled capture named {name!r}; there are: {', '.join(available)}")
    archive = captures_dir() / f"{name}{ARCHIVE_SUFFIX}"
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()[:12]
    try:
        key: bytes | None = signing.load_key()
    except signing.KeyProblem:
        key = None  # unpacked unsigned: replay then needs --trust, and says so
    target = cache_root() / f"{name}-{digest}-{signing.key_id(key) if key else 'unsigned'}"
    if not (target / name).is_dir():
        tmp = target.with_name(target.name + f".tmp{os.getpid()}")
        tmp.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive, "r:xz") as tf:
            _safe_extract(tf, tmp)
        if key is not None and (tmp / name).is_dir():
            signing.sign(str(tmp / name), key)
        try:
            os.replace(tmp, target)
        except OSError:  # another process unpacked it first
            pass
    return target / name


def sample_of(path: str | os.PathLike | None) -> str | None:
    """The name of the bundled capture unpacked at `path` (by `path_of`: the cache's
    `<name>-<digest>-<key>/<name>`), None for any other path: how every command and the TUI name
    a sample to the user (`--sample NAME`), not by its place in the cache."""
    if not path:
        return None
    p = Path(os.path.abspath(path))
    name = p.name
    if p.parent.parent != Path(os.path.abspath(cache_root())) or not p.parent.name.startswith(f"{name}-"):
        return None
    return name if name in names() else None


def capture_words(path: str | os.PathLike) -> list[str]:
    """How a command line names the capture at `path`: `--sample NAME` for a bundled one, else the path."""
    name = sample_of(path)
    return ["--sample", name] if name else [str(path)]


def installed_source(recorded: str, recorded_root: str | None) -> str | None:
    """For a file a bundled capture's stack traces name (recorded on a GPU host, under the
    program's directory `recorded_root`: its manifest's cwd), the same file in this installation
    (the package's samples/; tests/programs/ too in a checkout), or None when there is none."""
    if not recorded or not recorded_root:
        return None
    root = recorded_root.rstrip("/") + "/"
    if not recorded.startswith(root):
        return None
    rel = Path(recorded[len(root) :])
    if rel.is_absolute() or ".." in rel.parts:
        return None
    here = captures_dir().parent.parent / rel  # samples/captures -> the package's (a checkout's) root
    return str(here) if here.is_file() else None


def _safe_extract(tf: tarfile.TarFile, dest: Path) -> None:
    # Never write outside dest, never create links or devices: the "data" filter where this
    # Python has it, the same rules by hand where it does not.
    if hasattr(tarfile, "data_filter"):
        tf.extractall(dest, filter="data")
        return
    root = dest.resolve()
    for m in tf.getmembers():
        p = (dest / m.name).resolve()
        if not (m.isfile() or m.isdir()) or root not in (p, *p.parents):
            raise BundledError(f"unsafe member {m.name!r} in {tf.name!s}")
    tf.extractall(dest)


# What the sample training's passes read besides their graph: its bug switches, which
# `samples.train` sets from its command line (`--bug NAME`). Replaying or reproducing a planted pass
# without them runs the fixed pass and reports the bug "gone". The function only sets the switches
# the captured argv names, so it is right for every capture of the sample, bundled or the user's own.
SAMPLE_SETUP = "graphtrain_inspect.samples.bugs:from_argv"
SAMPLE_TRAINING = ("graphtrain_inspect.samples.train", "samples.train")


def runs_the_sample(manifest: object) -> bool:
    """Whether a capture's command ran the sample training (`-m graphtrain_inspect.samples.train`,
    or its train.py), from the manifest's command line."""
    command = manifest.get("command") if isinstance(manifest, dict) else None
    words = [w for w in command if isinstance(w, str)] if isinstance(command, list) else []
    return any(w in SAMPLE_TRAINING or w.replace(os.sep, "/").endswith("samples/train.py") for w in words)


def setup_of(path: str | os.PathLike | None, manifest: object = None) -> list[str]:
    """The `--setup` functions a replay or repro of a capture needs: the sample training's own
    for a bundled sample (at `path`) or a capture whose command ran the sample, none for others."""
    return [SAMPLE_SETUP] if sample_of(path) or runs_the_sample(manifest) else []
