"""One root cause, one finding: the findings that follow from another are made its consequences.

Run once on every check's findings, before anything prints (`checks._run_checks`), so that
`check`'s table and totals, `--json`, SARIF, the TUI and `report` count the same roots. A
consequence keeps its own kind, severity, message and evidence; it moves into its root's
`consequences` and out of the list of findings. Nothing here reads a message: each rule keys on
evidence the checks record (the pass, the pipeline and compile, the ranks, the graph a finding
lives in now and the node lineage that leads there).

The rules, each sound on its own:

* a literal's copies (rank-baked-constant, device-baked): the literal in the forward graph is
  the root; the same literal in the backward graph of the same compile (the same values on the
  same ranks, the same source line: AOTAutograd gives a backward node the stack of the forward
  op it differentiates) and the lines Inductor generated from either (the kernel's FX node, or
  the model node it was made from, is the literal's node in the graph the literal lives in now;
  where a rename hides the node, the kernel's line holds the literal's values and its FX node
  has the literal's source line) are its consequences;
* the consequences of one divergence: where the ranks' collectives differ at a pass
  (collective-mismatch), the structural divergences (rank-divergent-graph) at the same stage and
  the generated code that differs (codegen-divergent) in the same compile, on those ranks, follow
  from it;
* a pass that made ranks' graphs diverge (rank-divergent-graph introduced by a pass): the traced
  graphs of the same compile made after it that differ too (the partitioner's and Inductor's
  graphs of a joint pass's output), the generated code of that compile that differs, and the
  literals that differ across ranks at that pass without equalling any rank-derived value (a
  literal paired with another node's because the pass moved the nodes) are its consequences;
* one compile that names its own device in every kernel (device-baked in generated code, each
  line the device index of the rank that compiled it, in code shared with others): the first
  such kernel of the compile is the root, the compile's other kernels that do the same are its
  consequences (one cause: the compile bakes its device; each kernel is a place it shows).

A finding is never made the consequence of a less serious one: a consequence that is worse than
its would-be root stays a root of its own.
"""

from __future__ import annotations

from typing import Callable, Iterable

from graphtrain_inspect.inspector.checks.findings import SEVERITY_RANK, Finding

LITERAL_KINDS = ("rank-baked-constant", "device-baked")


def group(findings: list[Finding]) -> list[Finding]:
    """The roots among `findings` (in their order), each with its consequences (in their order)
    in `consequences`; a consequence of a consequence is its root's."""
    parent: dict[int, int] = {}
    for rule in (_literal_copies, _divergence_of_collectives, _divergence_of_a_pass, _own_device_kernels):
        for child, root in rule(findings, parent):
            if child != root and child not in parent and _top(parent, root) != child and _fits(findings, child, root):
                parent[child] = root
    roots = [f for i, f in enumerate(findings) if i not in parent]
    for f in roots:
        f.consequences = []
    for i, f in enumerate(findings):
        if i in parent:
            findings[_top(parent, i)].consequences.append(f)
    return roots


def every(findings: Iterable[Finding]) -> list[Finding]:
    """Each root then its consequences: every finding the checks made."""
    return [g for f in findings for g in f.with_consequences()]


def _top(parent: dict[int, int], i: int) -> int:
    while i in parent:
        i = parent[i]
    return i


def _fits(findings: list[Finding], child: int, root: int) -> bool:
    c, r = findings[child], findings[root]
    return SEVERITY_RANK.get(c.severity, 9) >= SEVERITY_RANK.get(r.severity, 9) and set(c.ranks) <= set(r.ranks)


def compile_of(f: Finding) -> str | None:
    """The compile a finding's pipeline belongs to ("1/0" of "1/0#3"); a pipeline of no compile
    (make_fx, a framework's own) is its own."""
    return f.pipeline.split("#", 1)[0] if f.pipeline else None


def _values(f: Finding) -> tuple | None:
    """The literal's value per rank, numbers as numbers (the kernel's 2.0 is the graph's 2)."""
    vals = (f.evidence or {}).get("values")
    if not isinstance(vals, dict) or not vals:
        return None
    out: list[tuple[str, float | str]] = []
    for r, v in sorted(vals.items(), key=lambda kv: str(kv[0])):
        try:
            out.append((str(r), float(v)))
        except (TypeError, ValueError):
            out.append((str(r), str(v)))
    return tuple(out)


def _source_line(f: Finding) -> tuple | None:
    src = f.source or {}
    return (src.get("file"), src.get("line")) if src.get("file") and src.get("line") else None


def consequence_label(c: Finding, root_kind: str | None = None) -> str:
    """A consequence in a few words: its node and where it lives (the backward graph, generated
    code, or its pipeline), and its kind where that is not its root's."""
    from graphtrain_inspect.inspector.read.stages import pipeline_label

    if c.layer == "codegen":
        where = "generated code"
    elif in_backward(c):
        where = "the backward graph"
    else:
        where = pipeline_label(c.pipeline) if c.pipeline else "the capture"
    return (f"{c.kind} at " if c.kind != root_kind else "") + f"{c.node or '-'} in {where}"


def in_backward(f: Finding) -> bool:
    """Whether the finding lives in the backward graph."""
    ev = f.evidence or {}
    return ev.get("backward") is True or ev.get("lives_in") == "backward"


Pairs = Iterable[tuple[int, int]]


def _literal_copies(findings: list[Finding], parent: dict[int, int]) -> Pairs:
    graph = [i for i, f in enumerate(findings) if f.kind in LITERAL_KINDS and f.layer == "graph"]
    forward = [i for i in graph if not in_backward(findings[i])]
    for i in graph:
        if in_backward(findings[i]):
            root = _first(forward, lambda j: _same_literal(findings[i], findings[j]))
            if root is not None:
                yield i, root
    for i, f in enumerate(findings):
        if f.kind in LITERAL_KINDS and f.layer == "codegen":
            root = _first(graph, lambda j: _generated_from(f, findings[j]))
            if root is not None:
                yield i, root


def _first(candidates: list[int], match: Callable[[int], bool]) -> int | None:
    return next((j for j in candidates if match(j)), None)


def _same_literal(back: Finding, fwd: Finding) -> bool:
    return (
        back.kind == fwd.kind
        and compile_of(back) == compile_of(fwd)
        and back.ranks == fwd.ranks
        and _values(back) is not None
        and _values(back) == _values(fwd)
        and _same_line(back, fwd)
    )


def _generated_from(code: Finding, lit: Finding) -> bool:
    """Whether the kernel line `code` was generated from the literal `lit`: the graph Inductor
    compiled is the one the literal lives in now, and the kernel's FX node (or the model node
    it came from) is the literal's node."""
    if code.kind != lit.kind or not set(code.ranks) <= set(lit.ranks):
        return False
    ev, lev = code.evidence or {}, lit.evidence or {}
    if code.graph not in (lev.get("graph_now"), lit.graph):
        return False
    names = {lit.node, *((lev.get("nodes") or {}).values())} - {None}
    if names & {code.node, ev.get("fx_node"), ev.get("source_node")}:
        # the same values where both say them (a device's kernel line names an index, not the literal)
        return _values(code) is None or _values(lit) is None or _values(code) == _values(lit)
    # the graph's node renamed on the way (no mapping comment names the model's node): the same
    # value on every rank, made from the same line of the model (the kernel's FX node's stack)
    return _values(code) is not None and _values(code) == _values(lit) and _same_line(code, lit)


def _same_line(a: Finding, b: Finding) -> bool:
    return _source_line(a) is not None and _source_line(a) == _source_line(b)


def _same_stage(f: Finding, g: Finding) -> bool:
    return f.pipeline == g.pipeline and f.introduced_seq == g.introduced_seq and f.introduced_by == g.introduced_by


def _divergence_of_collectives(findings: list[Finding], parent: dict[int, int]) -> Pairs:
    roots = [i for i, f in enumerate(findings) if f.kind == "collective-mismatch" and f.introduced_by]
    for i, f in enumerate(findings):
        if f.kind == "rank-divergent-graph":
            root = _first(roots, lambda j: _same_stage(f, findings[j]))
        elif f.kind == "codegen-divergent":
            root = _first(roots, lambda j: compile_of(f) is not None and compile_of(f) == compile_of(findings[j]))
        else:
            continue
        if root is not None:
            yield i, root


def _divergence_of_a_pass(findings: list[Finding], parent: dict[int, int]) -> Pairs:
    roots = [
        i
        for i, f in enumerate(findings)
        if f.kind == "rank-divergent-graph" and f.introduced_by not in (None, "trace") and i not in parent
    ]
    for i, f in enumerate(findings):
        root = _first(roots, lambda j: i != j and _follows_divergence(f, findings[j]))
        if root is not None:
            yield i, root


def _follows_divergence(f: Finding, root: Finding) -> bool:
    same_compile = compile_of(f) is not None and compile_of(f) == compile_of(root)
    if f.kind == "rank-divergent-graph":
        # a later graph of the same compile that was traced from the divergent output
        return same_compile and f.introduced_by == "trace" and _later(f, root)
    if f.kind == "codegen-divergent":
        return same_compile
    if f.kind == "rank-baked-constant" and f.layer == "graph":
        return _same_stage(f, root) and not (f.evidence or {}).get("matches")
    return False


def _later(f: Finding, root: Finding) -> bool:
    a, b = _pipeline_index(f), _pipeline_index(root)
    return a is not None and b is not None and a > b


def _pipeline_index(f: Finding) -> int | None:
    tail = (f.pipeline or "").partition("#")[2]
    return int(tail) if tail.isdigit() else (0 if f.pipeline else None)


def _own_device_kernels(findings: list[Finding], parent: dict[int, int]) -> Pairs:
    first: dict[tuple, int] = {}
    for i, f in enumerate(findings):
        key = _own_device_compile(f)
        if key is None or i in parent:
            continue
        if key in first:
            yield i, first[key]
        else:
            first[key] = i


def _own_device_compile(f: Finding) -> tuple | None:
    """(compile, severity, ranks) of a kernel line naming the device of the rank that compiled it,
    in code shared with other ranks; None for any other finding."""
    ev = f.evidence or {}
    if f.kind != "device-baked" or f.layer != "codegen" or not ev.get("shared"):
        return None
    if ev.get("index") is None or ev.get("index") != ev.get("own_index") or compile_of(f) is None:
        return None
    return (compile_of(f), f.severity, tuple(f.ranks))
