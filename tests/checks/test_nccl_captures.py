"""Verdicts on captures recorded on 2 GPUs over NCCL (tests/data/nccl/README.md): the collective
that one rank's partitioner recomputes, the all_reduces a scheduling pass reorders on one rank,
uneven DTensor shards with a right and a wrong chunk bound, and their fixed twins, as they are on
gloo CPU ranks. Triton's autotuning hints, which hold each rank's own sizes, are not graded as
literals; each rank's own shard size in code it generated for itself is info."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from graphtrain_inspect.inspector.checks import check_report
from graphtrain_inspect.inspector.read.capture_index import open_capture

ROOT = Path(__file__).resolve().parents[2]
PACKED = ROOT / "tests/data/nccl/h200x2-nccl.tar.xz"


@pytest.fixture(scope="module")
def nccl_reports(tmp_path_factory) -> dict:
    where = tmp_path_factory.mktemp("nccl")
    with tarfile.open(PACKED) as tf:
        tf.extractall(where, filter="data")
    out = {}
    for d in sorted(where.iterdir()):
        with open_capture(str(d)) as cap:
            out[d.name.removeprefix("h200x2-")] = (check_report(cap), [cap.own_device(r) for r in cap.ranks])
    return out


def _graded(rep) -> list[tuple[str, str, str | None]]:
    return [(f.kind, f.severity, f.introduced_by) for f in rep.findings if f.severity != "info"]


def test_the_recomputed_all_gather_is_found_on_nccl(nccl_reports):
    rep, _ = nccl_reports["partitioner-bug"]
    (root,) = [f for f in rep.findings if f.severity != "info"]
    assert (root.kind, root.severity) == ("collective-mismatch", "error")
    assert root.introduced_by.startswith("min_cut_rematerialization_partition")
    assert "all_gather_into_tensor" in root.message and "hang" in root.message
    assert {c.kind for c in root.consequences} == {"rank-divergent-graph"}


@pytest.mark.parametrize(
    "twin",
    ["partitioner-sync", "partitioner-nocoll", "reorder-clean", "uneven-plain", "uneven-rewrite", "uneven-compile"],
)
def test_the_fixed_twins_are_quiet_on_nccl(nccl_reports, twin):
    rep, _ = nccl_reports[twin]
    assert _graded(rep) == []


def test_the_reordered_all_reduces_are_found_on_nccl(nccl_reports):
    rep, _ = nccl_reports["reorder-bug"]
    assert _graded(rep) == [("collective-mismatch", "error", "reorder_by_local_estimate")]
    assert "collectives pair by order" in rep.findings[0].message


def test_each_rank_ran_on_its_own_gpu(nccl_reports):
    for _rep, devices in nccl_reports.values():
        assert devices == ["cuda:0", "cuda:1"]


def test_a_wrong_chunk_bound_is_found_on_nccl(nccl_reports):
    rep, _ = nccl_reports["uneven-plant"]
    assert _graded(rep) == [("rank-baked-constant", "error", "slice_at_rank_rows")]
    assert "no chunk" in rep.findings[0].message


def test_own_shard_sizes_in_each_ranks_triton_code_are_info(nccl_reports):
    rep, _ = nccl_reports["uneven-compile"]
    own = [f for f in rep.findings if f.layer == "codegen" and f.kind == "rank-baked-constant"]
    assert own and all(f.severity == "info" for f in own)
    assert {(f.evidence["geometry"]["dim_size"], f.evidence["geometry"]["chunks"]) for f in own} == {(7, 2)}
    assert any(f.evidence["code"].strip() == "xnumel = 20" for f in own)
