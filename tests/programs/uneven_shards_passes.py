"""The passes of tests/programs/uneven_shards.py: each rank's own chunk of an uneven split, as a
slice, right (`chunk_to_slice`) and with the start computed as `rank * local_rows`
(`slice_at_rank_rows`, the bug). Both read what they need from the graph, so a replay does what
the run did."""

from __future__ import annotations

import operator

import torch

ROWS, COLS, BATCH = 7, 8, 5


def remove_dead_code(gm, example_inputs):
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def _split_chunks_to_slices(gm, planted: bool):
    """Rewrites `getitem(split(t, s, d), i)`, the only chunk of the split the graph uses (the
    rank's own: i is the rank), into `slice(t, d, start, end)`."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not operator.getitem:
            continue
        split = node.args[0]
        if getattr(split, "target", None) is not torch.ops.aten.split.Tensor:
            continue
        src, size = split.args[0], split.args[1]
        dim = split.args[2] if len(split.args) > 2 else 0
        if not isinstance(size, int) or len(split.users) != 1:
            continue  # a split whose every chunk is used (the all-gather's) is no rank's own chunk
        index = node.args[1]
        total = src.meta["val"].shape[dim]
        if planted:
            local_rows = node.meta["val"].shape[dim]  # 4 on rank 0, 3 on rank 1
            start, end = index * local_rows, (index + 1) * local_rows  # BUG: rank 1 takes [3, 6), not [4, 7)
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


def chunk_to_slice(gm, example_inputs):
    """The chunk's own bounds: `[i * s, min((i + 1) * s, size))`. Right."""
    return _split_chunks_to_slices(gm, planted=False)


def slice_at_rank_rows(gm, example_inputs):
    """The rank times this rank's local rows: no chunk of an uneven split on the short rank."""
    return _split_chunks_to_slices(gm, planted=True)


PIPELINE = [remove_dead_code, chunk_to_slice, slice_at_rank_rows]
MODES = {"plain": ["remove_dead_code"], "rewrite": ["remove_dead_code", "chunk_to_slice"]}
MODES["plant"] = ["remove_dead_code", "slice_at_rank_rows"]
