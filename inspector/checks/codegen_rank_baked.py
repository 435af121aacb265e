"""rank-baked-constant in generated code (`"layer": "codegen"`): a numeric literal that differs
across ranks' generated code for the same compile, at the same line of the same kernel (after
normalizing kernel names, the own device, streams and group names), where the lines agree
otherwise. The per-rank values are correlated with rank, local rank and mesh coordinates exactly as
the FX check does (`rank_baked_constant.match_vectors`): a match is an error (e.g. `static_cast<float>(3.0)`
on rank 0 and `4.0` on rank 1 for `y * (rank + 3)`), differing otherwise is a warning. Lines whose
shape differs are left to `codegen-divergent`. Code each rank generated for itself is per-rank by
nature: a match there is info unless the graph is shared (`rank_baked_constant.grade_per_rank`).
"""

from __future__ import annotations

from graphtrain_inspect.inspector.checks import shard_geometry
from graphtrain_inspect.inspector.checks.codegen_sites import (
    CODEGEN_PASS,
    aligned,
    clip_code,
    code_evidence_lines,
    finding,
    fx_node,
)
from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.checks.findings import Finding
from graphtrain_inspect.inspector.checks.rank_baked_constant import chunk_counts, grade_per_rank, match_vectors
from graphtrain_inspect.inspector.diff.output_code import (
    autotune_hint,
    literal_skeleton,
    literal_span,
    literal_value,
    pinned_indices,
)

KIND = "rank-baked-constant"
DESCRIPTION = "literals in generated code that differ across ranks and equal a rank-derived value"


def run(ctx: CheckContext) -> list[Finding]:
    out: list[Finding] = []
    vectors = ctx.vectors()
    for key, sites in aligned(ctx).items():
        if len(sites) < 2:
            continue
        norm = {r: s.normalized for r, s in sites.items()}
        if len({len(v) for v in norm.values()}) != 1:
            continue  # lines added or removed: a structural difference, not a literal
        ranks = sorted(sites)
        ref = sites[ranks[0]]
        seen: set[tuple] = set()
        for i in range(len(norm[ranks[0]])):
            lines = {r: norm[r][i] for r in ranks}
            if len(set(lines.values())) == 1:
                continue
            if all(l.lstrip().startswith("#") for l in lines.values()):
                continue  # a comment computes nothing (Inductor copies the FX graph into kernels' comments)
            if any(pinned_indices(l) for l in lines.values()):
                continue  # a device index: the device check's business, not a rank literal
            if any(autotune_hint(l) for l in lines.values()):
                continue  # each rank's own sizes as autotuning hints: what runs computes the same
            split = {r: literal_skeleton(l) for r, l in lines.items()}
            if len({sk for sk, _ in split.values()}) != 1 or len({len(lits) for _, lits in split.values()}) != 1:
                continue
            for j in range(len(split[ranks[0]][1])):
                texts = {r: split[r][1][j] for r in ranks}
                if len(set(texts.values())) == 1:
                    continue
                values = {r: literal_value(t) for r, t in texts.items()}
                if any(v is None for v in values.values()):
                    continue
                kernel = ref.kernel_at(i)
                kname = kernel.name if kernel else None
                dedup = (key, kname, split[ranks[0]][0], j)
                if dedup in seen:
                    continue
                seen.add(dedup)
                fx = fx_node(ctx, sites, kernel)
                node = fx["fx_node"]
                where = f"kernel {kname}" if kname else "the wrapper's own code"
                vals = ", ".join(f"rank {r}: {texts[r]}" for r in ranks)
                sev, msg, matches, own = _graded(ctx, sites, values, ranks, vectors)
                msg = f"literal in generated code of {where} differs across ranks ({vals}){msg}"
                if node:
                    msg += f"; computed from FX node {node}" + (
                        f" ({fx['source_node']} in the model)"
                        if fx["source_node"] and fx["source_node"] != node
                        else ""
                    )
                raw = ref.lines[i] if i < len(ref.lines) else ""
                span = literal_span(raw, j)
                ev = {
                    "kernel": kname,
                    "line": i + 1,
                    "column": span[0] + 1 if span else None,
                    "code": clip_code(raw, *span) if span else clip_code(raw, 0, 0),
                    "values": {str(r): values[r] for r in ranks},
                    "literals": {str(r): texts[r] for r in ranks},
                    "matches": matches,
                    **fx,
                }
                if own is not None and not matches:
                    ev["geometry"] = {**own.evidence, "own_chunk": True}
                out.append(finding(KIND, sev, msg, sites, ranks, node=node, evidence=ev))
    # several ranks generated code for one compile: each for itself, unless the user says it is shared
    return grade_per_rank(
        ctx, out, shared=ctx.shared_graph, traced_by=(CODEGEN_PASS,), where="code each rank generated"
    )


def _graded(ctx: CheckContext, sites: dict, values: dict, ranks: list[int], vectors) -> tuple:
    """(severity, the message's tail, matches, own size) of a literal that differs across ranks:
    equal to a rank-derived value (an error, graded per rank after), each rank's own shard size
    (the same), or neither (a warning)."""
    matches = match_vectors(values, vectors)
    if matches:
        form = matches[0].get("form") or matches[0]["vector"]
        return "error", f" and equals {form}: baked at compile time", matches, None
    own = _own_size(ctx, sites, values, ranks)
    if own is not None:
        return "error", f": {own.message}", matches, own
    return "warning", "", matches, None


def evidence_lines(f: Finding) -> list[str]:
    """The finding's evidence as lines of text (`check`, `report`, the TUI and SARIF show them)."""
    return code_evidence_lines(f)


def _own_size(ctx: CheckContext, sites: dict, values: dict, ranks: list[int]) -> shard_geometry.Verdict | None:
    """Whether each rank's literal is its own local size of an unevenly split dimension that the
    graphs Inductor compiled hold on every rank (shard_geometry.scaled_local_size)."""
    cache = ctx.__dict__.setdefault("_codegen_dim_sizes", {})
    common: set[int] | None = None
    for r in ranks:
        gid = sites[r].oc.graph
        if gid is None:
            return None
        if (r, gid) not in cache:
            t = ctx.tables(r, gid)
            cache[(r, gid)] = shard_geometry.dim_sizes(t.root.nodes) if t is not None else None
        sizes = cache[(r, gid)]
        if sizes is None:
            return None
        common = set(sizes) if common is None else common & sizes
    if not common:
        return None
    return shard_geometry.scaled_local_size(values, common, ctx.vectors(), chunk_counts(ctx, min(ranks)), ranks)
