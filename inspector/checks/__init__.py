"""Checks: find the bugs of graph-based distributed training in a capture, and blame a pass.

    from graphtrain_inspect.inspector.checks import run_checks, check_report
    findings = run_checks(cap)                       # list[Finding]: every one, each root then its consequences
    report = check_report(cap)                       # root causes + summary (+ checks that could not run)

Each check is a small module in this package, listed once in CHECK_MODULES below, with `KIND`,
`DESCRIPTION` and `run(ctx) -> list[Finding]`. Checks look at every graph state (the traced graph,
then each pass's outputs, on every rank); `context.CheckContext` turns per-stage
observations into findings that name the first pass after which each one appears (`introduced_by`, or
`"trace"` when the traced graph already has it) and the last pass where it is still present
(`pass`).

Shared by the checks: `context` (cached node tables and rank diffs, rank-derived vectors,
blame), `differing_literals` (literals that differ across ranks at aligned nodes), `row_rank_diff`
(rank diffs from undecoded rows), `symbol_rows` (a graph's symbol map as rows, stale ones marked),
`cache_keys` (each compile's FX graph cache key, by key and by pipeline).

May import (of ours): `capture.shared`, `inspector.errors`, `inspector.read`, `inspector.diff`.
Never replay, cli or tui; never torch, textual or rich.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Sequence

from graphtrain_inspect.inspector.checks.findings import SEVERITIES, SEVERITY_RANK, Finding, NotRun

__all__ = [
    "CHECKS",
    "CHECK_MODULES",
    "FINDING_KINDS",
    "KIND_OF_CHECK",
    "SEVERITIES",
    "SEVERITY_RANK",
    "Finding",
    "NotRun",
    "Report",
    "check_modules",
    "check_report",
    "check_reports",
    "run_checks",
]

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.checks.context import CheckContext
    from graphtrain_inspect.inspector.diff.rank_diffs import RankDiffStrategy
    from graphtrain_inspect.inspector.read.capture_reader import Capture

# The checks, in the order of the report: each a module of this package named after the check
# (dashes as underscores) with `KIND`, `DESCRIPTION` and `run(ctx)`. Adding a check is its module
# and its line here. Names, not imports: the CLI reads the check names when it builds its parser,
# and importing the check modules costs ~0.4 s that `ls` or `diff` should not pay.
CHECK_MODULES: tuple[str, ...] = (
    # first: a training that failed is the first thing to report
    "training_failed",
    "rank_baked_constant",
    "device_baked",
    "stale_unbacked_symbol",
    "rank_divergent_graph",
    "collective_mismatch",
    # generated code (`"layer": "codegen"`): Inductor's output per rank
    "codegen_rank_baked",
    "codegen_device_baked",
    "codegen_stale_symbol",
    "codegen_divergent",
    "cache_shared_code",
    # torch.compile's own events (torch's TORCH_TRACE records): per rank, then across ranks
    "rank_divergent_compile",
    "compile_failure",
    "graph_break",
    "recompile",
    # last: it counts the reading problems the checks above ran into
    "incomplete_capture",
)
CHECKS: tuple[str, ...] = tuple(m.replace("_", "-") for m in CHECK_MODULES)


def check_modules() -> dict[str, ModuleType]:
    """Each check's module by its name, in the order of CHECKS (imported on first use)."""
    return {name: importlib.import_module(f"{__name__}.{m}") for name, m in zip(CHECKS, CHECK_MODULES)}


# A check's name is the kind of its findings, except the codegen checks that report a kind the
# graph checks have, with `"layer": "codegen"` (each module's KIND says the same; a test holds them).
KIND_OF_CHECK: dict[str, str] = {
    "codegen-rank-baked": "rank-baked-constant",
    "codegen-device-baked": "device-baked",
    "codegen-stale-symbol": "stale-unbacked-symbol",
}
FINDING_KINDS: tuple[str, ...] = tuple(dict.fromkeys(KIND_OF_CHECK.get(name, name) for name in CHECKS))


@dataclass
class Report:
    findings: list[Finding]
    not_run: list[NotRun]
    notes: list[str]
    cap: Any = field(default=None, repr=False)

    def counts(self) -> dict[str, int]:
        c = {s: 0 for s in SEVERITIES}
        for f in self.findings:
            c[f.severity] = c.get(f.severity, 0) + 1
        return c

    def summary(self) -> dict[str, Any]:
        """Counts of root causes (each finding of `findings`); `consequences` counts the findings
        that follow from them (checks.root_causes), listed inside their roots."""
        by_kind: dict[str, int] = {}
        for f in self.findings:
            by_kind[f.kind] = by_kind.get(f.kind, 0) + 1
        cap = self.cap
        return {
            **self.counts(),
            "findings": len(self.findings),
            "consequences": sum(len(f.consequences) for f in self.findings),
            "by_kind": by_kind,
            "checks": list(CHECKS),
            "not_run": [n.to_json() for n in self.not_run],
            "notes": list(self.notes),
            "source": getattr(cap, "kind", None),
            "ranks": list(getattr(cap, "ranks", [])),
            "read_errors": [str(e) for e in cap.all_errors()] if cap is not None else [],
        }

    def to_json(self) -> dict[str, Any]:
        return {"findings": [f.to_json() for f in self.findings], "summary": self.summary()}


def sort_key(f: Finding) -> tuple:
    return (
        SEVERITY_RANK.get(f.severity, 9),
        list(CHECKS).index(f.kind) if f.kind in CHECKS else 99,
        f.pipeline or "",
        f.introduced_seq if f.introduced_seq is not None else -1,
        f.subgraph or "",
        natural_key(f.node or ""),
    )


def natural_key(name: str) -> tuple:
    """`name`'s sort key with its numbers compared as numbers: ge, ge_1, ge_2, ..., ge_10 (FX's
    own order of naming), not ge, ge_1, ge_10, ge_11, ..., ge_2."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def check_report(
    cap: "Capture",
    only: list[str] | None = None,
    *,
    shared_graph: bool = False,
    jobs: int = 1,
    classes: bool = True,
    strategies: "Sequence[RankDiffStrategy] | None" = None,
) -> Report:
    """With `jobs` > 1 the rank diffs and stale-symbol walks are made first in that many processes
    (checks.parallel); the findings are the same. `classes` off: every rank diff is made, none
    answered from the rank classes (the same findings, slower; tests compare the two). `strategies`:
    how rank diffs are made (default: `diff.rank_diffs.STRATEGIES`; tests drop one)."""
    from graphtrain_inspect.inspector.read.collector import no_gc

    with no_gc():  # the TUI's check job too (the commands run with it off already)
        return _check_report(cap, only, shared_graph, jobs, classes, strategies)


def check_reports(cap: "Capture", shared_graphs: Sequence[bool], *, jobs: int = 1) -> list[Report]:
    """`check_report` under each grading (`shared_graph` off or on: `report` shows both), the
    rank diffs, normalizers, rank classes and stale-symbol walks made once: none of them depends
    on the grading, only what the checks conclude from them does."""
    from graphtrain_inspect.inspector.checks.context import CheckContext
    from graphtrain_inspect.inspector.read.collector import no_gc

    out: list[Report] = []
    first: CheckContext | None = None
    with no_gc():
        for shared in shared_graphs:
            if first is None:
                ctx = first = _context(cap, shared, jobs, None, True)
            else:
                ctx = CheckContext(cap, shared_graph=shared)
                ctx.share_made(first)
            out.append(_run_checks(ctx, None))
    return out


def _check_report(
    cap: "Capture",
    only: list[str] | None,
    shared_graph: bool,
    jobs: int,
    classes: bool,
    strategies: "Sequence[RankDiffStrategy] | None" = None,
) -> Report:
    return _run_checks(_context(cap, shared_graph, jobs, only, classes, strategies), only)


def _context(
    cap: "Capture",
    shared_graph: bool,
    jobs: int,
    only: list[str] | None,
    classes: bool,
    strategies: "Sequence[RankDiffStrategy] | None" = None,
) -> "CheckContext":
    """A check context, its rank diffs and stale-symbol walks made first in `jobs` processes
    where that is more than one (checks.parallel)."""
    from graphtrain_inspect.inspector.checks.context import CheckContext

    made = {"strategies": strategies} if strategies is not None else {}
    ctx = CheckContext(cap, shared_graph=shared_graph, classes=classes, **made)
    if jobs > 1:
        from graphtrain_inspect.inspector.checks.parallel import prefetch

        prefetch(ctx, jobs, only, waiting=check_modules)  # imported while the workers finish
    return ctx


def _run_checks(ctx: "CheckContext", only: list[str] | None) -> Report:
    cap = ctx.cap
    findings: list[Finding] = []
    ran = [kind for kind in CHECKS if not only or kind in only]
    modules = check_modules()
    for kind in ran:
        try:
            found = modules[kind].run(ctx)
        except Exception as e:  # noqa: BLE001 - a bug in one check must not cost the others' findings
            ctx.not_run.append(NotRun(kind, raised_reason(e)))
            continue
        findings.extend(found)
    from graphtrain_inspect.inspector.checks.not_checked import explain

    explain(ctx, ran)
    attach_sources(cap, findings)
    findings.sort(key=sort_key)
    from graphtrain_inspect.inspector.checks.root_causes import group

    return Report(group(findings), ctx.not_run, ctx.notes, cap)


def raised_reason(e: BaseException) -> str:
    """What `not run` says of a check that raised: the error in one line (a bug in the check, or
    input it did not expect; the report holds the other checks' findings all the same)."""
    text = str(e).strip().splitlines()
    return f"raised {type(e).__name__}" + (f": {text[0][:200]}" if text else "")


def attach_sources(cap: "Capture", findings: list[Finding]) -> None:
    """Give each finding on a node the source line of that node (from the graph where it first
    appears, on the first of its ranks that has the graph)."""
    from graphtrain_inspect.inspector.read.source_lines import NEAREST_REACH, nearest_source, node_source

    for f in findings:
        if f.source is not None or not f.node or not f.graph:
            continue
        for rank in f.ranks:
            has_sub, row = cap.node_row(rank, f.graph, f.subgraph or "", f.node)
            if has_sub:
                # a node of generated code's graph was made by no pass named in the finding
                f.source = node_source(row, None if f.layer == "codegen" else f.introduced_by)
                if f.source is None or not f.source.get("file"):
                    # no stack of its own: the nearest node of the graph that has one, said as such
                    # (from the rows in reach alone, where they can be read without the table)
                    read, near = cap.nearest_source(rank, f.graph, f.subgraph or "", f.node, NEAREST_REACH)
                    if not read:
                        tables = cap.node_table(rank, f.graph)
                        sub = tables.subgraph(f.subgraph or "") if tables is not None else None
                        near = nearest_source(sub.nodes, f.node, NEAREST_REACH) if sub is not None else None
                    if near is not None:
                        f.source = {**near, **({"created_by": f.source["created_by"]} if f.source else {})}
                break


def run_checks(cap: "Capture", only: list[str] | None = None, *, shared_graph: bool = False) -> list[Finding]:
    """Every registered check on the capture (or those named in `only`): every finding, each root
    cause followed by its consequences (checks.root_causes); roots errors first."""
    from graphtrain_inspect.inspector.checks.root_causes import every

    return every(check_report(cap, only, shared_graph=shared_graph).findings)
