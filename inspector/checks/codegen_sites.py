"""What the codegen checks share: each compile's generated code lined up across ranks, normalized,
and findings blamed on the compile that produced the code and, through the kernel's FX nodes
(provenance), on the post-grad node and its source line.

Generated code is lined up by compile: the N-th piece of code a rank generated under compile id C
(`C#N`; captures of `compile_fx` outside torch.compile have no compile id: `#N`).
"""

from __future__ import annotations

from typing import Any

from graphtrain_inspect.inspector.checks import Finding
from graphtrain_inspect.inspector.checks.tables_and_blame import CheckContext
from graphtrain_inspect.inspector.diff.output_code import CodeNormalizer
from graphtrain_inspect.inspector.read.source_lines import parse_frame
from graphtrain_inspect.inspector.read.output_code import Kernel, OutputCode, code_text, compile_keys, kernels_of, pipeline_of

CODEGEN_PASS = "inductor_codegen"  # what findings name as the pass: Inductor's lowering of the post-grad graph


class CodeSite:
    """One rank's piece of generated code with its text, kernels and normalized lines (lazily)."""

    def __init__(self, ctx: CheckContext, oc: OutputCode):
        self.ctx = ctx
        self.oc = oc
        self._text: str | None | bool = False
        self._kernels: list[Kernel] | None = None
        self._norm: list[str] | None = None

    @property
    def text(self) -> str | None:
        if self._text is False:
            self._text = code_text(self.ctx.cap, self.oc)
        return self._text  # type: ignore[return-value]

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


def aligned(ctx: CheckContext) -> dict[str, dict[int, CodeSite]]:
    """Compile key -> {rank: its code}, cached on the context."""
    got = getattr(ctx, "_codegen_aligned", None)
    if got is not None:
        return got
    out = {key: {r: CodeSite(ctx, oc) for r, oc in per_rank.items()} for key, per_rank in compile_keys(ctx.cap).items()}
    ctx._codegen_aligned = out  # type: ignore[attr-defined]
    return out


def fx_node(ctx: CheckContext, sites: dict[int, CodeSite], kernel: str | None, line: int | None = None) -> tuple[str | None, str | None]:
    """(post-grad FX node, its source line) that the kernel computes, through provenance: among the
    kernel's nodes the one whose rows differ across the ranks, else the first; (None, None) unknown."""
    ref = sites[min(sites)]
    names = ref.oc.origins.get(kernel or "", []) if kernel else []
    if not names or ref.oc.graph is None:
        return (names[0] if names else None), None
    rows: dict[str, list[Any]] = {}
    for r, s in sites.items():
        t = ctx.tables(r, s.oc.graph) if s.oc.graph else None
        for n in names:
            rows.setdefault(n, []).append(t.root.node(n) if t is not None else None)
    pick = next((n for n in names if len({repr(_args(x)) for x in rows.get(n, [])}) > 1), names[0])
    stack = next((x.get("stack") for x in rows.get(pick, []) if isinstance(x, dict) and x.get("stack")), None)
    return pick, stack


def _args(row: Any) -> Any:
    return (row.get("args"), row.get("kwargs")) if isinstance(row, dict) else row


def finding(kind: str, severity: str, message: str, sites: dict[int, CodeSite], ranks: list[int], *, node: str | None, evidence: dict[str, Any]) -> Finding:
    ref = sites[min(sites)]
    pl = pipeline_of(ref.ctx.cap, ref.oc)
    ev = {"compile_id": ref.oc.compile_id, "output_code": {r: s.oc.oid for r, s in sorted(sites.items())}, **evidence}
    f = Finding(
        kind=kind, severity=severity, message=message, introduced_by=CODEGEN_PASS, pass_=CODEGEN_PASS,
        ranks=sorted(ranks), graph=ref.oc.graph, node=node, evidence=ev,
        pipeline=pl.key if pl is not None else (f"{ref.oc.compile_id or ''}#codegen"),
        introduced_seq=pl.passes[-1].seq if pl is not None and pl.passes else None,
        last_seq=pl.passes[-1].seq if pl is not None and pl.passes else None,
    )  # fmt: skip
    f.layer = "codegen"
    # the user's line of the FX node the kernel computes (through provenance), as FX findings name it
    f.source = parse_frame(evidence.get("fx_stack")) if hasattr(f, "source") else None
    return f
