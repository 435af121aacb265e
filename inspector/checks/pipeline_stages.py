"""Ranks by pipeline-parallel stage: ranks of different stages run different parts of the model,
so their graphs are compared only within a stage (`check`, through CheckContext.rank_groups, and
`ls`'s line of which ranks agree). A rank's stage is its coordinate along the mesh dimension named
for pipelining; without such a dimension every rank is one group."""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

# mesh dimension names that mean pipeline parallelism (torchtitan's "pp", and the usual others)
PP_DIMS = ("pp", "pipeline", "stage", "pp_stage")


def stage_dim(coordinates: Mapping[str, int]) -> tuple[str, int] | None:
    """(dimension name, coordinate) of the rank's pipeline stage, or None without such a dimension."""
    return next(((d, v) for d, v in coordinates.items() if d.lower() in PP_DIMS), None)


def stage_groups(
    ranks: Iterable[int], coordinates_of: Callable[[int], Mapping[str, int]]
) -> list[tuple[tuple[str, int] | None, list[int]]]:
    """The ranks by pipeline stage, in the order of their lowest rank: (stage or None, ranks)."""
    groups: dict[tuple[str, int] | None, list[int]] = {}
    for r in sorted(ranks):
        groups.setdefault(stage_dim(coordinates_of(r)), []).append(r)
    return list(groups.items())
