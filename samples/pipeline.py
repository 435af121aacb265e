"""The pass pipeline applied to the traced joint graph.

Each pass is a plain function ``(gm, example_inputs) -> gm`` in its own
module under ``samples/passes/``.  ``PIPELINE`` is the one place that lists
them; always call them through it (a capture tool may wrap the functions by
their ``module:function`` name and rebind this list).
"""

from __future__ import annotations

import os

from graphtrain_inspect.samples.passes.ac import tag_activation_checkpointing
from graphtrain_inspect.samples.passes.bucketing import bucket_all_gathers
from graphtrain_inspect.samples.passes.concretize import concretize_symbolic_shapes
from graphtrain_inspect.samples.passes.coordinates import resolve_coordinates
from graphtrain_inspect.samples.passes.dce import remove_dead_code
from graphtrain_inspect.samples.passes.device import place_devices
from graphtrain_inspect.samples.passes.ep_chunking import chunk_expert_tokens
from graphtrain_inspect.samples.passes.inductor_lowering import inductor_graph_passes

PIPELINE = [
    remove_dead_code,
    bucket_all_gathers,
    tag_activation_checkpointing,
    chunk_expert_tokens,
    concretize_symbolic_shapes,
    resolve_coordinates,
    place_devices,
]

# appended by `--inductor-passes`: Inductor's own joint-graph and post-grad passes (dozens of
# observer passes that a capture records by name)
INDUCTOR_PASSES = [inductor_graph_passes]


def pass_name(p) -> str:
    return getattr(p, "__name__", None) or getattr(getattr(p, "func", None), "__name__", repr(p))


def graph_text(gm) -> str:
    return gm.print_readable(print_output=False)


def dump(gm, dump_dir, rank: int, index: int, name: str) -> None:
    if not dump_dir:
        return
    d = os.path.join(dump_dir, f"rank{rank}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"{index:02d}_{name}.txt"), "w") as f:
        f.write(graph_text(gm))


def run_pipeline(gm, example_inputs, *, dump_dir=None, rank: int = 0, log=None, inductor: bool = False):
    """Apply every pass of ``PIPELINE`` (then ``INDUCTOR_PASSES`` if asked) in order; lint +
    recompile after each."""
    import time

    dump(gm, dump_dir, rank, 0, "traced")
    for i, p in enumerate(PIPELINE + (INDUCTOR_PASSES if inductor else []), start=1):
        t0 = time.perf_counter()
        out = p(gm, example_inputs)
        gm = out if out is not None else gm
        gm.graph.lint()
        gm.recompile()
        name = pass_name(p)
        if log is not None:
            log(f"pass {i} {name}: {len(gm.graph.nodes)} nodes, {time.perf_counter() - t0:.2f}s")
        dump(gm, dump_dir, rank, i, name)
    return gm
