"""Pipelines paired by identity, never by position (inspector/read/pipelines.py), on captures
written pass by pass: a precompile whose ranks run load-time passes (with the capture's lineage
records and, as older logs have it, with graph ids alone), identical per-layer graphs, and
compiles that only one rank made."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from graphtrain_inspect.inspector.checks import check_report
from graphtrain_inspect.inspector.read import pipelines
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.stages import pipeline_label
from tests.small_captures import CaptureWriter


def chunk_graph(index: int):
    """A token slice at chunk `index` of 2 (the rank read as a Python int when traced)."""

    def f(x):
        return torch.relu(torch.ops.aten.slice.Tensor(x, 1, 4 * index, 4 * index + 4)) + x.sum().detach()

    return make_fx(f, tracing_mode="fake")(torch.randn(4, 8))


def without_detach(gm):
    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target is torch.ops.aten.detach.default:
            n.replace_all_uses_with(n.args[0])
            gm.graph.erase_node(n)
    gm.recompile()
    return gm


def write_precompile(tmp_path, *, lineage: bool, plant: bool = True):
    """Rank 0 traces and runs two compile-time passes; both ranks load the result and run a
    load-time pass. `lineage`: the records say where each input came from (format 4)."""
    w = CaptureWriter(tmp_path, world_size=2)
    traced = chunk_graph(0) if plant else make_fx(lambda x: torch.relu(x) + x.sum().detach())(torch.randn(4, 8))
    stripped = without_detach(
        chunk_graph(0) if plant else make_fx(lambda x: torch.relu(x) + x.sum())(torch.randn(4, 8))
    )
    ident = (lambda **kw: kw) if lineage else (lambda **kw: {})
    for r in range(2):
        rw = w.rank(r)
        if r == 0:
            rw.apply("remove_detach", traced, stripped, **ident(input="traced"))
            rw.apply("remove_dead_code", stripped, stripped, **ident(input="pass", input_from=0))
        rw.apply("hoist_device", stripped, stripped, **ident(input="loaded"))
        rw.end()
    w.finish()
    return tmp_path


def test_load_time_pipelines_pair_across_ranks_by_lineage(tmp_path):
    with open_capture(str(write_precompile(tmp_path, lineage=True))) as cap:
        keys = {r: [(pl.key, pl.origin, [p.name for p in pl.passes]) for pl in cap.pipelines(r)] for r in cap.ranks}
    assert keys == {
        0: [("#0", "traced", ["remove_detach", "remove_dead_code"]), ("#L0", "loaded", ["hoist_device"])],
        1: [("#L0", "loaded", ["hoist_device"])],
    }
    assert pipeline_label("#L0") == "loaded graph's pipeline 0"


def test_older_logs_find_the_loaded_graph_by_its_id_on_another_rank(tmp_path):
    """No lineage records: rank 1 starts from the graph rank 0's pass produced, so it is shared,
    and rank 0's passes after it are cut into the load-time pipeline too."""
    with open_capture(str(write_precompile(tmp_path, lineage=False))) as cap:
        assert [(pl.key, [p.name for p in pl.passes]) for pl in cap.pipelines(0)] == [
            ("#0", ["remove_detach", "remove_dead_code"]),
            ("#L0", ["hoist_device"]),
        ]
        assert [pl.key for pl in cap.pipelines(1)] == ["#L0"]
        assert [(s.producers, s.loaders) for s in cap.shared.values()] == [([0], [1])]


def test_precompile_baked_slice_is_the_one_error_and_no_pass_ran_alarm(tmp_path):
    for lineage in (True, False):
        with open_capture(str(write_precompile(tmp_path / str(lineage), lineage=lineage))) as cap:
            rep = check_report(cap)
        errs = [(f.kind, f.node) for f in rep.findings if f.severity in ("error", "warning")]
        assert errs == [("rank-baked-constant", "slice_1")], (lineage, [f.message for f in rep.findings])
        assert any("rank(s) [0] compiled, rank(s) [0, 1] ran the loaded graph" in n for n in rep.notes)


def test_precompile_clean_twin_is_quiet(tmp_path):
    with open_capture(str(write_precompile(tmp_path, lineage=True, plant=False))) as cap:
        rep = check_report(cap)
    assert [f.message for f in rep.findings if f.severity in ("error", "warning")] == []


def test_identical_per_layer_graphs_are_pipelines_of_their_own(tmp_path):
    """Two layers trace one graph id; the first pass returns it unchanged. By graph id alone the
    second layer's passes continue the first's pipeline; by lineage each layer is one."""
    layer = make_fx(lambda x: torch.relu(x) * 2)(torch.randn(4))
    done = make_fx(lambda x: torch.relu(x) + 2)(torch.randn(4))
    w = CaptureWriter(tmp_path, world_size=1)
    rw = w.rank(0)
    for k in range(2):
        rw.apply("dce", layer, layer, input="traced", module=f"layers.{k}")
        rw.apply("concretize", layer, done, input="pass", input_from=2 * k)
    rw.end()
    w.finish()
    with open_capture(str(tmp_path)) as cap:
        pls = cap.pipelines(0)
    assert [(pl.key, [p.seq for p in pl.passes]) for pl in pls] == [("#0@layers.0", [0, 1]), ("#0@layers.1", [2, 3])]
    assert pipeline_label(pls[1].key) == "pipeline 0 (layers.1)"


def test_chain_follows_a_container_to_its_last_child():
    from graphtrain_inspect.inspector.read.capture_records import PassRecord

    ps = [
        PassRecord(0, 0, "outer", "g0", {"out": "g2"}, input="traced"),
        PassRecord(0, 1, "a", "g0", {"out": "g1"}, parent=0, input="traced"),
        PassRecord(0, 2, "b", "g1", {"out": "g2"}, parent=0, input="pass", input_from=1),
        PassRecord(0, 3, "c", "g2", {"out": "g3"}, input="pass", input_from=0),
        PassRecord(0, 4, "d", "g2", {"out": "g4"}, input="traced"),
    ]
    pipelines.chain_pipelines(ps)
    assert [(p.name, p.pipeline, p.traced) for p in ps] == [
        ("outer", 0, False),
        ("a", 0, True),
        ("b", 0, False),
        ("c", 0, False),
        ("d", 1, True),
    ]


def test_a_compile_only_one_rank_made_is_divergent_without_torch_logs(tmp_path):
    """No torch logs: the compile ids of the capture's own records tell that only rank 1
    recompiled (an error), never compile on one rank."""
    g = make_fx(lambda x: torch.relu(x) * 2)(torch.randn(4))
    for divergent in (True, False):
        w = CaptureWriter(tmp_path / str(divergent), world_size=2)
        for r in range(2):
            rw = w.rank(r)
            rw.apply("post_grad", g, g, compile_id="0/0", input="traced")
            if divergent and r == 1:
                rw.apply("post_grad", g, g, compile_id="0/1", input="traced")
            rw.end()
        w.finish()
        with open_capture(str(tmp_path / str(divergent))) as cap:
            rep = check_report(cap)
        found = [(f.kind, f.severity, f.ranks) for f in rep.findings if f.severity != "info"]
        assert found == ([("rank-divergent-compile", "error", [0, 1])] if divergent else []), rep.findings
        assert not any("compile on one rank" in n for n in rep.notes)


def _divergent(tmp_path, *, rank0_like_rank1: bool = False):
    """Two ranks, rank 1 compiled 0/1 alone (an error). With `rank0_like_rank1`, rank 0's log
    holds what rank 1 did (a relabelled copy)."""
    g = make_fx(lambda x: torch.relu(x) * 2)(torch.randn(4))
    w = CaptureWriter(tmp_path, world_size=2)
    for r in range(2):
        rw = w.rank(r)
        rw.apply("post_grad", g, g, compile_id="0/0", input="traced")
        if r == 1 or rank0_like_rank1:
            rw.apply("post_grad", g, g, compile_id="0/1", input="traced")
        rw.end()
    w.finish()
    return tmp_path


def _verdict(path):
    with open_capture(str(path)) as cap:
        rep = check_report(cap)
        errors = [str(e) for e in cap.all_errors()]
    return [(f.kind, f.severity, f.ranks) for f in rep.findings if f.severity != "info"], errors


def test_a_stray_or_relabelled_log_never_displaces_a_ranks_own(tmp_path):
    import shutil

    from graphtrain_inspect.capture.shared import logformat

    base = _divergent(tmp_path / "base")
    expected, _ = _verdict(base)
    assert expected == [("rank-divergent-compile", "error", [0, 1])]
    relabelled = _divergent(tmp_path / "relabelled", rank0_like_rank1=True) / logformat.log_file_name(0)
    for name, src in (
        ("dedicated_log_torch_trace_rank_0_x_gti.log", base / logformat.log_file_name(1)),  # rank 1's, as rank 0
        ("dedicated_log_torch_trace_rank_00_gti.log", relabelled),  # says rank 0, is not this rank 0
    ):
        cap = tmp_path / name
        shutil.copytree(base, cap)
        shutil.copy(src, cap / name)
        found, errors = _verdict(cap)
        assert found == expected, name
        assert any(name in e and "another log named as rank 0's" in e for e in errors), errors
