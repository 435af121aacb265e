"""collective-mismatch: ranks whose graphs run different collectives would wait on each other.

The collectives are the contract between ranks: every rank of a group must issue the same
collectives on the same groups, in the same order and of the same sizes. For each graph state
(the traced graph, then each pass's outputs), the sequence of collectives on every rank of a group
that ought to agree (`CheckContext.rank_groups`: a pipeline stage) is compared with the lowest
rank's (`diff.collectives`: op, group by role, sizes, forward/backward, nested subgraphs in place).
Where they part, an error blamed on the first pass after which they differ (the graphs it received
ran the same collectives), naming the collectives, the ranks and the phase; one finding per such
pass, not one per later pass that carries the difference along. Traced graphs that already differ
are a warning (`introduced_by: trace`): ranks may trace different programs on purpose where no
mesh tells their pipeline stages apart.

Where the sequences agree but the graphs differ, what each collective sends is compared too
(`diff.collective_operands`, through `CheckContext.collective_parts`): ranks that issue the same
collectives in another order pair different tensors (a rank's gradient of one parameter summed
with another rank's gradient of another) without a hang; an `OperandOrder` part, reported the same
way and named by the reference rank's nodes.

rank-divergent-graph reads the same sequences to grade structural divergence: where they agree,
ranks differ only in what they compute.
"""

from __future__ import annotations

from typing import Any

from graphtrain_inspect.capture.shared.rank_ranges import format_ranks
from graphtrain_inspect.inspector.checks.context import CheckContext, Observation
from graphtrain_inspect.inspector.checks.findings import Finding
from graphtrain_inspect.inspector.diff.collective_operands import (
    OperandOrder,
    consequence,
    describe_order,
    operand_labels,
)
from graphtrain_inspect.inspector.diff.collectives import Part, describe_part
from graphtrain_inspect.inspector.read.stages import Stage

KIND = "collective-mismatch"
DESCRIPTION = (
    "ranks of a group run different collectives (op, group, order, size), or the same ones in another"
    " order: they would hang, or pair different tensors"
)

# collectives listed per rank in a finding's evidence
_LISTED = 24


def _first_node(parts: list[Part]) -> tuple[str | None, str | None]:
    p = parts[0]
    # a move names the reference rank's node: the finding's graph is the reference's
    c = (p.a if isinstance(p, OperandOrder) else p.b or p.a)[0]
    return c.node, c.subgraph or None


def _describe(p: Part, ra: int, rb: int) -> str:
    return describe_order(p, ra, rb) if isinstance(p, OperandOrder) else describe_part(p, ra, rb)


def run(ctx: CheckContext) -> list:
    findings: list[Finding] = []
    groups = ctx.compared_groups()
    if not groups:
        ctx.skip(KIND, "needs graphs of at least two ranks to compare")
        return findings
    for ranks in groups:
        ref = ranks[0]
        ref_stages = ctx.index.by_rank[ref]
        # a difference carried into a later pipeline of the same compile by a step no pass records
        # (lowering, the backward's own compile) whose link the stage index could not make
        seen: set[tuple] = set()
        for st in ref_stages:
            diverged: dict[int, list[Part]] = {}
            for r in ranks[1:]:
                parts = ctx.collective_parts(st.key, ref, r)
                if not parts:
                    continue
                if st.parent is not None and ctx.collective_parts(st.parent.key, ref, r):
                    continue  # already parted before this pass (reported there)
                diverged[r] = parts
            if not diverged:
                continue
            lines = {r: [_describe(p, ref, r) for p in parts] for r, parts in diverged.items()}
            cid = st.key.pipeline.rpartition("#")[0]
            sig = (cid, tuple((r, tuple(ls)) for r, ls in sorted(lines.items())))
            if cid and sig in seen:
                continue
            seen.add(sig)
            findings.append(_finding(ctx, st, ref, diverged, lines, ref_stages))
    return findings


def _finding(
    ctx: CheckContext,
    st: Stage,
    ref: int,
    diverged: dict[int, list[Part]],
    lines: dict[int, list[str]],
    ref_stages: list[Stage],
) -> Finding:
    key = st.key
    # how long it lasts: this stage's descendants on the reference rank whose collectives still part
    last = st
    chain = {id(st)}
    for later in ref_stages[st.order + 1 :]:
        if later.parent is not None and id(later.parent) in chain:
            if any(ctx.collective_parts(later.key, ref, r) for r in diverged):
                chain.add(id(later))
                last = later
    traced = st.pass_rec is None
    first_r = min(diverged)
    sizes_only = all(p.how == "size" for parts in diverged.values() for p in parts)
    what = "would hang or exchange mismatched data" if sizes_only else "would hang"
    head = lines[first_r][0]
    more = sum(len(v) for v in lines.values()) - 1
    order_only = all(isinstance(p, OperandOrder) for parts in diverged.values() for p in parts)
    msg = f"{head}: {consequence(diverged[first_r]) if order_only else 'the ranks ' + what}"
    if more:
        msg += f" (and {more} more difference{'s' if more > 1 else ''})"
    msg += "; in the traced graphs" if traced else f"; after pass {key.label()}, whose inputs ran the same collectives"
    seqs: dict[str, Any] = {}
    for r in [ref, *sorted(diverged)]:
        s = ctx.index.across(key)[r]
        cs = ctx.collectives(s) or []
        # in another order: each collective with what it sends (its operand's node on that rank)
        ops = operand_labels(ctx.operands(ctx.index.across(key)[ref]), ctx.operands(s), ref) if order_only else []
        seqs[str(r)] = [
            c.describe() + (ops[i] if i < len(ops) else "") + f" [{c.phase}]" for i, c in enumerate(cs[:_LISTED])
        ] + ([f"... {len(cs) - _LISTED} more"] if len(cs) > _LISTED else [])
    ev: dict[str, Any] = {
        "reference_rank": ref,
        "differences": {str(r): v for r, v in lines.items()},
        "collectives": seqs,
        "parts": {
            str(r): [
                {"how": p.how, "reference": [c.to_json() for c in p.a], "rank": [c.to_json() for c in p.b]}
                | ({"moves": p.moves} if isinstance(p, OperandOrder) else {})
                for p in parts
            ]
            for r, parts in diverged.items()
        },
        "stage": key.label(),
    }
    node, sub = _first_node(diverged[first_r])
    o = Observation(("collectives", key), "warning" if traced else "error", msg, node=node, subgraph=sub, evidence=ev)
    f = ctx._finding(KIND, st, last, o, sorted([ref, *diverged]))
    if traced:
        f.message += f" (rank(s) {format_ranks(diverged)} against rank {ref}; ranks may trace different programs)"
    return f


def evidence_lines(f: Finding) -> list[str]:
    """The finding's evidence as lines of text (`check`, `report`, the TUI and SARIF show them):
    the reference rank's collectives and those of the first rank that parts from them."""
    seqs = (f.evidence or {}).get("collectives") or {}
    shown = list(seqs.items())[:2]
    line = "  |  ".join(
        f"r{r}: " + (", ".join(str(c) for c in cs[:4]) + (", ..." if len(cs) > 4 else "") if cs else "none")
        for r, cs in shown
    )
    return [line] if line else []
