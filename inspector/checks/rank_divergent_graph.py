"""rank-divergent-graph: a pass leaves ranks with structurally different graphs.

For each pass (by its place in the pipeline), its output graph on every rank of a group that
ought to agree is aligned with the lowest rank's, after rank normalization. If the outputs differ
structurally (nodes added or removed, another op or target, other inputs) while the graphs the
pass received agreed structurally, the pass's decision depended on rank-local data. Literal-only
differences are rank-baked-constant's business; when the inputs differed only in literals, the
evidence names them (a rank literal that the pass folded differently).

Graded by what the divergence does to the job, the collectives first (`diff.collectives`):
* the ranks' collectives differ at that graph: collective-mismatch reports the error (the ranks
  would hang); this finding is info that points there;
* the collectives agree and each rank compiled or traced the graph for itself: the ranks differ
  in what they compute only (what is saved or recomputed, fusion, folding, kernels chosen from
  each rank's sizes), which changes nothing they must agree on: info, with that reason;
* the collectives agree and the graph is shared (compiled on one rank and loaded by the others:
  the capture shows it, or `check --shared-graph`): an error at a pass, a warning for traced
  graphs (ranks may legitimately trace different programs, e.g. pipeline stages without a mesh
  to tell);
* the collectives cannot be read: graded as if the graph were shared.

Also reported: a pass that ran on some ranks of a pipeline and not on others (error).
"""

from __future__ import annotations

from typing import Any

from graphtrain_inspect.capture.shared.rank_ranges import format_ranks
from graphtrain_inspect.inspector.checks.context import CheckContext, Observation
from graphtrain_inspect.inspector.checks.findings import Finding
from graphtrain_inspect.inspector.checks.rank_baked_constant import compile_on_one_rank
from graphtrain_inspect.inspector.read.stages import TRACE, StageKey

KIND = "rank-divergent-graph"
DESCRIPTION = "a pass's outputs differ structurally across ranks while its inputs agreed"

COMPUTE_ONLY = (
    "the ranks' collectives agree: they differ only in what they compute (saved or recomputed, "
    "fused, folded, kernels chosen from each rank's sizes), right in graphs each rank {made} for "
    "itself; wrong if one rank's graph is loaded by the others (check --shared-graph)"
)


def _structural_lines(d, n: int = 6) -> list[str]:
    out = []
    for ch in d.changes():
        if ch.status in ("added", "removed") or ch.structural:
            out.append((f"[{ch.subgraph}] " if ch.subgraph else "") + ch.summary())
            if len(out) >= n:
                break
    return out


def _literal_lines(d, n: int = 6) -> list[str]:
    out = []
    for ch in d.changes():
        if ch.status == "changed" and ch.args and not ch.structural:
            out.append((f"[{ch.subgraph}] " if ch.subgraph else "") + ch.summary())
            if len(out) >= n:
                break
    return out


def run(ctx: CheckContext) -> list:
    findings: list[Finding] = []
    groups = ctx.compared_groups()
    if not groups:
        ctx.skip(KIND, "needs graphs of at least two ranks to compare")
        return findings
    shared = ctx.shared_graph or compile_on_one_rank(ctx)[0]
    for ranks in groups:
        findings.extend(_missing_passes(ctx, ranks))
        for st in ctx.index.by_rank[ranks[0]]:
            f = _divergence(ctx, st, ranks, shared)
            if f is not None:
                findings.append(f)
    return findings


def _missing_passes(ctx: CheckContext, ranks: list[int]) -> list[Finding]:
    """A pass that ran on some ranks of a pipeline and not on others (an error)."""
    out: list[Finding] = []
    pipelines_of = {r: {st.key.pipeline for st in ctx.index.by_rank[r]} for r in ranks}
    reported: set[StageKey] = set()
    for key in ctx.index.keys:
        across = ctx.index.across(key)
        have = [r for r in ranks if r in across]
        lack = [r for r in ranks if r not in across and key.pipeline in pipelines_of[r]]
        if have and lack and key.pass_name != TRACE and key not in reported:
            reported.add(key)
            st = across[have[0]]
            o = Observation(
                ("missing", key),
                "error",
                f"pass {key.label()} ran on rank(s) {format_ranks(have)} but not on rank(s) "
                f"{format_ranks(lack)} of the same pipeline",
                evidence={"ran_on": have, "not_on": lack, "stage": key.label()},
            )
            out.append(ctx._finding(KIND, st, st, o, sorted(have + lack)))
    return out


def _diverged_at(ctx: CheckContext, st, ranks: list[int]) -> tuple[dict[int, Any], dict[int, list[str]]]:
    """The ranks whose graph after the stage differs structurally from the reference's while the
    graphs the pass received agreed (their diffs), and the literals those inputs differed in."""
    ref = ranks[0]
    diverged: dict[int, Any] = {}
    literal_before: dict[int, list[str]] = {}
    for r in ranks[1:]:
        d_after = ctx.rank_diff(st.key, ref, r)
        if d_after is None or not d_after.structural:
            continue
        if st.parent is not None:
            d_before = ctx.rank_diff(st.parent.key, ref, r)
            if d_before is None or d_before.structural:
                continue  # already divergent before this pass (reported there)
            if not d_before.empty:
                literal_before[r] = _literal_lines(d_before)
        diverged[r] = d_after
    return diverged, literal_before


def _last_divergent(ctx: CheckContext, st, ref: int, diverged: dict[int, Any]):
    """How long the divergence lasts: the last of the stage's descendants on the reference rank
    whose graphs still differ structurally."""
    last = st
    chain = {id(st)}
    for later in ctx.index.by_rank[ref][st.order + 1 :]:
        if later.parent is not None and id(later.parent) in chain:
            if any((ctx.rank_diff(later.key, ref, r) or _NoDiff).structural for r in diverged):
                chain.add(id(later))
                last = later
    return last


def _divergence(ctx: CheckContext, st, ranks: list[int], shared: bool) -> Finding | None:
    """The finding of a pass (or of the traced graphs) after which ranks differ structurally."""
    key, ref = st.key, ranks[0]
    diverged, literal_before = _diverged_at(ctx, st, ranks)
    if not diverged:
        return None
    last = _last_divergent(ctx, st, ref, diverged)
    intro = st.pass_rec is None
    first_r = min(diverged)
    where = "traced graphs" if intro else f"pass {key.label()}"
    msg = f"{where}: rank(s) {format_ranks(diverged)} differ structurally from rank {ref}"
    if not intro:
        msg += " although the graphs the pass received agreed"
    ev: dict[str, Any] = {
        "reference_rank": ref,
        "counts": {str(r): d.counts for r, d in diverged.items()},
        "differences": _structural_lines(diverged[first_r]),
        "stage": key.label(),
    }
    if literal_before:
        ev["inputs_differed_in_literals"] = {str(r): v for r, v in literal_before.items()}
        msg += " (they differed only in literals: see rank-baked-constant)"
    first_change = next((c for c in diverged[first_r].changes() if c.status != "same"), None)
    node = first_change.name if first_change is not None else None
    sub = (first_change.subgraph or None) if first_change is not None else None
    sev = "warning" if intro else "error"
    sev, msg = _grade(ctx, key, ref, list(diverged), sev, msg, ev, shared=shared, traced=intro)
    o = Observation(("divergent", key), sev, msg, node=node, subgraph=sub, evidence=ev)
    return ctx._finding(KIND, st, last, o, sorted([ref, *diverged]))


def _grade(
    ctx: CheckContext,
    key,
    ref: int,
    others: list[int],
    sev: str,
    msg: str,
    ev: dict[str, Any],
    *,
    shared: bool,
    traced: bool,
) -> tuple[str, str]:
    """The severity and message of a structural divergence, by what it does to the collectives."""
    parts = [ctx.collective_parts(key, ref, r) for r in others]
    if any(parts):
        ev["collectives_agree"] = False
        return "info", msg + "; the ranks' collectives differ too: see collective-mismatch"
    if any(p is None for p in parts):
        return sev, msg  # the collectives cannot be read: nothing says the divergence is harmless
    ev["collectives_agree"] = True
    if shared:
        ev["shared"] = True
        return sev, msg
    ev.update({"shared": False, "severity_if_shared": sev})
    return "info", msg + "; " + COMPUTE_ONLY.format(made="traced" if traced else "compiled")


class _NoDiff:
    structural = False


def evidence_lines(f: Finding) -> list[str]:
    """The finding's evidence as lines of text (`check`, `report`, the TUI and SARIF show them):
    the structural differences, or where a pass ran and where not."""
    ev = f.evidence or {}
    if ev.get("differences"):
        return [str(d) for d in ev["differences"]]
    if ev.get("not_on"):
        return [f"ran on {ev.get('ran_on')}, not on {ev.get('not_on')}"]
    return []
