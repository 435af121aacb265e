"""How a replay's outcome reads: the lines the command and the REPL print, and its JSON form.

Shared by `graphtrain-inspect replay` (inspector.cli.replay) and the REPL (repl.py), so the command
and the REPL say the same thing in the same words.
"""

from __future__ import annotations

from typing import Any

from graphtrain_inspect.capture.shared.terminal_text import Style, truncate


def header_line(cap: Any, target: Any, st: Style) -> str:
    rec = target.rec
    where = f"pipeline {rec.pipeline}" + (f", compile {rec.compile_id}" if rec.compile_id else "")
    occ = f", occurrence {target.occurrence} of {target.matches}" if target.matches > 1 else ""
    src = rec.source + (f"/{rec.subsystem}" if rec.subsystem else "")
    return st(
        f"replay #{rec.seq} {rec.name} on rank {target.rank} of {cap.world_size}  ({where}{occ}; {src})",
        "bold",
        "magenta",
    )


def outcome_lines(r: Any, out: Any, origin: str, st: Style, limit: int, *, with_fn: bool) -> list[str]:
    import torch

    lines = []
    rec = out.rec
    ld = out.before
    if ld is not None:
        n = rec.nodes.get("before") if isinstance(rec.nodes, dict) else None
        lines.append(
            f"  graph   {rec.before} ({n if n is not None else '?'} nodes) from {ld.blob.path[:22]}...gpkl: "
            f"sha256 verified, {origin}; loaded in {ld.seconds:.2f}s with torch {torch.__version__}"
            + (
                f" (captured with {r.captured_torch})"
                if r.captured_torch and r.captured_torch != torch.__version__
                else ""
            )
        )
        if ld.standins:
            lines.append(
                st(
                    "          stand-ins for the training's __main__ classes in node metadata: "
                    f"{', '.join(ld.standins[:4])}",
                    "dim",
                )
            )
    w = out.world
    if w is not None:
        from graphtrain_inspect.inspector.replay.plan import describe_env

        env = describe_env(w.env) or "no torchrun variables (a single-process run)"
        pg = w.process_group or "not initialized (as in training)"
        argv = (" ".join(w.argv[:8]) + (" ..." if len(w.argv) > 8 else "")) if w.argv else "(not recorded)"
        lines.append(f"  world   {env}; torch.distributed: {pg}; argv: {truncate(argv, 100)}")
        for note in w.notes:
            lines.append(st(f"          {note}", "dim"))
    for note in r.notes:
        lines.append(st(f"  note    {note}", "yellow"))
    if r.setup:
        lines.append(f"  setup   {', '.join(r.setup)}")
    pf = out.pass_fn
    if pf is not None:
        res = f"{out.view.tables.node_count} nodes" if out.view is not None else "raised"
        lines.append(f"  ran     {pf.description} in {out.run_s:.2f}s -> {res}")
        for note in pf.notes:
            lines.append(st(f"          {note}", "dim"))
    if out.reproduced:
        lines.append(st("REPRODUCED", "bold", "green") + f"  {out.reason}")
    else:
        lines.append(st("DIFFERS", "bold", "red") + f"  {out.reason}")
        if out.exc_text and out.exception is not None:
            for l in out.exc_text.rstrip().splitlines()[-8:]:
                lines.append(st(f"  | {l}", "red"))
        lines.extend(diff_lines(out.diff, st, limit))
        if not with_fn and out.exception is None:
            lines.append(
                st(
                    "  hint: a pass that reads process state the training set outside its environment (flags "
                    "parsed from "
                    "its command line, config objects) sees defaults here: set it with --setup MODULE:FUNC "
                    "(sys.argv is the captured argv)",
                    "dim",
                )
            )
    return lines


def diff_lines(d: Any, st: Style, limit: int) -> list[str]:
    if d is None or d.empty:
        return []
    out = []
    changes = list(d.changes())
    for ch in changes[:limit]:
        colour = {"added": "green", "removed": "red", "changed": "yellow"}.get(ch.status, "")
        prefix = f"[{ch.subgraph}] " if ch.subgraph else ""
        out.append("  " + st(truncate(prefix + ch.summary(), 220), colour))
    if len(changes) > limit:
        out.append(
            st(f"  ... {len(changes) - limit} more node changes (--limit N, or diff(after, result) in the REPL)", "dim")
        )
    return out


def _finding_line(tag: str, f: Any, st: Style, colour: str) -> str:
    node = (f"{f.subgraph}:" if f.subgraph else "") + (f.node or "-")
    ranks = ",".join(str(x) for x in f.ranks) if f.ranks else "-"
    return (
        "  "
        + st(f"{tag:<5}", colour)
        + f" {f.severity.upper():<7} {f.kind:<22} {truncate(node, 28):<28} ranks {ranks:<6} "
        + truncate(f.message, 140)
    )


def check_lines(delta: Any, rec: Any, st: Style, peer_outs: dict) -> list[str]:
    ranks = ", ".join(str(r) for r in delta.replaced) or "none"
    ranks = ("ranks " if len(delta.replaced) > 1 else "rank ") + ranks
    here = [f for f in delta.kept if f.introduced_by == rec.name]
    head = (
        f"checks  (replayed result of {ranks} in place; findings present in the pass's output): "
        f"{len(delta.new)} new, {len(delta.gone)} gone, {len(delta.kept)} still there"
    )
    if here:
        head += f" ({len(here)} of them introduced by {rec.name})"
    lines = [st(head, "bold")]
    for f in delta.gone:
        lines.append(_finding_line("gone", f, st, "green"))
    for f in delta.new:
        lines.append(_finding_line("new", f, st, "red"))
    for f in here[:10]:
        lines.append(_finding_line("still", f, st, "yellow"))
    if len(here) > 10:
        lines.append(st(f"  ... {len(here) - 10} more still introduced by {rec.name}", "dim"))
    for n in delta.notes:
        lines.append(st(f"  note: {n}", "dim"))
    return lines


# ---------------------------------------------------------------------------------------------
# JSON


def outcome_ids(target: Any) -> dict[str, Any]:
    rec = target.rec
    return {
        "pass": rec.name,
        "seq": rec.seq,
        "rank": target.rank,
        "occurrence": target.occurrence,
        "before": rec.before,
        "after": rec.after,
    }


def outcome_json(target: Any, out: Any, delta: Any, peer_outs: dict) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "verdict": out.verdict,
        "reason": out.reason,
        **outcome_ids(target),
        "result": out.view.gid if out.view is not None else None,
        "nodes": out.view.tables.node_count if out.view is not None else None,
        "exception": {"type": type(out.exception).__name__, "message": str(out.exception)[:2000]}
        if out.exception is not None
        else None,
        "diff": out.diff.to_json() if out.diff is not None else None,
        "peers": {str(r): o.verdict for r, o in peer_outs.items()},
        "environment": out.world.env if out.world is not None else None,
    }
    if delta is not None:
        doc["checks"] = {
            "replaced_ranks": delta.replaced,
            "new": [f.to_json() for f in delta.new],
            "gone": [f.to_json() for f in delta.gone],
            "kept": [f.to_json() for f in delta.kept],
        }
    return doc
