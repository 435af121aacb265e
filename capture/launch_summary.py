"""What the launcher prints once the command ended: each rank's log as found, what is missing and
why, and the commands to read the capture next.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from typing import Any

from graphtrain_inspect.capture import nodes, simulate
from graphtrain_inspect.capture.manifest import manifest_simulated
from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.capture.shared.terminal_text import fmt_bytes
from graphtrain_inspect.capture.summary import RankSummary


def this_command() -> str:
    """`graphtrain-inspect` as the user can run it again from this shell: the bare name when PATH
    finds this very executable, else the path that ran (a virtual environment not activated), else
    this Python running the module."""

    ran = sys.argv[0] if sys.argv else ""
    if os.path.basename(ran) == "graphtrain-inspect":
        found = shutil.which("graphtrain-inspect")
        if found and os.path.realpath(found) == os.path.realpath(ran):
            return "graphtrain-inspect"
        return shlex.quote(ran)
    return f"{shlex.quote(sys.executable)} -m graphtrain_inspect.inspector.cli"


# Below this much free space the capture's filesystem is taken for full (a status or log write
# there fails): the summary says so rather than guessing at a crash.
DISK_FULL_BYTES = 1 << 20


def free_bytes(path: str) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def unresolved_passes(summaries: list[RankSummary]) -> dict[str, str]:
    """--pass targets a worker imported but could not resolve (the launcher could not tell before
    the training: the module is on the workers' path only, say), each with the first reason."""
    found: dict[str, str] = {}
    for s in summaries:
        for target, why in s.target_errors.items():
            found.setdefault(target, why)
    return found


def print_summary(
    out: str,
    args: argparse.Namespace,
    summaries: list[RankSummary],
    code: int,
    sig: str | None,
    signed: str = "",
    disk_full: bool = False,
    free: int | None = None,
    node: nodes.Node | None = None,
) -> None:
    p = lambda s="": print(s, file=sys.stderr)  # noqa: E731 - the summary goes where logs go
    p()
    p(f"graphtrain-inspect capture: command exited with {code}" + (f" ({sig})" if sig else ""))
    for line in _rank_lines(summaries, disk_full):
        p(line)
    world = min(max((s.world_size for s in summaries), default=0), 1 << 20)  # a damaged header: not expanded
    sim = manifest_simulated(out)
    if not sim:  # under --coor: the ranks that loaded rank 0's graph
        here = node or nodes.Node(None, None, None, "")
        for line in nodes.absent_lines(out, here, getattr(args, "ranks", None), world, {s.rank for s in summaries}):
            p(f"  {line}")
    blob_dir = os.path.join(out, logformat.BLOB_DIR)
    try:
        files = [f for f in os.listdir(blob_dir) if f.endswith(logformat.BLOB_SUFFIX)]
        size = sum(os.path.getsize(os.path.join(blob_dir, f)) for f in files)
        p(f"  blobs: {len(files)} files, {fmt_bytes(size)}")
    except OSError:
        pass
    if sim:
        for line in _simulated_lines(sim, summaries):
            p(line)
    for line in _pass_lines(args, summaries, disk_full, free):
        p(line)
    if signed:
        p(f"  {signed}")
    p(f"  capture: {out}")
    exe = this_command()
    p(f"  next:    {exe} ls {shlex.quote(out)}    |    {exe} check {shlex.quote(out)}")


def _rank_lines(summaries: list[RankSummary], disk_full: bool) -> list[str]:
    """Each rank's log as found: its counts and how it ends, what is missing or damaged."""
    if not summaries:
        return ["  no rank wrote a capture log."]
    out = []
    for s in summaries:
        state = s.ending(disk_full)
        out.append(
            f"  rank {s.rank}: {s.passes} passes, {s.graphs} graphs, {s.records} records, {fmt_bytes(s.bytes)}, "
            f"{s.capture_errors} capture errors, {s.raised} passes raised; {state}"
        )
        if not s.has_log:
            out.append(f"    no log: {s.log} is missing")
        if s.problems:
            out.append(f"    {len(s.problems)} damaged lines, first: {s.problems[0]}")
        if s.stopped:
            out.append(f"    capture stopped: {s.stopped}")
    return out


def _simulated_lines(sim: dict[str, Any], summaries: list[RankSummary]) -> list[str]:
    """The simulated world (`--simulate-world`): its ranks, and those stopped after their passes."""
    out = [
        f"  simulated: {len(sim.get('ranks') or [])} of {sim.get('world_size')} ranks "
        f"({simulate.format_ranks(sim.get('ranks') or [])}), "
        f"hosts of {sim.get('local_world_size')}, fake process group"
    ]
    stopped = [s.rank for s in summaries if s.stopped_after_passes]
    if stopped:
        where = sorted({s.stopped_at for s in summaries if s.stopped_after_passes and s.stopped_at})
        out.append(
            f"  stopped after their passes ({'; '.join(where) or 'at the first optimizer step'}; the "
            "rest of training "
            f"did not run): ranks {simulate.format_ranks(stopped)}"
        )
    return out


def _pass_lines(args: argparse.Namespace, summaries: list[RankSummary], disk_full: bool, free: int | None) -> list[str]:
    """A full disk, and why no pass or a --pass target was recorded (the targets that did not
    resolve are said last, each in its own line, by `launcher.run`)."""
    out = []
    wrap_errors = unresolved_passes(summaries)
    total = sum(s.passes for s in summaries)
    if disk_full:
        now = fmt_bytes(free) if free is not None else "?"
        full_now = free is not None and free < DISK_FULL_BYTES
        out.append(
            f"  the capture's filesystem is full ({now} free): what could not be written is missing from the capture"
            if full_now
            else f"  a write failed for lack of space (ENOSPC/EDQUOT; {now} free now): what could not be written is "
            "missing from the capture"
        )
    if total == 0 and disk_full:
        out.append("  no pass was recorded: nothing could be written (the disk is full), whether or not passes ran")
    elif total == 0:
        out.append("  no graph pass fired. Possible reasons:")
        if not args.passes:
            out.append(
                "   - no --pass MODULE:FUNC was named, so only Inductor's passes and record_pass() are captured;"
            )
        elif set(args.passes) - set(wrap_errors):
            unexplained = [t for t in args.passes if t not in wrap_errors]
            out.append(
                f"   - the modules of {', '.join(unexplained)} were never imported, or the functions were "
                "never called with a GraphModule;"
            )
        if wrap_errors:
            out.append(
                f"   - {len(wrap_errors)} --pass target(s) did not resolve in the workers (last line: which, and why);"
            )
        if args.no_inductor:
            out.append("   - --no-inductor: torch.compile's passes were not hooked;")
        else:
            out.append("   - the program never ran torch.compile with Inductor (or Inductor's caches were forced on);")
        out.append("   - the program did not run under this Python (PYTHONPATH must reach the workers).")
    else:
        unmatched = [t for t in args.passes if not any(t in s.targets for s in summaries) and t not in wrap_errors]
        for t in unmatched:
            out.append(f"  note: --pass {t} never fired (module never imported, or never called with a GraphModule)")
    return out
