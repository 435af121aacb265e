"""`ls`: each compile's generated code, listed as the last stage of its pipeline (size, kernels)."""

from __future__ import annotations

from typing import Any


def entries(cap: Any, rank: int) -> list[dict[str, Any]]:
    """The rank's generated code as JSON-able rows (what `ls --json` lists under `output_code`)."""
    from graphtrain_inspect.inspector.read.output_code import kernel_count, output_codes, pipeline_of

    out = []
    for oc in output_codes(cap, rank):
        pl = pipeline_of(cap, oc)
        out.append(
            {
                "oid": oc.oid,
                "compile_id": oc.compile_id,
                "graph": oc.graph,
                "pipeline": pl.index if pl is not None else None,
                "bytes": oc.bytes,
                "kernels": kernel_count(cap, oc),
                "source": oc.source,
                "filename": oc.filename,
                "provenance": bool(oc.origins),
            }
        )
    return out


def rows(entry: dict[str, Any], pipeline: Any, st: Any, row: Any, fmt_bytes: Any) -> list[str]:
    """Lines for the generated code of one pipeline (`pipeline` None: code no listed pipeline made)."""
    out = []
    for oc in entry.get("output_code") or []:
        if oc["pipeline"] != pipeline:
            continue
        k = oc["kernels"]
        tail = f"generated code, {k} kernel{'s' if k != 1 else ''}" + (
            f", from {oc['graph']}" if oc.get("graph") and pipeline is None else ""
        )
        if oc.get("compile_id") and pipeline is None:
            tail += f" (compile {oc['compile_id']})"
        out.append(
            row("inductor codegen", "", oc["oid"], "", "code", "", fmt_bytes(oc["bytes"]), tail, st, (), ("magenta",))
        )
    return out
