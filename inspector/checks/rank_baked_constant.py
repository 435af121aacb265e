"""rank-baked-constant: a literal that differs across ranks where the graphs ought to agree.

At aligned nodes of the same graph state on different ranks (after normalizing group names and
the own device), a literal differs: an int, float, bool or string, a value inside a (nested)
list, or an element of a small tensor constant. The evidence is the value on each rank and the
rank-derived vector it equals exactly: global rank, local rank, a mesh coordinate, the rank's
position in a process group, or a multiple of one (`k * v`, `k * (v + 1)`, and for three or more
distinct values `a + k * v`). Matching a vector is an error; differing otherwise is a warning.

Where the literal comes from decides how bad a match is. A pass that puts a rank-derived literal
into a graph makes the pipeline's output rank-specific: an error wherever it runs (graph_trainer's
precompile shares pass outputs). A literal already in the traced graph (or in code Inductor
generated from it) comes from model code that read a rank as a Python int: right for a graph each
rank traces and compiles for itself (torchtitan's vocab-parallel embedding bakes `1024 *
coordinate[tp]` that way), wrong only where one rank's graph is loaded by the others. So it is info
in per-rank graphs and an error where the graph is shared (`check --shared-graph`, or compile on
one rank seen in the capture), as for own-device literals (device-baked).

A literal that is each rank's own chunk of a dimension (a split's chunk index, a slice's bounds,
a local size; uneven splits included: shard_geometry) is the rank's own value whatever form a
pass gives it: info in per-rank graphs, an error where the graph is shared. A slice whose bounds
are one rank's chunk and no chunk at all on another is an error naming the chunk it should take.

Compile on one rank (one rank compiles, every rank loads its graph) leaves one graph per stage:
there the check compares each literal with what the graph computes at run time elsewhere. Where
a node takes a value derived from `device_mesh._runtime_compute_coordinate_on_dim` at some
argument, another node of the same op with a literal at that argument equal to the compiling
rank's value is reported (a coordinate baked where it should have been computed, e.g. in the
backward graph).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any, Callable

from graphtrain_inspect.capture.shared.logformat import NodeRow
from graphtrain_inspect.capture.shared.rank_ranges import values_by_rank
from graphtrain_inspect.inspector.checks import shard_geometry
from graphtrain_inspect.inspector.checks.cache_keys import keyed_per_rank
from graphtrain_inspect.inspector.checks.context import CheckContext, Observation
from graphtrain_inspect.inspector.checks.differing_literals import Site, cross_rank_evidence, literal_sites
from graphtrain_inspect.inspector.checks.findings import Finding
from graphtrain_inspect.inspector.checks.rank_classes import class_rep_stage
from graphtrain_inspect.inspector.diff.normalize import table_meshes
from graphtrain_inspect.inspector.read import pipelines
from graphtrain_inspect.inspector.read.graphmodel import SubGraph, is_ref, row_leaves
from graphtrain_inspect.inspector.read.node_parts import ran_without_log
from graphtrain_inspect.inspector.read.simulated import rank_states
from graphtrain_inspect.inspector.read.stages import TRACE

KIND = "rank-baked-constant"
DESCRIPTION = "literals that differ across ranks and equal a rank-derived value (rank, local rank, mesh coordinate)"

COORD_OP = "device_mesh._runtime_compute_coordinate_on_dim"


def _num(x: Any) -> Fraction | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    try:
        return Fraction(x).limit_denominator(1 << 20) if isinstance(x, float) else Fraction(x)
    except (OverflowError, ValueError):
        return None


def _fmt(k: Fraction) -> str:
    return str(k.numerator) if k.denominator == 1 else str(float(k))


_RELATION_ORDER = {"equal": 0, "multiple": 1}  # then offsets, affine forms and the rest


def match_vectors(values: dict[int, Any], vectors: dict[str, dict[int, int]]) -> list[dict[str, Any]]:
    """Rank-derived vectors the per-rank values equal exactly (or a multiple of), the exact ones
    first: ranks 2 and 3 holding 0 and 1 are `coordinate[dp]`, not `rank - 2`."""
    found = _match_vectors(values, vectors)
    return sorted(found, key=lambda m: _RELATION_ORDER.get(m["relation"], 2))


def _match_vectors(values: dict[int, Any], vectors: dict[str, dict[int, int]]) -> list[dict[str, Any]]:
    ranks = sorted(values)
    xs = [values[r] for r in ranks]
    out: list[dict[str, Any]] = []
    for name, vec in vectors.items():
        if any(r not in vec for r in ranks):
            continue
        vs = [vec[r] for r in ranks]
        if len(set(vs)) < 2:
            continue
        nums = [n for x in xs if (n := _num(x)) is not None]
        if len(nums) == len(xs):
            if all(n == v for n, v in zip(nums, vs)):
                out.append({"vector": name, "relation": "equal"})
                continue
            found = False
            for shift, label in ((0, "{k} * {v}"), (1, "{k} * ({v} + 1)")):
                ks = {n / (v + shift) for n, v in zip(nums, vs) if v + shift != 0}
                zero_ok = all(n == 0 for n, v in zip(nums, vs) if v + shift == 0)
                if len(ks) == 1 and zero_ok:
                    k = ks.pop()
                    if k != 0 and not (k == 1 and shift == 0):
                        out.append(
                            {
                                "vector": name,
                                "relation": "multiple",
                                "factor": _fmt(k),
                                "form": label.format(k=_fmt(k), v=name),
                            }
                        )
                        found = True
                        break
            if not found:
                offs = {n - v for n, v in zip(nums, vs)}
                if len(offs) == 1:
                    c = offs.pop()
                    out.append(
                        {
                            "vector": name,
                            "relation": "offset",
                            "offset": _fmt(c),
                            "form": f"{name} + {_fmt(c)}" if c >= 0 else f"{name} - {_fmt(-c)}",
                        }
                    )
                    found = True
            if not found and len(set(vs)) >= 3:
                v0, v1 = vs[0], next(v for v in vs if v != vs[0])
                n0, n1 = nums[0], nums[vs.index(v1)]
                k = (n1 - n0) / (v1 - v0)
                a = n0 - k * v0
                if k != 0 and all(n == a + k * v for n, v in zip(nums, vs)):
                    out.append(
                        {
                            "vector": name,
                            "relation": "affine",
                            "offset": _fmt(a),
                            "factor": _fmt(k),
                            "form": f"{_fmt(a)} + {_fmt(k)} * {name}",
                        }
                    )
            continue
        if all(isinstance(x, bool) for x in xs):
            for cv in sorted(set(vs)):
                if all(x == (v == cv) for x, v in zip(xs, vs)):
                    out.append({"vector": name, "relation": f"{name} == {cv}"})
                    break
            continue
        if all(isinstance(x, str) for x in xs):
            if all(str(v) in re.findall(r"\d+", x) for x, v in zip(xs, vs)):
                out.append({"vector": name, "relation": "contains"})
    return out


def chunk_counts(ctx: CheckContext, rank: int) -> dict[str, int]:
    """Rank-derived vector -> how many chunks its values index (the mesh dimension's size)."""
    sizes = _mesh_sizes(ctx, rank)
    out = {f"coordinate[{d}]": n for d, n in sizes.items() if d != "world"}
    out["rank"] = sizes["world"]
    return out


def _rank_nodes(ctx: CheckContext, key, s: Site) -> dict[int, shard_geometry.RankNode] | None:
    """The site's node on each rank, with its graph's rows by name (cached per graph). A rank
    whose graph is its rank class's lowest rank's (`class_rep_stage`) reads that rank's rows: the
    two differ only in group names and the own device, which no judgement of geometry reads."""
    stages = ctx.index.across(key)
    cache = ctx.__dict__.setdefault("_geometry_rows", {})
    out = {}
    for r, name in s.nodes.items():
        st = stages.get(r)
        if st is None:
            return None
        rep = class_rep_stage(ctx, st)
        if rep is not None and s.nodes.get(rep.rank) == name:
            st = rep
        ck = (st.rank, st.gid, s.subgraph)
        if ck not in cache:
            t = ctx.tables(st.rank, st.gid)
            sub = t.subgraph(s.subgraph) if t is not None else None
            cache[ck] = None if sub is None else _graph_rows(sub.nodes)
        got = cache[ck]
        if got is None or name not in got[0]:
            return None
        out[r] = shard_geometry.RankNode(got[0][name], *got)
    return out


def _graph_rows(rows: list[NodeRow]) -> tuple[dict[str, NodeRow], Callable[[], set[int]]]:
    """A graph's rows by name, and its dimension sizes made when first asked (then kept)."""
    sizes: list[set[int]] = []

    def dim_sizes() -> set[int]:
        if not sizes:
            sizes.append(shard_geometry.dim_sizes(rows))
        return sizes[0]

    return {x["name"]: x for x in rows}, dim_sizes


def _carry_own_chunks(ctx: CheckContext, findings: list) -> list:
    """An own-chunk literal a pass wrote in place of the same chunk in another form (a split's
    chunk rewritten as a slice, the other chunks removed) keeps the provenance of what the pass
    received: blamed on the first graph state where every rank already took its own chunk."""
    vectors = ctx.vectors()
    for f in findings:
        geo = f.evidence.get("geometry") or {}
        vec = vectors.get(geo.get("chunk_of", ""))
        if not geo.get("own_chunk") or f.introduced_by in (None, TRACE) or vec is None or not f.ranks:
            continue
        size, n = geo.get("dim_size"), geo.get("chunks")
        if not isinstance(size, int) or not isinstance(n, int):
            continue
        st = next((x for x in ctx.index.by_rank.get(f.ranks[0], []) if x.seq == f.introduced_seq), None)
        ancestors = []
        a = st.parent if st is not None else None
        while a is not None:
            ancestors.append(a)
            a = a.parent
        for a in reversed(ancestors):
            across = ctx.index.across(a.key)
            held = True
            for r in f.ranks:
                # the rank's class's lowest rank's rows stand for its own (they differ in strings
                # alone; the chunk is the rank's own, vec[r])
                st_r = across.get(r)
                st_r = (class_rep_stage(ctx, st_r) or st_r) if st_r is not None else None
                t = ctx.tables(st_r.rank, st_r.gid) if st_r is not None else None
                sub = t.subgraph(f.subgraph) if t is not None else None
                if sub is None or r not in vec or not shard_geometry.takes_chunk(sub.nodes, size, n, vec[r]):
                    held = False
                    break
            if held:
                geo.update(carried_from=a.pass_name, rewritten_by=f.introduced_by)
                f.message += f"; {f.introduced_by} kept each rank's own chunk it received"
                f.introduced_by, f.introduced_seq, f.graph = a.pass_name, a.seq, a.gid
                break
    return findings


def _shard_size(ctx: CheckContext, key, s: Site, m: dict[str, Any]) -> int | None:
    """The factor of `k * coordinate[d]` where every rank's graph has a dimension of k: the
    offset of the rank's shard (torchtitan's vocabulary offset `1024 * coordinate[tp]`)."""
    if m.get("relation") != "multiple" or not m["vector"].startswith("coordinate[") or "+" in m.get("form", ""):
        return None
    factor = m.get("factor", "")
    if not factor.isdigit():
        return None
    nodes = _rank_nodes(ctx, key, s)
    if not nodes or not all(int(factor) in n.sizes for n in nodes.values()):
        return None
    return int(factor)


def _geometry_observation(ctx: CheckContext, key, s: Site, values: dict, shared: bool) -> Observation | None:
    """A literal that is each rank's own chunk of a dimension (info per rank, an error where the
    graph is shared), or a slice that is no chunk of it (an error naming the chunk)."""
    if not shard_geometry.may_judge(s.where, s.target, values):
        return None  # no chunk geometry: no graph's rows need reading
    nodes = _rank_nodes(ctx, key, s)
    if nodes is None:
        return None
    verdict = shard_geometry.judge(s.where, nodes, values, ctx.vectors(), chunk_counts(ctx, min(nodes)))
    if verdict is None:
        return None
    what = f"{s.target} {s.where}" if s.where else str(s.target)
    vals = values_by_rank(values)
    ev = cross_rank_evidence(s.where, s.target, values, s.nodes, [], backward=s.bwd, geometry=verdict.evidence)
    k = ("lit", s.subgraph, s.target, s.where, tuple(repr(values[r]) for r in sorted(values)))
    if verdict.own:
        ev["geometry"]["own_chunk"] = True
        msg = f"{what} differs across ranks ({vals}): {verdict.message}"
        if shared:
            sev, msg = "error", msg + "; wrong where one rank's graph is loaded by the others"
        else:
            sev, msg = "info", msg + "; right for a graph each rank traces for itself"
    else:
        ev["geometry"]["no_chunk"] = True
        sev, msg = "error", f"{what} differs across ranks ({vals}): {verdict.message}"
    return Observation(k, sev, msg, node=s.node, subgraph=s.subgraph or None, evidence=ev, loose_key=("lit", k[-1]))


def _observe_sites(ctx: CheckContext, key, group: list[int], shared: bool = False) -> list[Observation]:
    out = []
    vectors = ctx.vectors()
    judged: set[tuple[str, str]] = set()  # nodes one geometry finding covers (a slice's two bounds)
    for s in literal_sites(ctx, key, group):
        if s.is_device:
            continue  # device-baked reports these
        values = {r: v for r, v in s.values.items()}
        if len(values) < 2 or len({repr(v) for v in values.values()}) < 2:
            continue
        if (s.subgraph, s.node) in judged:
            continue
        geo = _geometry_observation(ctx, key, s, values, shared)
        if geo is not None:
            judged.add((s.subgraph, s.node))
            out.append(geo)
            continue
        matches = match_vectors(values, vectors)
        vals = values_by_rank(values)
        what = f"{s.target} {s.where}" if s.where else str(s.target)
        if matches:
            m = matches[0]
            rel = m.get("form") or m["vector"]
            shard = _shard_size(ctx, key, s, m)
            if shard is not None:
                m["shard_size"] = shard
                rel += f" (shard size {shard})"
            msg = f"{what} differs across ranks ({vals}) and equals {rel}"
            sev = "error"
        else:
            msg = f"{what} differs across ranks ({vals}); equals no rank-derived value"
            sev = "warning"
        ev = cross_rank_evidence(
            s.where,
            s.target,
            values,
            s.nodes,
            matches,
            vectors={m["vector"]: {str(r): vectors[m["vector"]][r] for r in sorted(values)} for m in matches},
            backward=s.bwd,
        )
        k = ("lit", s.subgraph, s.target, s.where, tuple(repr(values[r]) for r in sorted(values)))
        loose = ("lit", tuple(repr(values[r]) for r in sorted(values)))
        out.append(Observation(k, sev, msg, node=s.node, subgraph=s.subgraph or None, evidence=ev, loose_key=loose))
    return out


# ---------------------------------------------------------------------------------------------
# compile on one rank


def compile_on_one_rank(ctx: CheckContext) -> tuple[bool, list[int]]:
    """(do ranks run a graph they did not trace, the ranks that traced and compiled it), from
    evidence only: a graph loaded (GraphPickler, or another rank's pass output run here:
    `identity`), the compile-on-one-rank switch in the capture's environment, or ranks of the
    world that ran no pass while one rank did. A rank that compiled alone because it recompiled
    is a rank-divergent compile, not this: its peers compiled graphs of their own."""
    cap = ctx.cap
    loaded = any(pl.origin == pipelines.LOADED for r in cap.ranks for pl in cap.pipelines(r))
    if loaded:
        return True, [r for r in cap.ranks if any(pl.origin != pipelines.LOADED for pl in cap.pipelines(r))]
    compiling = [r for r in cap.ranks if ctx.index.by_rank.get(r)]
    env = (cap.manifest or {}).get("env") or {}
    flag = str(env.get("TORCH_DISTRIBUTED_COMPILE_ON_ONE_RANK", "")).lower() in ("1", "true", "yes")
    # the other ranks must be known to have run without graphs (their logs, or a capture's
    # manifest of a larger world): one torch log read by itself says nothing about the others
    # (a rank without a log counts only when it is known to have run: not one left out by
    # --ranks or on a node whose capture is elsewhere, node_parts)
    one = len(compiling) == 1 and (len(cap.ranks) > 1 or (bool(cap.manifest) and bool(ran_without_log(cap))))
    states = rank_states(cap.manifest)
    if one and states is not None:
        # a simulated world: the others must have run to the end without graphs, not failed,
        # been interrupted or never run (rank 0 runs first and alone)
        one = any(r not in compiling for r in states["ran"])
    return (flag or one), compiling


def _coord_values(ctx: CheckContext, rank: int) -> dict[int, int]:
    """Mesh dim index -> the compiling rank's coordinate, from its rank table."""
    for mesh in table_meshes(ctx.cap.rank_table(rank) or {}):
        coord = mesh["coordinate"]
        if coord:
            return {i: c for i, c in enumerate(coord) if isinstance(c, int)}
    return {}


_ARITH: dict[str, Callable[..., Any]] = {
    "operator.mul": lambda a, b: a * b, "aten.mul.Tensor": lambda a, b: a * b, "aten.mul.Scalar": lambda a, b: a * b,
    "operator.add": lambda a, b: a + b, "aten.add.Tensor": lambda a, b: a + b, "aten.add.Scalar": lambda a, b: a + b,
    "operator.sub": lambda a, b: a - b, "aten.sub.Tensor": lambda a, b: a - b,
    "operator.floordiv": lambda a, b: a // b if b else None, "operator.mod": lambda a, b: a % b if b else None,
    "operator.neg": lambda a: -a,
}  # fmt: skip
_INDEX_OPS = ("aten.select.int", "aten.slice.Tensor", "aten.narrow.default")


def _is_scalar(row: NodeRow) -> bool:
    v = row.get("val")
    return v is None or (isinstance(v, dict) and v.get("t") == "sym") or isinstance(v, (int, float))


def _shape(rows_by_name: dict[str, dict], leaf: Any) -> list | None:
    if is_ref(leaf):
        v = (rows_by_name.get(leaf["n"]) or {}).get("val")
        if isinstance(v, dict) and v.get("t") == "tensor":
            return v.get("shape")
    return None


def shared_graph_observations(
    tables,
    coords: dict[int, int],
    rank: int,
    vectors: dict[str, dict[int, int]],
    mesh_sizes: dict[str, int] | None = None,
) -> list[Observation]:
    """In a graph compiled on `rank` and loaded by every rank: literals that are `rank`'s own values.

    1. A select/slice/narrow that takes one mesh-sized chunk of a dimension at the compiling
       rank's coordinate (e.g. `select(x, 0, 0)` on a dimension of the mesh size), where the graph
       does not also take the other chunks of that dimension (then it enumerates them all).
    2. A node with a literal where a twin node of the same op takes a value computed at run time
       from `device_mesh._runtime_compute_coordinate_on_dim` (scalar arithmetic evaluated on the
       compiling rank): the coordinate baked where it should have been computed (e.g. backward).
    3. An index tensor compared with, and offset by, literal bounds that are the compiling rank's
       chunk of a sharded dimension (a vocabulary-parallel embedding's `lt(ids, 0)`, `ge(ids, 16)`,
       `sub(ids, 0)`), found by the dimension's geometry: at chunk 0 no value differs.
    """
    out: list[Observation] = []
    rank_values = {name: vec[rank] for name, vec in vectors.items() if rank in vec}
    sizes = {k: v for k, v in (mesh_sizes or {}).items() if v > 1}
    for g in tables.graphs:
        taken = _taken_chunks(g)
        out += _chunk_observations(g, taken, rank, rank_values, sizes)
        out += _range_observations(g, rank, rank_values, sizes)
        value = _runtime_values(g, coords)
        if value:
            out += _twin_observations(g, taken, value, rank, rank_values)
    return out


def _taken_chunks(g) -> dict[tuple[str, int], set]:
    """(input node, dimension) -> the literal chunk arguments the graph's select/slice/narrow
    nodes take of it: more than one, and the graph enumerates the chunks."""
    taken: dict[tuple[str, int], set] = {}
    for row in g.nodes:
        t = str(row.get("target"))
        args = row.get("args") or []
        if (
            t in _INDEX_OPS
            and len(args) >= 3
            and is_ref(args[0])
            and isinstance(args[1], int)
            and not any(is_ref(x) for x in args[2:])
        ):
            taken.setdefault((args[0]["n"], args[1]), set()).add(repr(args[2:]))
    return taken


def _chunk_at(t: str, args: list, size: int) -> tuple[int, int] | None:
    """(chunk length, chunk index) that a select/slice/narrow with literal bounds takes of a
    dimension of `size`; None when it takes no whole chunk."""
    if t == "aten.select.int" and isinstance(args[2], int) and not isinstance(args[2], bool):
        return 1, args[2]
    if (
        t == "aten.slice.Tensor"
        and len(args) >= 4
        and all(isinstance(x, int) and not isinstance(x, bool) for x in args[2:4])
    ):
        length = min(args[3], size) - args[2]
        if length > 0 and args[2] % length == 0:
            return length, args[2] // length
    elif t == "aten.narrow.default" and len(args) >= 4 and all(isinstance(x, int) for x in args[2:4]):
        if args[3] > 0 and args[2] % args[3] == 0:
            return args[3], args[2] // args[3]
    return None


def _chunk_observations(
    g, taken: dict[tuple[str, int], set], rank: int, rank_values: dict[str, int], sizes: dict[str, int]
) -> list[Observation]:
    """(1) chunk selection at the compiling rank's coordinate."""
    out: list[Observation] = []
    by_name = {r["name"]: r for r in g.nodes}
    for row in g.nodes:
        t = str(row.get("target"))
        args = row.get("args") or []
        if t not in _INDEX_OPS or len(args) < 3 or not isinstance(args[1], int):
            continue
        shape = _shape(by_name, args[0])
        d = args[1]
        if not shape or not (-len(shape) <= d < len(shape)) or not isinstance(shape[d], int):
            continue
        if len(taken.get((args[0]["n"], d), ())) > 1:
            continue  # the graph takes several chunks of this dimension: it enumerates them
        size = shape[d]
        at = _chunk_at(t, args, size)
        if at is None:
            continue
        chunk, index = at
        pieces = size // chunk if size % chunk == 0 else None
        for dim, n in sizes.items():
            vec = f"coordinate[{dim}]" if f"coordinate[{dim}]" in rank_values else ("rank" if dim == "world" else None)
            if vec is None or pieces != n or rank_values.get(vec) != index:
                continue
            msg = (
                f"{t} takes chunk {index} of {n} of a dimension (size {size}) at a literal equal to the "
                "compiling rank's "
                f"{vec}: every rank that loads this graph takes rank {rank}'s chunk"
            )
            ev = {
                "where": "args[2]",
                "target": t,
                "value": args[2],
                "chunk_index": index,
                "chunks": n,
                "dim_size": size,
                "compiling_rank": rank,
                "equals": vec,
                "backward": bool(row.get("bwd")),
            }
            out.append(_node_error(g, row, ("coor-chunk", t, index, n), msg, ev))
            break
    return out


def _range_observations(g, rank: int, rank_values: dict[str, int], sizes: dict[str, int]) -> list[Observation]:
    """(3) an index tensor compared with, and offset by, literal bounds that are the compiling
    rank's chunk of a sharded dimension (`lt(ids, 0)`, `ge(ids, 16)`, `sub(ids, 0)`: rank 0's
    range of a vocabulary of 32 over 2), also at chunk 0, whose bounds differ from no one's
    value; the graph holds a tensor of the chunk's length (the shard)."""
    out: list[Observation] = []
    by_name = {r["name"]: r for r in g.nodes}
    lengths = shard_geometry.dim_sizes(g.nodes)
    for rng in shard_geometry.index_ranges(g.nodes):
        if rng.upper - rng.lower not in lengths:
            continue
        for dim, n in sizes.items():
            vec = f"coordinate[{dim}]" if f"coordinate[{dim}]" in rank_values else ("rank" if dim == "world" else None)
            k = rank_values.get(vec) if vec else None
            if k is None:
                continue
            geo = shard_geometry.chunk_dimension(rng.lower, rng.upper, n, k)
            if geo is None:
                continue
            size, how = geo
            first = by_name[rng.nodes[0]]
            msg = (
                f"{rng.tensor} is bounded to [{rng.lower}, {rng.upper}) and offset by {rng.lower} at literals: "
                f"chunk {k} of a dimension of {size} split in {n}, the compiling rank's ({vec} = {k}, shard size "
                f"{rng.upper - rng.lower}); every rank that loads this graph uses rank {rank}'s range"
            )
            ev = {
                "where": "args[1]",
                "target": str(first.get("target")),
                "tensor": rng.tensor,
                "bounds": [rng.lower, rng.upper],
                "nodes_using": rng.nodes,
                "chunk_index": k,
                "chunks": n,
                "dim_size": size,
                "split": how,
                "compiling_rank": rank,
                "equals": vec,
                "backward": bool(first.get("bwd")),
            }
            out.append(_node_error(g, first, ("coor-range", rng.lower, rng.upper, k, n), msg, ev))
            break
    return out


def _runtime_values(g, coords: dict[int, int]) -> dict[str, Any]:
    """The scalar nodes computed at run time from the mesh coordinate, by name: their value on the
    compiling rank (None where the arithmetic is not evaluated here)."""
    value: dict[str, Any] = {}
    for row in g.nodes:
        target = str(row.get("target") or "")
        if COORD_OP in target:
            args = row.get("args") or []
            axis = args[1] if len(args) > 1 and isinstance(args[1], int) else 0
            value[row["name"]] = coords.get(axis)
            continue
        if not _is_scalar(row):
            continue  # tensors computed from a coordinate are data, not the coordinate
        leaves = [leaf for _, leaf in row_leaves(row)]
        if not any(is_ref(x) and x["n"] in value for x in leaves):
            continue
        fn = _ARITH.get(target)
        ins = [value.get(x["n"]) if is_ref(x) else x for x in leaves]
        v = None
        if fn is not None and all(isinstance(x, int) and not isinstance(x, bool) for x in ins):
            try:
                v = fn(*ins)
            except Exception:  # noqa: BLE001
                v = None
        value[row["name"]] = v
    return value


def _twin_observations(
    g, taken: dict[tuple[str, int], set], value: dict[str, Any], rank: int, rank_values: dict[str, int]
) -> list[Observation]:
    """(2) a literal where a twin node (same op, same place) takes a runtime-coordinate value."""
    out: list[Observation] = []
    twins: dict[tuple[str, str], tuple[str, Any]] = {}
    for row in g.nodes:
        for where, leaf in row_leaves(row):
            if is_ref(leaf) and leaf["n"] in value:
                twins.setdefault((str(row.get("target")), where), (row["name"], value[leaf["n"]]))
    for row in g.nodes:
        target = str(row.get("target"))
        args = row.get("args") or []
        for where, leaf in row_leaves(row):
            tw = twins.get((target, where))
            if tw is None or is_ref(leaf) or isinstance(leaf, bool) or not isinstance(leaf, int):
                continue
            if (
                target in _INDEX_OPS
                and len(args) >= 2
                and is_ref(args[0])
                and len(taken.get((args[0]["n"], args[1]), ())) > 1
            ):
                continue  # enumerates every chunk of the dimension
            twin_name, twin_value = tw
            if twin_value is None or leaf != twin_value:
                continue
            hits = [n for n, v in rank_values.items() if v == leaf]
            msg = (
                f"{target} {where} is the literal {leaf!r}, the compiling rank's value; {twin_name} computes "
                "it at run time from the mesh coordinate"
            )
            ev = {
                "where": where,
                "target": target,
                "value": leaf,
                "compiling_rank": rank,
                "runtime_twin": twin_name,
                "twin_value_on_compiling_rank": twin_value,
                "equals": hits,
                "backward": bool(row.get("bwd")),
            }
            out.append(_node_error(g, row, ("coor", target, where, leaf), msg, ev))
    return out


def _mesh_sizes(ctx: CheckContext, rank: int) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for mesh in table_meshes(ctx.cap.rank_table(rank) or {}):
        for n, size in zip(mesh["dim_names"], mesh["shape"]):
            if isinstance(size, int):
                sizes.setdefault(n, size)
    sizes.setdefault("world", ctx.cap.world_size or 1)
    return sizes


KEYED_NOTE = (
    "right for code each rank compiles and caches under its own key (the FX graph cache key holds the rank); "
    "wrong if one rank's graph is loaded by the others (check --shared-graph)"
)
PER_RANK_NOTE = (
    "right for a graph each rank traces for itself; wrong if one rank's graph is loaded by the others (check "
    "--shared-graph)"
)


def _torch_own(ctx: CheckContext, f: Any) -> bool:
    """Whether the pass a finding's chain starts at is torch's own (Dynamo, AOTAutograd, Inductor's
    passes, or a pass read from torch's logs): its rewrite of the traced op (narrow -> slice)
    breaks the chain back to the trace, and the literal still comes from the model code."""
    if not f.ranks or f.introduced_seq is None:
        return False
    rec = ctx.cap.pass_by_seq(f.ranks[0], f.introduced_seq)
    return rec is not None and (rec.synthetic or (rec.qualname or "").startswith("torch."))


def grade_per_rank(
    ctx: CheckContext,
    findings: list,
    *,
    shared: bool,
    traced_by: tuple[str, ...] = (TRACE,),
    where: str = "graphs each rank traced",
) -> list:
    """A rank-derived literal from tracing, torch's own passes or codegen (`introduced_by` in
    `traced_by`) in graphs each rank made for itself: info, with why, and a note counting them;
    kept an error where the graph is shared. One a pass of the user's put there stays an error,
    unless the compile filed each rank's code under a cache key of its own (the pass keyed the
    FX graph cache by rank: its output is declared per rank; cache_keys.keyed_per_rank)."""
    graded = keyed = 0
    for f in findings:
        if f.severity != "error" or (f.evidence.get("geometry") or {}).get("no_chunk"):
            continue  # a bound that is no chunk of its dimension is wrong wherever it runs
        own = f.introduced_by in traced_by or _torch_own(ctx, f)
        by_key = not own and f.introduced_by != TRACE and keyed_per_rank(ctx, f.pipeline, f.ranks)
        if not (own or by_key):
            continue
        if shared:
            f.evidence["shared"] = True
            continue
        f.evidence.update({"shared": False, "severity_if_shared": "error"})
        f.severity = "info"
        if by_key:
            f.evidence["keyed_per_rank"] = True
            f.message += f"; {KEYED_NOTE}"
            keyed += 1
        else:
            f.message += f"; {PER_RANK_NOTE}"
            graded += 1
    if graded:
        ctx.notes.append(
            f"{graded} rank-derived literal(s) in {where} for itself: info; "
            "--shared-graph grades them as errors (compile on one rank, precompiled graphs)"
        )
    if keyed:
        ctx.notes.append(
            f"{keyed} rank-derived literal(s) put by a pass into compiles whose FX graph cache key holds the rank: "
            "info; --shared-graph grades them as errors"
        )
    return findings


def _node_error(g: SubGraph, row: NodeRow, loose: tuple, msg: str, ev: dict[str, Any]) -> Observation:
    """An error on one node of a shared graph: keyed by its subgraph too, matched across stages
    by `loose` (its kind and what it found) alone."""
    return Observation(
        (loose[0], g.path, *loose[1:]),
        "error",
        msg,
        node=row["name"],
        subgraph=g.path or None,
        evidence=ev,
        loose_key=loose,
    )


def run(ctx: CheckContext) -> list:
    coor, compiling = compile_on_one_rank(ctx)
    findings = []
    multi = ctx.compared_groups()
    if multi:
        shared = ctx.shared_graph or coor
        across = ctx.blame_across(KIND, lambda key, group: _observe_sites(ctx, key, group, shared))
        findings.extend(grade_per_rank(ctx, _carry_own_chunks(ctx, across), shared=shared))
    elif not coor:
        ctx.skip(KIND, f"needs graphs of at least two ranks to compare (found {len(compiling)})")
    if coor:
        loaders = [r for r in ctx.cap.ranks if any(pl.origin == pipelines.LOADED for pl in ctx.cap.pipelines(r))]
        ctx.notes.append(
            f"compile on one rank: rank(s) {compiling} compiled"
            + (f", rank(s) {loaders} ran the loaded graph" if loaders else "")
            + "; their graphs are checked as shared graphs"
        )
        vectors = ctx.vectors()
        cache: dict[tuple[int, str], list[Observation]] = {}

        def observe(stage):
            if stage.rank not in compiling or pipelines.parse_key(stage.key.pipeline)[1]:
                return []  # a loaded graph's pipeline: the graph is judged where it was made
            k = (stage.rank, stage.gid)
            if k not in cache:
                t = ctx.tables(stage.rank, stage.gid)
                cache[k] = (
                    shared_graph_observations(
                        t, _coord_values(ctx, stage.rank), stage.rank, vectors, _mesh_sizes(ctx, stage.rank)
                    )
                    if t is not None
                    else []
                )
            return cache[k]

        findings.extend(ctx.blame_per_rank(KIND, observe))
    return findings


def evidence_lines(f: Finding) -> list[str]:
    """The finding's evidence as lines of text (`check`, `report`, the TUI and SARIF show them):
    the values per rank and the rank-derived form they equal, or the chunk a bound is."""
    if f.layer == "codegen":
        from graphtrain_inspect.inspector.checks.codegen_sites import code_evidence_lines

        return code_evidence_lines(f)
    ev = f.evidence or {}
    vals = ev.get("values")
    if vals:
        m = ev.get("matches") or []
        return [values_by_rank(vals, prefix="r", sep="=") + (f"  = {m[0].get('form') or m[0]['vector']}" if m else "")]
    if "bounds" in ev and "chunk_index" in ev:
        lo, hi = (ev.get("bounds") or [None, None])[:2]
        at = ", ".join(map(str, ev.get("nodes_using") or []))
        return [
            f"[{lo}, {hi}) = compiling rank {ev.get('compiling_rank')}'s {ev.get('equals')}; dim size "
            f"{ev.get('dim_size')} in {ev.get('chunks')} chunks; at {at}"
        ]
    if "chunk_index" in ev:
        return [
            f"literal {ev['value']!r} = compiling rank {ev.get('compiling_rank')}'s {ev.get('equals')}; dim "
            f"size {ev.get('dim_size')} in {ev.get('chunks')} chunks"
        ]
    if "value" in ev:
        return [f"literal {ev['value']!r}; computed at run time by {ev.get('runtime_twin')}"]
    return []
