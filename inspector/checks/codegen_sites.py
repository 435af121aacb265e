"""What the codegen checks share: each compile's generated code lined up across ranks, normalized,
and findings blamed on the compile that produced the code and, through the kernel's FX nodes
(provenance), on the post-grad node and its source line.

Generated code is lined up by compile: the N-th piece of code a rank generated under compile id C
(`C#N`; captures of `compile_fx` outside torch.compile have no compile id: `#N`).
"""

from __future__ import annotations

from typing import Any

from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.checks.findings import Finding
from graphtrain_inspect.inspector.diff.output_code import CodeNormalizer
from graphtrain_inspect.inspector.read.output_code import (
    Kernel,
    OutputCode,
    code_text,
    compile_keys,
    kernel_source_nodes,
    kernels_of,
    pipeline_of,
    training_text,
)
from graphtrain_inspect.inspector.read.source_lines import parse_frame

CODEGEN_PASS = "inductor_codegen"
# a line of generated code in a finding's evidence, cut around what it is about  # what findings name as the pass:
# Inductor's lowering of the post-grad graph
CODE_WIDTH = 100


class CodeSite:
    """One rank's piece of generated code with its text, kernels and normalized lines (lazily)."""

    def __init__(self, ctx: CheckContext, oc: OutputCode):
        self.ctx = ctx
        self.oc = oc
        self._text: str | None | bool = False
        self._kernels: list[Kernel] | None = None
        self._norm: list[str] | None = None
        self._lines: list[str] | None = None

    @property
    def text(self) -> str | None:
        """The code as training runs it: Inductor's benchmark harness (`get_args` and the script
        block, with each rank's own size hints and example inputs) blanked, its lines kept, so no
        codegen check reads it."""
        if self._text is False:
            raw = code_text(self.ctx.cap, self.oc)
            self._text = training_text(raw) if raw is not None else None
        return self._text  # type: ignore[return-value]  # False (not read yet) is replaced just above

    @property
    def kernels(self) -> list[Kernel]:
        if self._kernels is None:
            self._kernels = kernels_of(self.text or "")
        return self._kernels

    @property
    def normalized(self) -> list[str]:
        if self._norm is None:
            self._norm = CodeNormalizer(self.rank_ctx).lines(self.text or "")
        return self._norm

    @property
    def rank_ctx(self) -> Any:
        """The rank's context, with the own device of the graph the code was made from (torch's
        logs have no device table: it is inferred from that graph's inputs)."""
        if self.oc.graph is not None:
            return self.ctx._stage_ctx(self.oc.rank, self.oc.graph)
        return self.ctx.rank_ctx(self.oc.rank)

    def kernel_at(self, line: int) -> Kernel | None:
        for k in self.kernels:
            if k.first <= line <= k.last:
                return k
        return None

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = (self.text or "").split("\n")
        return self._lines

    def kernel_nodes(self, kernel: Kernel | None) -> tuple[list[str], dict[str, str]]:
        """(the post-grad FX nodes the kernel computes, post-grad node -> source node): the
        capture's provenance where it has the kernel, else the nodes of the comments above it."""
        if kernel is None:
            return [], {}
        mapping = kernel_source_nodes(self.lines, kernel)
        names = list(self.oc.origins.get(kernel.name) or []) or list(mapping)
        return names, mapping


def clip_code(line: str, start: int, end: int, width: int = CODE_WIDTH) -> str:
    """The line stripped and cut to `width` characters with `line[start:end]` (a literal) in view:
    `…` where text is left out (a Triton kernel's triton_meta line is 450 characters)."""
    lead = len(line) - len(line.lstrip())
    text, start, end = line.strip(), max(0, start - lead), max(0, end - lead)
    if len(text) <= width:
        return text
    lo = max(0, min(start - (width - (end - start)) // 2, len(text) - width))
    hi = lo + width
    return (
        ("…" if lo > 0 else "")
        + text[lo + (1 if lo > 0 else 0) : hi - (1 if hi < len(text) else 0)]
        + ("…" if hi < len(text) else "")
    )


def aligned(ctx: CheckContext) -> dict[str, dict[int, CodeSite]]:
    """Compile key -> {rank: its code}, cached on the context."""
    got = getattr(ctx, "_codegen_aligned", None)
    if got is not None:
        return got
    out = {key: {r: CodeSite(ctx, oc) for r, oc in per_rank.items()} for key, per_rank in compile_keys(ctx.cap).items()}
    ctx._codegen_aligned = out  # type: ignore[attr-defined]  # a per-context cache kept on the context
    return out


def fx_node(ctx: CheckContext, sites: dict[int, CodeSite], kernel: Kernel | None) -> dict[str, Any]:
    """What the kernel computes: `fx_node` (the post-grad FX node: among the kernel's nodes the
    one whose rows differ across the ranks, else the first), `fx_nodes` (all of them),
    `source_node` (Dynamo's name of the user's expression it was made from, from the comments
    above the kernel) and `fx_stack` (the node's stack, or the nearest node's that has one:
    `stack_from`); empty where unknown (torch's logs without provenance or comments)."""
    ref = sites[min(sites)]
    names, mapping = ref.kernel_nodes(kernel)
    out: dict[str, Any] = {"fx_node": None, "fx_nodes": names, "source_node": None, "fx_stack": None}
    if not names:
        return out
    rows: dict[str, list[Any]] = {}
    tables = {r: (ctx.tables(r, s.oc.graph) if s.oc.graph else None) for r, s in sites.items()}
    for t in tables.values():
        for n in names:
            rows.setdefault(n, []).append(t.root.node(n) if t is not None else None)
    pick = next((n for n in names if len({repr(_args(x)) for x in rows.get(n, [])}) > 1), names[0])
    out["fx_node"] = pick
    out["source_node"] = mapping.get(pick)
    stack = next((x.get("stack") for x in rows.get(pick, []) if isinstance(x, dict) and x.get("stack")), None)
    if stack is None:
        # the node has none (a pass made it): the nearest of the kernel's nodes that has one
        # (same source node first), said as such
        near = sorted(
            (n for n in names if n != pick), key=lambda n: (mapping.get(n) != out["source_node"], names.index(n))
        )
        for n in near:
            stack = next((x.get("stack") for x in rows.get(n, []) if isinstance(x, dict) and x.get("stack")), None)
            if stack is not None:
                out["stack_from"] = n
                break
    out["fx_stack"] = stack
    return out


def _args(row: Any) -> Any:
    return (row.get("args"), row.get("kwargs")) if isinstance(row, dict) else row


def finding(
    kind: str,
    severity: str,
    message: str,
    sites: dict[int, CodeSite],
    ranks: list[int],
    *,
    node: str | None,
    evidence: dict[str, Any],
) -> Finding:
    ref = sites[min(sites)]
    pl = pipeline_of(ref.ctx.cap, ref.oc)
    ev = {"compile_id": ref.oc.compile_id, "output_code": {r: s.oc.oid for r, s in sorted(sites.items())}, **evidence}
    f = Finding(
        kind=kind,
        severity=severity,
        message=message,
        introduced_by=CODEGEN_PASS,
        pass_=CODEGEN_PASS,
        ranks=sorted(ranks),
        graph=ref.oc.graph,
        node=node,
        evidence=ev,
        pipeline=pl.key if pl is not None else (f"{ref.oc.compile_id or ''}#codegen"),
        introduced_seq=pl.passes[-1].seq if pl is not None and pl.passes else None,
        last_seq=pl.passes[-1].seq if pl is not None and pl.passes else None,
    )
    f.layer = "codegen"
    # the user's line of the FX node the kernel computes (through provenance), as FX findings name it
    f.source = parse_frame(evidence.get("fx_stack"))
    if f.source is not None and evidence.get("stack_from"):
        f.source["nearest_node"] = evidence["stack_from"]
    return f


def code_evidence_lines(f: Finding) -> list[str]:
    """A generated-code finding's evidence in one line: the values per rank and the line of code
    (the FX node's source line is the finding's `source`, shown under it as for FX findings)."""
    ev = f.evidence or {}
    parts = []
    if ev.get("literals"):
        m = ev.get("matches") or []
        parts.append(
            ", ".join(f"r{r}={v}" for r, v in ev["literals"].items())
            + (f" = {m[0].get('form') or m[0]['vector']}" if m else "")
        )
    if f.kind == "device-baked" and ev.get("lines"):
        parts.append(f"line {ev['lines'][0]['line']}: {ev['lines'][0]['code']}")
    elif ev.get("code"):
        parts.append(f"line {ev.get('line')}: {ev['code']}")
    if ev.get("diff"):
        parts.append(next((l for l in ev["diff"] if l[:1] in "+-" and not l.startswith(("+++", "---"))), ""))
    line = "  |  ".join(p for p in parts if p)
    return [line] if line else []
