"""Node counts of torch's own graphs, counted in the background (a mixin of
`graphtrain_inspect.tui.app.InspectApp`).

torch's TORCH_TRACE graph records carry no node count; `ls` counts each graph from its text
(`Capture.node_count`: parsing, about 1 MB/s). The tree paints at once with what is known, and
this worker counts the rest once the logs are indexed, then relabels the tree (node counts and
deltas, as `ls` shows them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual import work
from textual.message import Message
from textual.worker import get_current_worker

from graphtrain_inspect.inspector.read.outline import build_outline
from graphtrain_inspect.tui.messages import Progress


@dataclass
class NodeCountsReady(Message):
    session: Any  # the session whose capture was counted
    outline: Any  # its outline rebuilt with the counts


class TorchNodeCounts:
    @work(thread=True, exclusive=True, group="node-counts")
    def count_torch_nodes(self) -> None:
        session = self.session
        if session is None or session.cap.kind != "torch_trace":
            return
        cap = session.cap
        worker = get_current_worker()
        with self.capture_lock:
            todo = [(r, gid) for r in cap.ranks for gid, ref in cap.graphs(r).items() if ref.nodes is None]
        if not todo:
            return
        for i, (r, gid) in enumerate(todo):
            if worker.is_cancelled or self.closing():
                return
            with self.capture_lock:  # one graph at a time: the views' readers get their turn
                cap.node_count(r, gid)
            if i % 20 == 0:
                self.post_message(Progress("node-counts", f"counting nodes of torch's graphs: {i} of {len(todo)}"))
        with self.capture_lock:
            outline = build_outline(cap)
        self.post_message(Progress("node-counts", "", done=True))
        self.post_message(NodeCountsReady(session, outline))

    def on_node_counts_ready(self, m: NodeCountsReady) -> None:
        if self.closing() or m.session is not self.session:
            return
        m.session.outline = m.outline
        self.tree.sync(m.outline)
