"""The captures bundled in samples/captures/ (recorded on GPUs), unpacked on first use.

Each bundled capture is `samples/captures/<name>.tar.xz` holding one directory `<name>/`. It is
unpacked once into the user's cache directory (keyed by the archive's hash, so a newer archive
unpacks afresh) and read from there like any other capture.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tarfile
from pathlib import Path

ARCHIVE_SUFFIX = ".tar.xz"
DEFAULT = "h200x2-rank-baked"  # what `tui` with no argument opens: a real bug to find


def captures_dir() -> Path:
    # The samples package's folder, found without importing it (read imports no later stage).
    spec = importlib.util.find_spec("graphtrain_inspect.samples")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]) / "captures" if locations else Path(__file__).resolve().parents[2] / "samples" / "captures"


def names() -> list[str]:
    d = captures_dir()
    if not d.is_dir():
        return []
    return sorted(p.name[: -len(ARCHIVE_SUFFIX)] for p in d.iterdir() if p.name.endswith(ARCHIVE_SUFFIX))


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "graphtrain-inspect" / "captures"


class BundledError(ValueError):
    pass


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
    target = cache_root() / f"{name}-{digest}"
    if not (target / name).is_dir():
        tmp = target.with_name(target.name + f".tmp{os.getpid()}")
        tmp.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive, "r:xz") as tf:
            _safe_extract(tf, tmp)
        try:
            os.replace(tmp, target)
        except OSError:  # another process unpacked it first
            pass
    return target / name


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
            raise BundledError(f"unsafe member {m.name!r} in {tf.name}")
    tf.extractall(dest)
