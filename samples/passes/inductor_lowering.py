"""Pass 8 (optional, ``--inductor-passes``): Inductor's own graph passes on the joint graph.

Runs what torch.compile runs on a joint graph before code generation: the joint-graph passes
(no-op removal, uniform-value constant folding, pattern rewrites) and the post-grad passes
(reinplacing, decompositions, dozens of pattern-matcher passes), with the graph's own fake mode
installed as Inductor expects. No code is generated: the rewritten graph still runs through the
FX interpreter every step. Each of Inductor's passes goes through its GraphTransformObserver, so a
capture with Inductor hooks records every one of them by its own name; this is how the sample gets
dozens of real passes per rank.
"""

from __future__ import annotations

import torch.fx as fx

from graphtrain_inspect.samples.passes._util import fake_mode_of, finalize


def inductor_graph_passes(gm: fx.GraphModule, example_inputs) -> fx.GraphModule:
    from torch._inductor.fx_passes.joint_graph import joint_graph_passes
    from torch._inductor.fx_passes.post_grad import post_grad_passes
    from torch._inductor.virtualized import V

    with V.set_fake_mode(fake_mode_of(gm)):
        joint_graph_passes(gm)
        post_grad_passes(gm, is_inference=False)
    return finalize(gm)
