"""rank-divergent-graph (inspector/checks/rank_divergent_graph.py) on hand-built FX graphs written as a
capture: a pass whose outputs differ across ranks while its inputs agreed.
"""

from __future__ import annotations

import torch
import torch.distributed  # registers the functional collectives
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

from graphtrain_inspect.inspector.checks import run_checks
from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.small_captures import CaptureWriter, kinds

# ---------------------------------------------------------------------------------------------
# rank-divergent-graph


def test_rank_divergent_pass(tmp_path):
    before = lambda: make_fx(lambda x: (x * 2).sum())(torch.randn(4))  # noqa: E731
    w = CaptureWriter(tmp_path, world_size=2)
    for r in (0, 1):
        rw = w.rank(r)
        b = before()
        rw.apply("dce", b, before())
        # a pass whose decision depends on the rank: rank 1 fuses differently
        after = (
            make_fx(lambda x: (x * 2).sum())(torch.randn(4))
            if r == 0
            else make_fx(lambda x: (x + x).sum(0).sum())(torch.randn(4))
        )
        rw.apply("fuse", before(), after)
        rw.end()
    path = w.finish()
    fs = run_checks(open_capture(path))
    div = [f for f in fs if f.kind == "rank-divergent-graph"]
    assert len(div) == 1
    assert div[0].introduced_by == "fuse" and div[0].ranks == [0, 1]
    assert div[0].evidence["differences"]
    # no collective in either graph: the ranks differ in what they compute only, right in graphs
    # each rank compiled for itself, an error where one rank's graph is loaded by the others
    assert div[0].severity == "info" and div[0].evidence["collectives_agree"]
    [shared] = [f for f in run_checks(open_capture(path), shared_graph=True) if f.kind == "rank-divergent-graph"]
    assert shared.severity == "error" and shared.introduced_by == "fuse"


def test_same_graphs_are_not_divergent(tmp_path):
    w = CaptureWriter(tmp_path, world_size=2)
    for r in (0, 1):
        rw = w.rank(r)
        g = make_fx(lambda x: (x * 2).sum())(torch.randn(4))
        rw.apply("p", g, make_fx(lambda x: (x + x).sum())(torch.randn(4)))
        rw.end()
    assert kinds(run_checks(open_capture(w.finish()))) == []


def test_pass_missing_on_a_rank(tmp_path):
    w = CaptureWriter(tmp_path, world_size=2)
    for r in (0, 1):
        rw = w.rank(r)
        g = make_fx(lambda x: (x * 2).sum())(torch.randn(4))
        rw.apply("p", g, make_fx(lambda x: (x + x).sum())(torch.randn(4)))
        if r == 0:
            rw.apply(
                "only_on_rank0",
                make_fx(lambda x: (x + x).sum())(torch.randn(4)),
                make_fx(lambda x: (x + x).sum(0))(torch.randn(4)),
            )
        rw.end()
    fs = [f for f in run_checks(open_capture(w.finish())) if f.kind == "rank-divergent-graph"]
    assert len(fs) == 1 and fs[0].evidence["not_on"] == [1]
