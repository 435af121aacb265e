"""cache-shared-code (`"layer": "codegen"`): ranks that compiled different code under one FX graph
cache key. Inductor files a compile's code under a key taken before the post-grad passes run; the
local ranks share one cache directory by default (and a remote cache shares it further), so when
two ranks compute the same key, whichever saves first serves its code to the other: "rank 1 would
run rank 0's code from a shared cache". The capture records each compile's key
(`gti_codegen.cache_key`, capture/cache_keys.py); a capture without keys gets nothing from here.

Code is compared as the codegen checks compare it: normalized (kernel names, the own device,
streams and group names), comments left out (Inductor copies FX node text into them). The pass
named is the first post-grad pass after which the ranks' graphs differ (rank diffs, normalized as
for every graph check), which ran after the key was taken; `inductor_codegen` where the graphs
agree and the code does not. Then Inductor decided per rank (autotuning, size hints of a dynamic
compile, a setting read per rank): an error where a differing literal is a rank-derived value,
else info (one rank's code may well run right on the other).
"""

from __future__ import annotations

from typing import Any

from graphtrain_inspect.capture.shared.rank_ranges import format_ranks
from graphtrain_inspect.inspector.checks.cache_keys import by_cache_key, undetermined_keys
from graphtrain_inspect.inspector.checks.codegen_sites import CODEGEN_PASS, CodeSite, code_evidence_lines
from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.checks.findings import Finding
from graphtrain_inspect.inspector.checks.rank_baked_constant import match_vectors
from graphtrain_inspect.inspector.diff.graph_diff import text_diff
from graphtrain_inspect.inspector.diff.output_code import literal_skeleton, literal_value
from graphtrain_inspect.inspector.read.output_code import OutputCode, pipeline_of
from graphtrain_inspect.inspector.read.stages import TRACE, Stage

KIND = "cache-shared-code"
DESCRIPTION = "ranks that compiled different code under one FX graph cache key (a shared cache mixes them up)"


def _code(site: CodeSite) -> list[str]:
    return [l for l in site.normalized if not l.lstrip().startswith("#")]


def _rank_literals(ctx: CheckContext, a: CodeSite, b: CodeSite) -> list[dict[str, Any]]:
    """Literals at lines the two ranks' code shares but for them, whose values equal a
    rank-derived value (rank_baked_constant.match_vectors): `{"code", "values", "matches"}`."""
    la, lb = _code(a), _code(b)
    if len(la) != len(lb):
        return []
    out: list[dict[str, Any]] = []
    vectors = ctx.vectors()
    for x, y in zip(la, lb):
        if x == y:
            continue
        (sx, vx), (sy, vy) = literal_skeleton(x), literal_skeleton(y)
        if sx != sy or len(vx) != len(vy):
            continue
        for tx, ty in zip(vx, vy):
            values = {a.oc.rank: literal_value(tx), b.oc.rank: literal_value(ty)}
            if tx == ty or None in values.values():
                continue
            matches = match_vectors(values, vectors)
            if matches:
                out.append(
                    {"code": y.strip()[:200], "values": {str(r): v for r, v in values.items()}, "matches": matches}
                )
    return out


def _first_divergence(ctx: CheckContext, ref: OutputCode, other: int) -> tuple[Stage | None, Any, bool]:
    """The first stage of the reference rank's post-grad pipeline whose graph differs on `other`
    (normalized), with its diff, and whether any stage could be compared at all."""
    pl = pipeline_of(ctx.cap, ref)
    compared = False
    if pl is None:
        return None, None, compared
    for st in ctx.index.by_rank.get(ref.rank, []):
        if st.key.pipeline != pl.key:
            continue
        d = ctx.rank_diff(st.key, ref.rank, other)
        compared = compared or d is not None
        if d is not None and not d.empty:
            return st, d, compared
    return None, None, compared


def run(ctx: CheckContext) -> list[Finding]:
    out: list[Finding] = []
    # no keys (a capture from before them, the run's cache off): nothing to say
    undetermined = undetermined_keys(ctx)
    for key, per_rank in by_cache_key(ctx).items():
        if len(per_rank) < 2:
            continue
        if key in undetermined:
            ctx.notes.append(
                f"FX graph cache key {key[:12]}… held two different codes on rank {undetermined[key]} itself: "
                "the key does not determine the code there (torch's cache tells its entries apart by more than "
                "it), so ranks' codes under it were not compared"
            )
            continue
        sites = {r: CodeSite(ctx, oc) for r, oc in per_rank.items()}
        ranks = sorted(sites)
        ref = ranks[0]
        ref_code = _code(sites[ref])
        differ = [r for r in ranks[1:] if _code(sites[r]) != ref_code]
        if not differ:
            continue
        out.append(_finding(ctx, key, sites, ref, differ))
    return out


def _finding(ctx: CheckContext, key: str, sites: dict[int, CodeSite], ref: int, differ: list[int]) -> Finding:
    oc = sites[ref].oc
    st, d, compared = _first_divergence(ctx, oc, differ[0])
    blamed = st.pass_name if st is not None and st.pass_rec is not None else CODEGEN_PASS
    code_diff = text_diff(_code(sites[ref]), _code(sites[differ[0]]), f"rank {ref}", f"rank {differ[0]}", context=0)
    changed = [l for l in code_diff if l[:1] in "+-" and not l.startswith(("+++", "---"))]
    who = f"rank {differ[0]}" if len(differ) == 1 else f"ranks {format_ranks(differ)}"
    msg = (
        f"{who} would run rank {ref}'s code from a shared cache: ranks {format_ranks([ref, *differ])} "
        f"compiled different code under one FX graph cache key ({key[:12]}…)"
    )
    if st is not None and st.pass_rec is not None:
        msg += f", made to differ by pass {st.key.label()} after the key was taken"
    elif st is not None:
        msg += ", their graphs differing already where the key was taken"
    elif compared:
        msg += ", from graphs that agree (Inductor's lowering differs by rank)"
    severity = "error"
    rank_literals: list[dict[str, Any]] = []
    if st is None:
        # nothing in the graph differs: Inductor decided per rank (autotuning, size hints of a
        # dynamic compile, a setting read per rank). Only a rank-derived value makes one rank's
        # code wrong on another; else either rank's code may well run right on the other
        rank_literals = _rank_literals(ctx, sites[ref], sites[differ[0]])
        if not rank_literals:
            severity = "info"
            msg += "; no rank-derived value among the differences: each rank's code may run right on the other"
    node = None
    sub = None
    graph_lines: list[str] = []
    if d is not None:
        for ch in d.changes():
            if ch.status == "same":
                continue
            if node is None:
                node, sub = ch.name, ch.subgraph or None
            graph_lines.append((f"[{ch.subgraph}] " if ch.subgraph else "") + ch.summary())
            if len(graph_lines) >= 6:
                break
    pl = pipeline_of(ctx.cap, oc)
    ev: dict[str, Any] = {
        "cache_key": key,
        "ranks": sorted(sites),
        "differing_ranks": differ,
        "reference_rank": ref,
        "pass": blamed,
        "stage": st.key.label() if st is not None else None,
        "compile_id": {str(r): s.oc.compile_id for r, s in sorted(sites.items())},
        "output_code": {str(r): s.oc.oid for r, s in sorted(sites.items())},
        "graph": {str(r): s.oc.graph for r, s in sorted(sites.items())},
        "graph_differences": graph_lines,
        "code_diff": code_diff[:40],
        "code_lines_changed": len(changed),
        **({"rank_literals": rank_literals[:6]} if rank_literals else {}),
    }
    f = Finding(
        kind=KIND,
        severity=severity,
        message=msg,
        introduced_by=blamed if st is None or st.pass_rec is not None else TRACE,
        pass_=CODEGEN_PASS,
        ranks=sorted([ref, *differ]),
        graph=st.gid if st is not None else oc.graph,
        subgraph=sub,
        node=node,
        evidence=ev,
        pipeline=pl.key if pl is not None else f"{oc.compile_id or ''}#codegen",
        introduced_seq=st.seq if st is not None else None,
        last_seq=pl.passes[-1].seq if pl is not None and pl.passes else None,
    )
    f.layer = "codegen"
    return f


def evidence_lines(f: Finding) -> list[str]:
    """The finding's evidence as lines of text (`check`, `report`, the TUI and SARIF show them)."""
    return code_evidence_lines(f)
