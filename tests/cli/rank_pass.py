"""A pass that bakes the rank into the graph, for `repro`'s test: it sums the row of the tensor
its rank reads from RANK (each rank's own row, a literal in the graph); `sum_all` is its fix."""

from __future__ import annotations

import os

import torch


def _sum_input(gm: torch.fx.GraphModule) -> torch.fx.Node:
    return next(n for n in gm.graph.nodes if n.op == "call_function" and n.target is torch.ops.aten.sum.default)


def shard_rows(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    total = _sum_input(gm)
    rank = int(os.environ.get("RANK", "0"))  # the bug: this rank's row, baked in
    with gm.graph.inserting_before(total):
        row = gm.graph.call_function(torch.ops.aten.select.int, (total.args[0], 0, rank))
    total.args = (row, *total.args[1:])
    gm.recompile()
    return gm


def sum_all(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    return gm  # the whole tensor: the same graph on every rank
