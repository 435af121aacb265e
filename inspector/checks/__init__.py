"""Checks: find the bugs of graph-based distributed training in a capture, and blame a pass.

    from graphtrain_inspect.inspector.checks import run_checks, check_report
    findings = run_checks(cap)                       # list[Finding], errors first
    report = check_report(cap)                       # findings + summary (+ checks that could not run)

Each check is a small module in this package, registered in CHECKS below, with `KIND`,
`DESCRIPTION` and `run(ctx) -> list[Finding]`. Checks look at every graph state (the traced graph,
then each pass's outputs, on every rank); `tables_and_blame.CheckContext` turns per-stage
observations into findings that name the first pass after which each one appears (`introduced_by`, or
`"trace"` when the traced graph already has it) and the last pass where it is still present
(`pass`).

Shared by the checks: `tables_and_blame` (cached node tables and rank diffs, rank-derived vectors,
blame), `differing_literals` (literals that differ across ranks at aligned nodes), `row_rank_diff`
(rank diffs from undecoded rows), `symbol_rows` (a graph's symbol map as rows, stale ones marked).

May import: read and diff. Never replay, cli or tui; never torch, textual or rich.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.read.capture_index import Capture

SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}

# The checks, in the order of the report; each is the module of this package named after it
# (dashes as underscores), imported by `check_modules`.
CHECKS: tuple[str, ...] = (
    "rank-baked-constant",
    "device-baked",
    "stale-unbacked-symbol",
    "rank-divergent-graph",
    # generated code (`"layer": "codegen"`): Inductor's output per rank
    "codegen-rank-baked",
    "codegen-device-baked",
    "codegen-divergent",
    # torch.compile's own events (torch's TORCH_TRACE records): per rank, then across ranks
    "rank-divergent-compile",
    "compile-failure",
    "graph-break",
    "recompile",
    # last: it counts the reading problems the checks above ran into
    "incomplete-capture",
)


def check_modules() -> dict[str, ModuleType]:
    """Each check's module by its name, in the order of CHECKS. Imported here, on first use: the
    checks import Finding from this package, and the CLI reads CHECKS without loading them."""
    from graphtrain_inspect.inspector.checks import (
        codegen_device_baked,
        codegen_divergent,
        codegen_rank_baked,
        compile_failure,
        device_baked,
        graph_break,
        incomplete_capture,
        rank_baked_constant,
        rank_divergent_compile,
        rank_divergent_graph,
        recompile,
        stale_unbacked_symbol,
    )

    modules = (
        codegen_device_baked,
        codegen_divergent,
        codegen_rank_baked,
        compile_failure,
        device_baked,
        graph_break,
        incomplete_capture,
        rank_baked_constant,
        rank_divergent_compile,
        rank_divergent_graph,
        recompile,
        stale_unbacked_symbol,
    )
    by_name = {m.__name__.rpartition(".")[2].replace("_", "-"): m for m in modules}
    return {name: by_name[name] for name in CHECKS}


# A check's name is the kind of its findings, except the codegen checks that report a kind the
# graph checks have, with `"layer": "codegen"` (each module's KIND says the same; a test holds them).
KIND_OF_CHECK: dict[str, str] = {"codegen-rank-baked": "rank-baked-constant", "codegen-device-baked": "device-baked"}
FINDING_KINDS: tuple[str, ...] = tuple(dict.fromkeys(KIND_OF_CHECK.get(name, name) for name in CHECKS))


@dataclass
class Finding:
    """One problem found, as `check --json` prints it (`pass_` is the JSON key `pass`)."""

    kind: str
    severity: str
    message: str
    introduced_by: str | None = None  # first pass after which it appears, or "trace"
    pass_: str | None = None  # last pass where it is still present ("trace" if none kept it)
    ranks: list[int] = field(default_factory=list)
    graph: str | None = None  # gid of the graph where it first appears (lowest rank)
    subgraph: str | None = None  # nested subgraph path, None for the root
    node: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    pipeline: str | None = None
    introduced_seq: int | None = None  # seq of the introducing pass on the lowest rank
    last_seq: int | None = None
    # the user's source line of the node: {"file", "line", "code", "fn"} from its stack trace, or
    # {"created_by": pass} for a node a pass made (inspector.read.source_lines); None when unknown
    source: dict[str, Any] | None = None
    layer: str = "graph"  # graph: an FX graph; codegen: Inductor's generated code

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "introduced_by": self.introduced_by,
            "pass": self.pass_,
            "ranks": list(self.ranks),
            "graph": self.graph,
            "subgraph": self.subgraph or None,
            "node": self.node,
            "message": self.message,
            "evidence": self.evidence,
            "pipeline": self.pipeline,
            "introduced_seq": self.introduced_seq,
            "last_seq": self.last_seq,
            "source": self.source,
            "layer": self.layer,
        }


@dataclass
class NotRun:
    check: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"check": self.check, "reason": self.reason}


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
        by_kind: dict[str, int] = {}
        for f in self.findings:
            by_kind[f.kind] = by_kind.get(f.kind, 0) + 1
        cap = self.cap
        return {
            **self.counts(),
            "findings": len(self.findings),
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


def _sort_key(f: Finding) -> tuple:
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


def check_report(cap: "Capture", only: list[str] | None = None, *, shared_graph: bool = False, jobs: int = 1) -> Report:
    """With `jobs` > 1 the rank diffs and stale-symbol walks are made first in that many processes
    (checks.parallel); the findings are the same."""
    from graphtrain_inspect.inspector.checks.tables_and_blame import CheckContext

    ctx = CheckContext(cap, shared_graph=shared_graph)
    if jobs > 1:
        from graphtrain_inspect.inspector.checks.parallel import prefetch

        prefetch(ctx, jobs, only)
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
    findings.sort(key=_sort_key)
    return Report(findings, ctx.not_run, ctx.notes, cap)


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
                    rows = cap.rows_around(rank, f.graph, f.subgraph or "", f.node, NEAREST_REACH)
                    if rows is None:
                        tables = cap.node_table(rank, f.graph)
                        sub = tables.subgraph(f.subgraph or "") if tables is not None else None
                        rows = sub.nodes if sub is not None else None
                    near = nearest_source(rows, f.node, NEAREST_REACH) if rows is not None else None
                    if near is not None:
                        f.source = {**near, **({"created_by": f.source["created_by"]} if f.source else {})}
                break


def run_checks(cap: "Capture", only: list[str] | None = None, *, shared_graph: bool = False) -> list[Finding]:
    """Every registered check on the capture (or those named in `only`); errors first."""
    return check_report(cap, only, shared_graph=shared_graph).findings
