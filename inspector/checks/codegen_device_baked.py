"""device-baked in generated code (`"layer": "codegen"`): device indices the wrapper pins
(`device(type='cuda', index=N)`, `set_device(N)`, `_DeviceGuard(N)`, `get_raw_stream(N)`,
`'cuda:N'`).

Policy (as for FX device literals): code compiled on one rank and loaded by every rank (compile on
one rank: one rank generated code, or the capture or `check --shared-graph` says so) must not pin any index: every
loading
rank would launch on the compiling rank's device; an error naming the index and the ranks that
load it. Code each rank generated for itself may pin its own device; an index that is not the
rank's own device is an error; an accelerator index on a rank that computes on the CPU, a warning.
"""

from __future__ import annotations

from graphtrain_inspect.inspector.checks.codegen_sites import aligned, clip_code, code_evidence_lines, finding, fx_node
from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.checks.findings import Finding
from graphtrain_inspect.inspector.checks.rank_baked_constant import compile_on_one_rank
from graphtrain_inspect.inspector.diff.output_code import own_index, pinned_spans
from graphtrain_inspect.inspector.read.graphmodel import split_device

KIND = "device-baked"
DESCRIPTION = "device indices pinned in generated code: any, in code every rank loads; another rank's, in per-rank code"


def run(ctx: CheckContext) -> list[Finding]:
    out: list[Finding] = []
    sites_by_key = aligned(ctx)
    if not sites_by_key:
        return out
    cap = ctx.cap
    if cap.kind == "capture":
        # headers give the world size: ranks that loaded shared code may have logged nothing
        flag, _ = compile_on_one_rank(ctx)
        all_ranks = sorted(set(cap.ranks) | set(cap.absent_ranks))  # bounded: absent_ranks
    else:
        # torch's logs say nothing of the world (one rank's log read alone is not compile on
        # one rank): only the logs at hand count
        flag, all_ranks = False, list(cap.ranks)
    # ranks that generated code at all: code one rank generated is loaded by ranks that generated
    # none (they compiled nothing); a rank that generated code of its own compiles for itself, so
    # a compile only one rank made is that rank's recompile (rank-divergent-compile), not shared
    generating = {r for sites in sites_by_key.values() for r in sites}
    for sites in sites_by_key.values():
        alone = len(sites) == 1 and len(cap.ranks) > 1 and not (set(cap.ranks) - set(sites)) & generating
        shared = flag or getattr(ctx, "shared_graph", False) or alone
        for r, site in sorted(sites.items()):
            text = site.text
            if not text:
                continue
            rctx = site.rank_ctx
            own = own_index(rctx)
            own_typ = split_device(rctx.own_device)[0]
            pins: dict[int, list[tuple[int, str, str, str | None]]] = {}
            for i, line in enumerate(site.lines):
                if "(" not in line and ":" not in line:
                    continue
                for what, idx, a, b in pinned_spans(line):
                    k = site.kernel_at(i)
                    pins.setdefault(idx, []).append((i + 1, what, clip_code(line, a, b), k.name if k else None))
            for idx, where in sorted(pins.items()):
                loaders = [x for x in all_ranks if x != r] if shared else [r]
                if shared:
                    sev = "error"
                    why = (
                        f"is pinned in code compiled on rank {r} and loaded by ranks {all_ranks}: ranks "
                        f"{loaders} launch on device index {idx}"
                    )
                elif own is not None and idx != own:
                    sev = "error"
                    why = f"is not rank {r}'s own device index {own}"
                elif own is None and own_typ in ("cpu", "meta"):
                    sev = "warning"
                    why = f"pins an accelerator on rank {r}, which computes on {rctx.own_device}"
                else:
                    continue
                first = where[0]
                kernel = site.kernel_at(first[0] - 1)
                place = f"kernel {kernel.name}" if kernel else "the wrapper's own code"
                fx = fx_node(ctx, {r: site}, kernel)
                msg = f"device index {idx} ({first[1]}, {len(where)} line(s)) in generated code of {place} {why}"
                ev = {
                    "index": idx,
                    "own_index": own,
                    "shared": shared,
                    "compiled_on": r,
                    "loaded_by": loaders if shared else [r],
                    "kernel": kernel.name if kernel else None,
                    "line": first[0],
                    "code": first[2],
                    "lines": [{"line": ln, "what": w, "code": c, "kernel": k} for ln, w, c, k in where[:20]],
                    **fx,
                }
                out.append(
                    finding(KIND, sev, msg, {r: site}, all_ranks if shared else [r], node=fx["fx_node"], evidence=ev)
                )
    return out


def evidence_lines(f: Finding) -> list[str]:
    """The finding's evidence as lines of text (`check`, `report`, the TUI and SARIF show them)."""
    return code_evidence_lines(f)
