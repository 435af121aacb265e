"""Which ranks a capture records, and which node hosts each: what the launcher, each worker and
the reader decide alike.

`--ranks LIST` (`0-7,512`, or `auto`): `chosen_ranks` is what a worker asks before it installs
anything, and what the reader asks to tell a rank left out on purpose from a lost one
(`unrecorded`). `auto` is the choice `--simulate-world` makes by default (`choose_ranks`: the first
and last rank, local rank and host, and ranks that tell them apart), made by every worker alike
from WORLD_SIZE and LOCAL_WORLD_SIZE, so all agree without talking.

Each node's part of a capture folder, `nodes/<part>/`, holds one `rank_<R>.json` per rank it
started (written by capture.nodes.announce); `rank_files` reads them back.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any

import orjson

from graphtrain_inspect.capture.shared import rank_ranges

NODES_DIR = "nodes"
RANK_FILE_PREFIX = "rank_"
_FAR = 1 << 30  # a rank list is read before the world size is known: any rank up to this


# -- which ranks record ---------------------------------------------------------------------------


def rank_spec_problem(spec: str) -> str | None:
    """Why `--ranks SPEC` cannot be read (None when it can): `auto` or a list like 0-7,512."""
    if spec.strip() == "auto":
        return None
    try:
        rank_ranges.parse_ranks(spec, _FAR)
    except ValueError as e:
        return f"--ranks {spec}: {e} (give a list like 0-7,512, or auto)"
    return None


def chosen_ranks(spec: str, world: int, local_world_size: int) -> list[int]:
    """The ranks of a `world` that `--ranks SPEC` records (those past the world are no rank of it)."""
    if spec.strip() == "auto":
        k = max(1, min(local_world_size or world, world))
        return choose_ranks(world, k, Meshes())[0]
    return [r for r in rank_ranges.parse_ranks(spec, _FAR) if r < world]


def unrecorded(spec: str | None, world: int, local_world_size: int | None) -> list[int]:
    """The ranks of the world `--ranks SPEC` left out (none without --ranks)."""
    if not spec or world <= 0 or world > 1 << 20:
        return []
    try:
        chosen = set(chosen_ranks(spec, world, local_world_size or world))
    except ValueError:
        return []
    return [r for r in range(world) if r not in chosen]


# -- each node's rank files ----------------------------------------------------------------------


def rank_files(part: str) -> list[dict[str, Any]]:
    """The rank files of a part directory (`rank_<R>.json`), those that read."""
    docs: list[dict[str, Any]] = []
    try:
        names = sorted(os.listdir(part))
    except OSError:
        return docs
    for n in names:
        if not (n.startswith(RANK_FILE_PREFIX) and n.endswith(".json")):
            continue
        try:
            flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
            fd = os.open(os.path.join(part, n), flags)
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    continue
                doc = orjson.loads(f.read(1 << 16))
        except (OSError, orjson.JSONDecodeError):
            continue
        if isinstance(doc, dict) and type(doc.get("rank")) is int:
            docs.append(doc)
    return docs


# -- the default choice: ranks that tell every rank-derived value apart -------------------------


@dataclass
class Meshes:
    """Per-rank coordinates of the meshes that span the whole world: {'tp': [coord of rank 0, ...]}."""

    coords: dict[str, list[int]] = field(default_factory=dict)
    source: str = ""  # "--mesh dp=4,tp=2" | "rank 0's mesh (dp, tp, ep) = (2, 2, 2)" | ""


def mesh_coords(names: list[str], shape: list[int]) -> dict[str, list[int]]:
    """Row-major coordinates (init_device_mesh's layout) of every rank."""
    world = 1
    for n in shape:
        world *= n
    out: dict[str, list[int]] = {name: [0] * world for name in names}
    for r in range(world):
        rest = r
        for name, size in zip(reversed(names), reversed(shape)):
            out[name][r] = rest % size
            rest //= size
    return out


def choose_ranks(
    world: int, local_world_size: int, meshes: Meshes, always: tuple[int, ...] = (0,)
) -> tuple[list[int], list[str]]:
    """A small set of ranks on which every rank-derived value takes its first and last value and no
    two of them agree everywhere (so a literal is attributed to exactly one); with reasons."""
    k = local_world_size
    vectors: dict[str, list[int]] = {
        "rank": list(range(world)),
        "local rank": [r % k for r in range(world)],
    }
    if world > k:
        vectors["host (group rank)"] = [r // k for r in range(world)]
    for name, col in meshes.coords.items():
        vectors[f"coordinate[{name}]"] = col
    chosen: list[int] = []
    why: dict[int, list[str]] = {}

    def add(r: int, reason: str) -> None:
        if r not in why:
            chosen.append(r)
            why[r] = []
        if reason not in why[r]:
            why[r].append(reason)

    for r in always:
        add(r, "first rank")
    # first and last value of each
    for name, col in vectors.items():
        lo, hi = min(col), max(col)
        if lo == hi:
            continue
        for target, word in ((lo, "first"), (hi, "last")):
            if not any(col[r] == target for r in chosen):
                add(next(r for r in range(world) if col[r] == target), f"{word} {name} ({target})")
    # tell every two apart: the check attributes a literal by matching it to a vector, also as
    # k * v and v + c; two vectors so related on the chosen ranks need a rank that breaks it
    names = [n for n in vectors if min(vectors[n]) != max(vectors[n])]
    # (rank and local rank on one host are the same thing: no rank tells them apart)
    apart = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :] if not confusable(vectors[a], vectors[b])]
    for _ in range(world):
        pairs = [
            (a, b) for a, b in apart if confusable([vectors[a][r] for r in chosen], [vectors[b][r] for r in chosen])
        ]
        if not pairs:
            break
        best, best_n = None, 0
        for r in range(world):
            if r in why:
                continue
            n = sum(vectors[a][r] != vectors[b][r] for a, b in pairs)
            if n > best_n:
                best, best_n = r, n
        if best is None:
            break
        a, b = next((a, b) for a, b in pairs if vectors[a][best] != vectors[b][best])
        add(best, f"tells {a} from {b}")
    order = sorted(chosen)
    return order, [f"rank {r}: {'; '.join(why[r])}" for r in order]


def confusable(a: list[int], b: list[int]) -> bool:
    """Is a = k * b + c (or b = k * a + c) on these ranks, for some k and c?"""
    from fractions import Fraction

    def affine(x: list[int], y: list[int]) -> bool:  # y = k * x + c ?
        pts = sorted(set(zip(x, y)))
        if len({p[0] for p in pts}) != len(pts):
            return False  # one x, two ys
        if len(pts) < 2:
            return True
        (x0, y0), (x1, y1) = pts[0], pts[1]
        k = Fraction(y1 - y0, x1 - x0)
        return all(Fraction(yy - y0) == k * (xx - x0) for xx, yy in pts)

    return affine(a, b) or affine(b, a)
