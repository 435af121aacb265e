"""The passes of tests/programs/uneven_shards.py: its own chunk of an uneven split, as a slice."""

from __future__ import annotations

import operator
import os

import torch

ROWS, COLS, BATCH = 7, 8, 5
MODE = {"rewrite": False, "plant": False}


def remove_dead_code(gm, example_inputs):
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def chunk_to_slice(gm, example_inputs):
    """Rewrites `getitem(split(t, s, d), i)` into `slice(t, d, start, end)`. Right: the start is
    the chunk's own (`i * s`), the end clipped to the dimension. With the plant the start is the
    rank times this rank's local rows, which is no chunk of an uneven split."""
    if not (MODE["rewrite"] or MODE["plant"]):
        return gm
    rank = int(os.environ.get("RANK", 0))
    local_rows = (ROWS + 1) // 2 if rank == 0 else ROWS // 2
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not operator.getitem:
            continue
        split = node.args[0]
        if getattr(split, "target", None) not in (torch.ops.aten.split.Tensor, torch.ops.aten.split_with_sizes.default):
            continue
        src, size = split.args[0], split.args[1]
        dim = split.args[2] if len(split.args) > 2 else 0
        if not isinstance(size, int) or len(split.users) != 1:
            continue  # a split whose every chunk is used (the all-gather's) is no rank's own chunk
        index = node.args[1]
        total = src.meta["val"].shape[dim]
        if MODE["plant"]:
            start, end = rank * local_rows, rank * local_rows + local_rows  # BUG: rank 1 takes [3, 6)
        else:
            start, end = index * size, min((index + 1) * size, total)
        with gm.graph.inserting_before(node):
            sl = gm.graph.call_function(torch.ops.aten.slice.Tensor, (src, dim, start, end))
        sl.meta["val"] = node.meta.get("val")
        node.replace_all_uses_with(sl)
        gm.graph.erase_node(node)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


PIPELINE = [remove_dead_code, chunk_to_slice]
