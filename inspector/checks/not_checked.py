"""What the checks had nothing to look at, and why: `check`'s `not_run` (text, JSON, the TUI's
status line), so an empty report is not read as "checked and clean".

* generated code: none in the capture (`capture --no-inductor`, a log from before format 2,
  torch's logs without `inductor_output_code`, nothing compiled by Inductor), or code of one rank
  only where ranks are compared;
* blobs: a capture without any (`capture --no-blobs`): missing-blob has nothing to look at and
  nothing can be replayed;
* ranks: one rank only, or ranks of the world that left no log (never ran a captured pass), were
  not recorded (`capture --ranks`), or ran on a node whose capture was not given (node_parts).

The checks that look at graphs say themselves when they need two ranks (`CheckContext.skip`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graphtrain_inspect.capture.shared.rank_ranges import format_ranks
from graphtrain_inspect.inspector.read.capture_reader import WORLD_LIMIT
from graphtrain_inspect.inspector.read.node_parts import absence
from graphtrain_inspect.inspector.read.output_code import output_codes

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.checks.context import CheckContext

CODEGEN_CHECKS = ("codegen-rank-baked", "codegen-device-baked", "codegen-stale-symbol", "codegen-divergent")
ACROSS_RANKS = ("codegen-rank-baked", "codegen-divergent")


def explain(ctx: "CheckContext", ran: list[str]) -> None:
    cap = ctx.cap
    with_code = [r for r in cap.ranks if output_codes(cap, r)]
    if not with_code:
        why = _no_code_reason(cap)
        for name in CODEGEN_CHECKS:
            if name in ran:
                ctx.skip(name, why)
    elif len(with_code) < 2:
        for name in ACROSS_RANKS:
            if name in ran:
                ctx.skip(name, f"generated code on rank {with_code[0]} only: nothing to compare across ranks")
    if "incomplete-capture" in ran and cap.kind == "capture" and not _any_blob(cap):
        opts = (cap.manifest or {}).get("options") or {}
        how = "captured with --no-blobs" if opts.get("blobs") is False else "no pass record names a blob"
        ctx.skip(
            "incomplete-capture (blobs)",
            f"no GraphPickler blobs ({how}): missing blobs not checked, nothing can be replayed",
        )
    world = cap.world_size or 0
    simulated = isinstance((cap.manifest or {}).get("simulated"), dict)  # said by its own note
    if world > WORLD_LIMIT:  # never range(world): a header's world size is only a claim
        ctx.notes.append(
            f"world size {world} (a log header's) is past {WORLD_LIMIT} ranks: ranks without a log are not "
            f"listed; checked ranks {format_ranks(list(cap.ranks))} only"
        )
        return
    if simulated or cap.kind != "capture":
        return
    gone = absence(cap)
    if gone.not_recorded or gone.elsewhere:
        # what was compared, then why the others were not (none of it says anything of the training)
        ctx.notes.append(f"checked ranks {format_ranks(list(cap.ranks))} of world size {world}")
        ctx.notes.extend(gone.lines(world))
    elif gone.no_pass:
        ctx.notes.append(
            f"rank(s) {format_ranks(gone.no_pass)} of world size {world} left no log (never ran a captured pass): "
            f"checked ranks {format_ranks(list(cap.ranks))} only"
        )


def _no_code_reason(cap) -> str:
    if cap.kind != "capture":
        return "no generated code: the logs have no inductor_output_code records"
    opts = (cap.manifest or {}).get("options") or {}
    if opts.get("inductor") is False:
        return "no generated code: captured with --no-inductor"
    return "no generated code in the capture (nothing was compiled by Inductor, or the log format predates it)"


def _any_blob(cap) -> bool:
    for r in cap.ranks:
        for p in cap.passes(r):
            if p.blobs:
                return True
    return False
