"""A finding's evidence as lines of text, from the module of the check that made it: each check
module has `evidence_lines(finding) -> list[str]` (plain text, the first line the one `check`'s
table prints under the message). `check`, `report`, the TUI and SARIF show these lines."""

from __future__ import annotations

from graphtrain_inspect.inspector.checks.findings import Finding


def evidence_lines(f: Finding) -> list[str]:
    """`f`'s evidence in lines, as the check that found it renders it ([] where it has none)."""
    from graphtrain_inspect.inspector.checks import KIND_OF_CHECK, check_modules

    modules = check_modules()
    name = f.kind
    if f.layer == "codegen":
        # a kind the graph checks have, found in generated code: its codegen check renders it
        name = next((check for check, kind in KIND_OF_CHECK.items() if kind == f.kind), name)
    render = getattr(modules.get(name), "evidence_lines", None)
    return [str(line) for line in render(f)] if render is not None else []


def evidence_line(f: Finding) -> str:
    """The first of `f`'s evidence lines ("" where it has none): the one a table row has room for."""
    lines = evidence_lines(f)
    return lines[0] if lines else ""
