"""What a check reports: a `Finding` (one problem, as `check --json` prints it), a `NotRun` (a check
that had nothing to look at, or raised), and the severities in their order.

Its own module so the checks import it without importing the package that lists them (no import
circle between the runner and the checks it runs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}


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
    # the findings that follow from this one (checks.root_causes): each keeps its own kind,
    # severity, message and evidence; empty for a finding that is no root of others
    consequences: list["Finding"] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
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
        if self.consequences:  # only where there are some: a finding without keeps its old shape
            out["consequences"] = [c.to_json() for c in self.consequences]
        return out

    def with_consequences(self) -> list["Finding"]:
        """This finding, then each of its consequences."""
        return [self, *self.consequences]


@dataclass
class NotRun:
    check: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"check": self.check, "reason": self.reason}
