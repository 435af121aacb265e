"""A capture as it would have been had the replayed pass produced the replayed graphs.

The checks (inspector.checks) read a Capture; `ReplayView` is one: the real capture, with every
rank's passes cut after the replayed application (later passes received the captured graph, not
the replayed one) and, on the ranks that were replayed, that application's output replaced by
the replayed graph's tables. `captured_view` is the same cut without the replacement, so the two
reports differ only by what the replay changed:

    before = check_report(captured_view(cap, cut))
    after = check_report(ReplayView(cap, cut, {rank: graph_view}))
    new, gone, kept = compare_findings(before.findings, after.findings)

No torch here: replayed graphs arrive as node tables (inspector.replay.replayer.graph_view).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from graphtrain_inspect.inspector.read.capture_reader import Capture

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.checks import Finding
    from graphtrain_inspect.inspector.read.capture_records import PassRecord
    from graphtrain_inspect.inspector.read.graphmodel import GraphTables


def cut_points(
    cap: Capture, rank: int, rec: "PassRecord", peer_recs: dict[int, "PassRecord"]
) -> dict[int, tuple[int, int]]:
    """Per rank: (pipeline index, seq) of the last pass to keep. Ranks where the pass did not run
    keep the pipelines before the target's and none of its own."""
    out: dict[int, tuple[int, int]] = {rank: (rec.pipeline, rec.seq)}
    for r in cap.ranks:
        if r == rank:
            continue
        p = peer_recs.get(r)
        out[r] = (p.pipeline, p.seq) if p is not None else (rec.pipeline, -1)
    return out


class ReplayView:
    """A read-only Capture: `cap` cut at `cuts`, with replayed outputs in place (see module doc).

    `replaced`: {rank: {role: graph}} where a graph has `gid`, `tables`, `code`, `symbols`,
    `devices` (inspector.replay.GraphView)."""

    def __init__(
        self, cap: Capture, cuts: dict[int, tuple[int, int]], replaced: dict[int, dict[str, Any]] | None = None
    ):
        self._cap = cap
        self._cuts = cuts
        self._replaced = replaced or {}
        self._graphs: dict[tuple[int, str], Any] = {}
        for r, roles in self._replaced.items():
            for g in roles.values():
                self._graphs[(r, g.gid)] = g
        self._passes: dict[int, list[PassRecord]] = {}

    # Everything not overridden reads the capture.
    def __getattr__(self, name: str) -> Any:
        return getattr(self._cap, name)

    @property
    def ranks(self) -> list[int]:
        return self._cap.ranks

    def passes(self, rank: int) -> list["PassRecord"]:
        got = self._passes.get(rank)
        if got is not None:
            return got
        cut = self._cuts.get(rank)
        out = []
        for p in self._cap.passes(rank):
            if cut is not None:
                pl, seq = cut
                if p.pipeline > pl or (p.pipeline == pl and p.seq > seq):
                    continue
                if p.pipeline == pl and p.seq == seq and rank in self._replaced:
                    roles = self._replaced[rank]
                    after = {role: roles[role].gid for role in p.after if role in roles} or {
                        role: g.gid for role, g in roles.items()
                    }
                    nodes = dict(p.nodes or {})
                    nodes["after"] = {role: roles[role].tables.node_count for role in after if role in roles}
                    p = dataclasses.replace(p, after=after, nodes=nodes, status="ok", exception=None)
            out.append(p)
        self._passes[rank] = out
        return out

    # Capture's own methods that only use passes(): bound to this view.
    pipelines = Capture.pipelines
    pass_by_seq = Capture.pass_by_seq
    find_passes = Capture.find_passes
    pass_names = Capture.pass_names

    def _mine(self, rank: int, gid: str | None) -> Any:
        return self._graphs.get((rank, gid)) if gid is not None else None

    def node_table(self, rank: int, gid: str) -> "GraphTables | None":
        g = self._mine(rank, gid)
        return g.tables if g is not None else self._cap.node_table(rank, gid)

    def graph_code(self, rank: int, gid: str) -> str | None:
        g = self._mine(rank, gid)
        return g.code if g is not None else self._cap.graph_code(rank, gid)

    def symbols(self, rank: int, gid: str) -> dict[str, Any] | None:
        g = self._mine(rank, gid)
        if g is not None:
            if g.symbols is not None:
                return g.symbols
            from graphtrain_inspect.inspector.read.graphmodel import derive_symbols

            return derive_symbols(g.tables)
        return self._cap.symbols(rank, gid)

    def devices(self, rank: int, gid: str) -> dict[str, Any] | None:
        g = self._mine(rank, gid)
        if g is not None:
            if g.devices is not None:
                return g.devices
            from graphtrain_inspect.inspector.read.graphmodel import derive_devices

            return derive_devices(g.tables)
        return self._cap.devices(rank, gid)

    def own_device(self, rank: int, gid: str | None = None) -> str | None:
        g = self._mine(rank, gid)
        if g is not None and g.devices and g.devices.get("own_device"):
            return g.devices["own_device"]
        return self._cap.own_device(rank, None if g is not None else gid)

    def node_count(self, rank: int, gid: str | None) -> int | None:
        g = self._mine(rank, gid)
        return g.tables.node_count if g is not None else self._cap.node_count(rank, gid)

    def __repr__(self) -> str:
        return f"ReplayView({self._cap.path!r}, replaced ranks {sorted(self._replaced)})"


def captured_view(cap: Capture, cuts: dict[int, tuple[int, int]]) -> ReplayView:
    return ReplayView(cap, cuts, None)


def finding_key(f: "Finding") -> tuple:
    """What makes two findings the same problem in the captured and the replayed view (severity
    and the last pass left out: a check lowers the severity of a problem a later pass removes)."""
    return (f.kind, f.introduced_by, f.subgraph or "", f.node or "", f.message)


def at_output(f: "Finding", seqs: set[int]) -> bool:
    """Whether the finding is still present in the replayed pass's output (its chain ends there:
    the view is cut right after that pass)."""
    return f.last_seq in seqs


def compare_findings(
    before: list["Finding"], after: list["Finding"], seqs: set[int] | None = None
) -> tuple[list["Finding"], list["Finding"], list["Finding"]]:
    """(new, gone, kept) among the findings present in the pass's output (`seqs`: the pass's seq
    on each rank; None: all findings): new only after the replay, gone only in the capture, kept
    in both (as after the replay)."""
    if seqs is not None:
        before = [f for f in before if at_output(f, seqs)]
        after = [f for f in after if at_output(f, seqs)]
    kb: dict[tuple, list] = {}
    for f in before:
        kb.setdefault(finding_key(f), []).append(f)
    new, kept = [], []
    for f in after:
        lst = kb.get(finding_key(f))
        if lst:
            lst.pop()
            kept.append(f)
        else:
            new.append(f)
    gone = [f for lst in kb.values() for f in lst]
    return new, gone, kept
