"""Process groups named by what they are (`normalize.group_keys`), from rank tables torch builds:
a real `init_device_mesh` (with sub-meshes and flattened dims) on torch's fake process group, once
per rank, written by the capture's own `rank_table`. For every two ranks, the groups of one role
(one set of mesh dims) get one name, groups of different roles different names, and nothing
depends on the order the table lists its meshes in (the capture walks a WeakSet)."""

from __future__ import annotations

import itertools
import math

import orjson
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from graphtrain_inspect.capture import rank_table  # noqa: E402
from graphtrain_inspect.inspector.diff.normalize import RankContext, group_keys  # noqa: E402

NAMES = ("pp", "dp", "cp", "tp")


def tables_of(
    shape: tuple[int, ...], names: tuple[str, ...], subs: list[tuple[str, ...]], flats: list[tuple[str, ...]]
) -> list[dict]:
    """Each rank's rank table, as the capture writes it, of a job that builds the mesh, its
    sub-meshes (`mesh["tp"]`, `mesh["dp", "tp"]`) and flattened dims (`mesh["dp", "cp"]._flatten()`)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    world = math.prod(shape)
    out = []
    for rank in range(world):
        dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
        try:
            mesh = init_device_mesh("cpu", shape, mesh_dim_names=names)
            keep = [mesh] + [mesh[s if len(s) > 1 else s[0]] for s in subs] + [mesh[f]._flatten() for f in flats]
            rank_table.MESHES.clear()
            for m in keep:
                rank_table.MESHES.add(m)
            out.append(orjson.loads(orjson.dumps(rank_table.rank_table(rank, world))))  # as logged
        finally:
            rank_table.MESHES.clear()
            dist.destroy_process_group()
    return out


@st.composite
def meshes(draw):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.sampled_from([1, 2, 2, 3]), min_size=ndim, max_size=ndim)))
    # at most 12 ranks: 3s become 1s, then the last 2s (2x2x2x2 has no 3 to drop)
    while math.prod(shape) > 12:
        big = max(range(ndim), key=lambda i: (shape[i], i))
        shape = shape[:big] + (1,) + shape[big + 1 :]
    names = NAMES[-ndim:]
    ordered = [c for k in range(1, ndim) for c in itertools.combinations(names, k)]
    subs = draw(st.lists(st.sampled_from(ordered), unique=True, max_size=3)) if ordered else []
    pairs = [c for c in itertools.combinations(names, 2)]
    flats = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=1)) if pairs else []
    return shape, names, subs, flats


def _dims_of(table: dict) -> dict[str, set[str]]:
    """Group name -> every mesh dim that uses it, on this rank."""
    dims: dict[str, set[str]] = {}
    for mesh in table["meshes"]:
        for dim, name in mesh["group_names"].items():
            dims.setdefault(name, set()).add(dim)
    return dims


@settings(max_examples=40, deadline=None)
@given(meshes(), st.randoms(use_true_random=False))
def test_one_name_per_role_on_every_rank_whatever_the_mesh_order(spec, rnd):
    shape, names, subs, flats = spec
    tables = tables_of(shape, names, subs, flats)
    world = len(tables)
    by_role: dict[frozenset, set[str]] = {}  # the dims a group serves -> the names it got
    for table in tables:
        keys = group_keys(table)
        served = _dims_of(table)
        for name, dims in served.items():
            by_role.setdefault(frozenset(dims), set()).add(keys[name])
        # different groups of this rank, different names (unless both are the whole world)
        named = [keys[n] for n in served if keys[n] != "world"]
        assert len(named) == len(set(named)), (shape, names, keys, served)
        # the order of the meshes changes nothing
        shuffled = dict(table, meshes=rnd.sample(table["meshes"], len(table["meshes"])))
        a = RankContext.from_table(table["rank"], table)
        b = RankContext.from_table(table["rank"], shuffled)
        assert (a.group_keys, a.coordinates, a.group_positions) == (b.group_keys, b.coordinates, b.group_positions)
        # a rank's coordinate on each dim of the full mesh is the one torch gives it
        full = next(m for m in table["meshes"] if m["dim_names"] == list(names))
        assert [a.coordinates[n] for n in names] == full["coordinate"]
    # one name per role on every rank; roles that are not the whole world have names of their own
    for role, got in by_role.items():
        assert len(got) == 1, (shape, names, role, got)
    roles = {next(iter(v)): k for k, v in by_role.items() if v != {"world"}}
    assert len(roles) == len([v for v in by_role.values() if v != {"world"}]), by_role
    assert world == math.prod(shape)


def test_tp_group_through_the_2d_mesh_and_its_sub_mesh_has_one_name():
    """The DTensor TP case: the tp group is listed by the (dp, tp) mesh and by mesh["tp"]; the
    old first-found name was `mesh[2x2].tp` or `mesh[2].tp` depending on the WeakSet's order."""
    tables = tables_of((2, 2), ("dp", "tp"), [("tp",)], [])
    ctxs = [RankContext.from_table(t["rank"], t) for t in tables]
    tp_names = [next(m for m in t["meshes"] if len(m["dim_names"]) == 2)["group_names"]["tp"] for t in tables]
    assert tp_names == ["3", "3", "4", "4"]  # each rank's own group, as torch names them
    assert {c.group_keys[n] for c, n in zip(ctxs, tp_names)} == {"mesh.tp[2]"}
    assert [c.group_positions["mesh.tp[2]"] for c in ctxs] == [0, 1, 0, 1]
    assert all(c.group_keys["0"] == "world" for c in ctxs)


def test_dims_of_size_one_and_a_flattened_dim_on_two_ranks():
    """graph_trainer's (batch, fsdp, cp, tp) = (1, 2, 1, 1) on 2 ranks: fsdp and the flattened
    batch_fsdp reuse the world group; each size-1 dim has a group of this rank alone."""
    tables = tables_of((1, 2, 1, 1), ("batch", "fsdp", "cp", "tp"), [("tp",)], [("batch", "fsdp")])
    keys = [group_keys(t) for t in tables]
    for t, k in zip(tables, keys):
        g = next(m for m in t["meshes"] if len(m["dim_names"]) == 4)["group_names"]
        assert [k[g[d]] for d in ("batch", "fsdp", "cp", "tp")] == [
            "mesh.batch[1]",
            "world",
            "mesh.cp[1]",
            "mesh.tp[1]",
        ]


def test_old_tables_and_groups_outside_any_mesh():
    """A table of an older capture, and groups made with new_group: a description when torch
    gave one, else the members' pattern, which is the same on every rank of a regular layout."""
    t0 = {
        "rank": 0,
        "world_size": 4,
        "groups": {"0": {"ranks": [0, 1, 2, 3]}, "1": {"ranks": [0, 2]}, "2": {"ranks": [0, 1], "desc": "pairs"}},
        "meshes": [],
    }
    t3 = {
        "rank": 3,
        "world_size": 4,
        "groups": {"0": {"ranks": [0, 1, 2, 3]}, "4": {"ranks": [1, 3]}, "5": {"ranks": [2, 3], "desc": "pairs"}},
        "meshes": [],
    }
    assert group_keys(t0) == {"0": "world", "1": "ranks[2,stride=2]", "2": "group[pairs]"}
    assert group_keys(t3) == {"0": "world", "4": "ranks[2,stride=2]", "5": "group[pairs]"}
    irregular = {
        "rank": 0,
        "world_size": 8,
        "groups": {"7": {"ranks": [0, 1, 5]}},
        "meshes": [{"error": "RuntimeError: half built"}, "junk"],
    }
    assert group_keys(irregular) == {"7": "ranks[3,offsets=0/1/5]"}
    assert RankContext.from_table(0, {"meshes": None, "groups": None}).group_keys == {}
