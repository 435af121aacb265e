"""Pass 7: device placement.

Factory ops traced on rank r carry the tracing device as a literal
(``arange(..., device=device(type='cuda', index=r))``).  The clean policy
makes the graph rank-agnostic: every ``device=`` kwarg of a factory or copy
op is rewritten to the index-less device type (``device(type='cuda')``:
"the current device of the process running the graph", which each rank sets
to cuda:LOCAL_RANK), and real tensor constants stay where the ops that read
them need them (the mesh rank map of the coordinate op stays on the CPU).

``--bug device-literal``: the pass instead pins every factory op to the
*tracing* rank's device, ``torch.device(type, LOCAL_RANK)``: ``cuda:0``
baked into a graph that rank 1 then runs (on CPU the same shape:
``device(type='cpu', index=<local rank>)``, which CPU kernels accept).
"""

from __future__ import annotations

import os

import torch
import torch.fx as fx

from graphtrain_inspect.samples import bugs
from graphtrain_inspect.samples.passes._util import finalize


def graph_device(example_inputs):
    for a in example_inputs or ():
        if isinstance(a, torch.Tensor):
            return a.device
    return torch.device("cpu")


def _tracing_local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def place_devices(gm: fx.GraphModule, example_inputs) -> fx.GraphModule:
    dev = graph_device(example_inputs)
    if bugs.enabled("device-literal"):
        target = torch.device(dev.type, _tracing_local_rank())  # BUG: the tracing rank's device
    else:
        target = torch.device(dev.type)  # index-less: the running process's current device
    rewritten = []
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        d = node.kwargs.get("device")
        if not isinstance(d, torch.device):
            continue
        if d.type != dev.type:
            continue  # e.g. host-side helpers stay on the CPU
        if d != target:
            kw = dict(node.kwargs)
            kw["device"] = target
            node.kwargs = kw
        node.meta["gti_device"] = str(target)
        rewritten.append(node.name)
    gm.meta["gti_device_policy"] = {"target": str(target), "nodes": rewritten}
    return finalize(gm)
