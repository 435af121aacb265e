"""codegen-divergent (`"layer": "codegen"`): ranks whose generated code for the same compile
differs in shape (lines added, removed or reordered, kernels fused differently; literals masked,
kernel names, own device, streams and group names normalized) although the FX graphs it was
generated from agree on those ranks. The FX graph cannot explain it: a per-rank Inductor decision
(autotuning, a config read from the environment, a heuristic on rank-local data) made the ranks'
kernels differ, and collectives or numerics may no longer match.

Graded by the collectives the code calls (`diff.collectives.code_collectives`), as
rank-divergent-graph grades FX graphs: where they differ across ranks, an error (the ranks would
hang); where they agree, the ranks differ in how they compute only (kernels, fusion, buffer reuse
chosen from each rank's size hints in a dynamic compile): info in code each rank generated for
itself, an error where the code is shared (compile on one rank, `check --shared-graph`).
"""

from __future__ import annotations

from graphtrain_inspect.inspector.checks.codegen_sites import aligned, code_evidence_lines, finding
from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.checks.findings import Finding
from graphtrain_inspect.inspector.checks.rank_baked_constant import compile_on_one_rank
from graphtrain_inspect.inspector.diff.collectives import code_collectives
from graphtrain_inspect.inspector.diff.graph_diff import text_diff
from graphtrain_inspect.inspector.diff.output_code import literal_skeleton

KIND = "codegen-divergent"
DESCRIPTION = "ranks whose generated code differs in shape although their FX graphs agree"


def _fx_agree(ctx: CheckContext, ra: int, ga: str | None, rb: int, gb: str | None) -> bool:
    if ga is None or gb is None:
        return False  # unknown: the FX check cannot vouch for it, and we do not guess
    if ga == gb:
        return True
    try:
        return bool(ctx.identical(ra, ga, rb, gb))
    except Exception:  # noqa: BLE001 - a graph that does not read: not known to agree
        return False


def run(ctx: CheckContext) -> list[Finding]:
    out: list[Finding] = []
    shared: bool | None = None
    for sites in aligned(ctx).values():
        if len(sites) < 2:
            continue
        ranks = sorted(sites)
        ref = sites[ranks[0]]
        shape_ref = [literal_skeleton(l)[0] for l in ref.normalized]
        differ = []
        for r in ranks[1:]:
            s = sites[r]
            shape = [literal_skeleton(l)[0] for l in s.normalized]
            if shape == shape_ref:
                continue
            if not _fx_agree(ctx, ranks[0], ref.oc.graph, r, s.oc.graph):
                continue
            differ.append((r, text_diff(shape_ref, shape, f"rank {ranks[0]}", f"rank {r}", context=0)))
        if not differ:
            continue
        others = [r for r, _ in differ]
        first = differ[0][1]
        changed = [l for l in first if l[:1] in "+-" and not l.startswith(("+++", "---"))]
        msg = (
            f"generated code of ranks {others} differs in shape from rank {ranks[0]}'s ({len(changed)} line(s)) "
            "although their FX graphs agree"
        )
        ev = {"differing_ranks": others, "diff": first[:40]}
        colls = code_collectives(ref.normalized)
        sev = "error"
        if all(code_collectives(sites[r].normalized) == colls for r in others):
            if shared is None:
                shared = ctx.shared_graph or compile_on_one_rank(ctx)[0]
            ev["collectives_agree"] = True
            if not shared:
                sev = "info"
                ev.update({"shared": False, "severity_if_shared": "error"})
                msg += (
                    "; the collectives it calls agree: the ranks differ only in how they compute (kernels, "
                    "fusion, buffer reuse chosen from each rank's sizes), right in code each rank generated "
                    "for itself; wrong if one rank's code is loaded by the others (check --shared-graph)"
                )
        else:
            ev["collectives_agree"] = False
            msg += ": the collectives it calls differ, the ranks would hang"
        out.append(finding(KIND, sev, msg, sites, ranks, node=None, evidence=ev))
    return out


def evidence_lines(f: Finding) -> list[str]:
    """The finding's evidence as lines of text (`check`, `report`, the TUI and SARIF show them)."""
    return code_evidence_lines(f)
