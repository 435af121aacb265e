"""Helpers for replaying captures of the sample training (tests and the README's example).

`--setup tests.programs.replay_sample:bugs_from_argv` (= `graphtrain_inspect.samples.bugs:from_argv`): the sample's
bug switches are process
state that `graphtrain_inspect.samples.train` sets from its command line, not environment; replay runs setup hooks
with `sys.argv` set to the captured rank's argv, so this re-applies the switches the captured
run had.

`place_devices_fixed`: the device pass without the `device-literal` bug (the fix a user would try
with `--fn`).
"""

from __future__ import annotations


def bugs_from_argv() -> None:
    from graphtrain_inspect.samples import bugs

    bugs.from_argv()


def place_devices_fixed(gm, example_inputs):
    """graphtrain_inspect.samples.passes.device:place_devices, fixed: index-less devices whatever the switches say."""
    import torch

    from graphtrain_inspect.samples.passes._util import finalize
    from graphtrain_inspect.samples.passes.device import graph_device

    dev = graph_device(example_inputs)
    target = torch.device(dev.type)
    rewritten = []
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        d = node.kwargs.get("device")
        if not isinstance(d, torch.device) or d.type != dev.type:
            continue
        if d != target:
            node.kwargs = {**node.kwargs, "device": target}
        node.meta["gti_device"] = str(target)
        rewritten.append(node.name)
    gm.meta["gti_device_policy"] = {"target": str(target), "nodes": rewritten}
    return finalize(gm)
