"""The passes of tests.programs.rank_reorder (their own module: capture wraps them by this name)."""

import os

import torch
import torch.fx

CLEAN = os.environ.get("GTI_REORDER_CLEAN") == "1"


def remove_dead_code(gm, example_inputs):
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def reorder_by_local_estimate(gm, example_inputs):
    """Schedules the graph anew: among the nodes ready to run, the collectives in their traced
    order first, then the compute node the cost estimate prefers. The estimate reads a per-rank
    setting (BUG: rank 1 prefers the latest ready node, rank 0 the earliest), so the ranks run the
    same nodes in different orders."""
    latest = not CLEAN and int(os.environ.get("RANK", 0)) % 2 == 1
    nodes = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    index = {n: i for i, n in enumerate(nodes)}
    done = {n for n in gm.graph.nodes if n.op == "placeholder"}
    order = []
    while len(order) < len(nodes):
        ready = [n for n in nodes if n not in done and all(a in done for a in n.all_input_nodes)]
        comm = [n for n in ready if "wait" in str(n.target)]
        pick = min(comm, key=index.get) if comm else (max if latest else min)(ready, key=index.get)
        order.append(pick)
        done.add(pick)
    return _rebuilt(gm, order)


def _rebuilt(gm, order):
    """The graph with its nodes in `order`, each named anew in that order (as a pass that builds
    a fresh graph names them)."""
    new = torch.fx.Graph()
    env = {}
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            env[n] = new.node_copy(n, env.__getitem__)
    for n in order:
        m = new.create_node(n.op, n.target, *torch.fx.map_arg((n.args, n.kwargs), env.__getitem__), type_expr=n.type)
        m.meta = dict(n.meta)
        env[n] = m
    out = next(n for n in gm.graph.nodes if n.op == "output")
    new.node_copy(out, env.__getitem__)
    return torch.fx.GraphModule(gm, new)


PIPELINE = [remove_dead_code, reorder_by_local_estimate]
