"""capture --simulate-world: rank choice, the torchrun environment, options, and (slow) a 16-rank
world of the 3-D mesh sample simulated on four ranks, with a rank literal found on all four."""

from __future__ import annotations

import itertools
import json
import sys

import pytest

from graphtrain_inspect.capture import simulate
from graphtrain_inspect.capture.shared import node_ranks
from graphtrain_inspect.capture.shared.rank_ranges import brief_ranks, format_ranks, parse_ranks
from tests.capture_utils import run_cli

MESHES = [
    (8, ["dp", "tp", "ep"], [2, 2, 2]),
    (16, ["dp", "tp", "ep"], [4, 2, 2]),
    (64, ["dp", "tp", "ep"], [16, 2, 2]),
    (512, ["dp", "tp", "ep"], [128, 2, 2]),
    (1024, ["pp", "dp", "tp"], [4, 32, 8]),
    (48, ["dp", "tp"], [6, 8]),
]


@pytest.mark.parametrize("world,names,shape", MESHES)
def test_default_ranks_tell_every_rank_value_apart(world, names, shape):
    meshes = node_ranks.Meshes(node_ranks.mesh_coords(names, shape), "--mesh")
    ranks, reasons = node_ranks.choose_ranks(world, 8, meshes)
    assert len(ranks) <= 6 and len(reasons) == len(ranks)
    vectors = {
        "rank": list(range(world)),
        "local": [r % 8 for r in range(world)],
        "host": [r // 8 for r in range(world)],
        **{n: meshes.coords[n] for n in names},
    }
    for name, col in vectors.items():
        if min(col) != max(col):  # first and last value of each on some chosen rank
            assert {min(col), max(col)} <= {col[r] for r in ranks}, name
    for (a, va), (b, vb) in itertools.combinations(vectors.items(), 2):
        if node_ranks.confusable(va, vb):
            continue  # the same thing on this world (rank and local rank on one host)
        assert not node_ranks.confusable([va[r] for r in ranks], [vb[r] for r in ranks]), (a, b, ranks)


def test_mesh_coordinates_follow_init_device_mesh_layout():
    c = node_ranks.mesh_coords(["dp", "tp", "ep"], [2, 2, 2])
    assert [(c["dp"][r], c["tp"][r], c["ep"][r]) for r in (0, 5, 7)] == [(0, 0, 0), (1, 0, 1), (1, 1, 1)]
    table = {
        "meshes": [
            {"dim_names": ["dp", "tp", "ep"], "shape": [2, 2, 2], "mesh": [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]},
            {"dim_names": ["tp"], "shape": [2], "mesh": [5, 7]},
        ]
    }  # a sub-mesh: only this rank's slice
    m = simulate.meshes_from_table(table, 8)
    assert m.coords == c and "(dp, tp, ep) = (2, 2, 2)" in m.source


def test_torchrun_environment_of_a_rank_on_the_second_host():
    env = simulate.torchrun_env(13, 16, 8, "run")
    assert {
        k: env[k]
        for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK")
    } == {
        "RANK": "13",
        "LOCAL_RANK": "5",
        "WORLD_SIZE": "16",
        "LOCAL_WORLD_SIZE": "8",
        "GROUP_RANK": "1",
        "GROUP_WORLD_SIZE": "2",
        "ROLE_RANK": "13",
    }
    assert env["TORCHELASTIC_RUN_ID"] == "run" and env["MASTER_ADDR"]


def test_rank_lists_compact_and_parsed():
    assert format_ranks([16, 0, 1, 2, 3, 4, 5, 6, 7, 17, 23, 18, 19, 20, 21, 22]) == "0-7,16-23"
    assert format_ranks([0, 3, 9, 15]) == "0,3,9,15"
    assert parse_ranks("0,3,9-11", 16) == [0, 3, 9, 10, 11]
    for bad in ("0,16", "3-1", "x", ""):
        with pytest.raises(ValueError):
            parse_ranks(bad, 16)


def test_long_rank_lists_read_in_brief():
    """A class of a big world in a line: the stride of the mesh where the ranks have one, else
    the first ranges and the count; short lists as `format_ranks` writes them."""
    tp0 = [r for r in range(1024) if r % 4 in (0, 1)]
    assert brief_ranks(tp0) == "0-1, repeating every 4 ranks up to 1021 (512 ranks)"
    assert brief_ranks([r for r in range(2, 1024, 8)]) == "2, repeating every 8 ranks up to 1018 (128 ranks)"
    assert brief_ranks([r for r in range(64) if r != 32]) == "0-31,33-63"
    broken = [r for r in tp0 if r != 505]  # one rank out of the pattern: no period holds
    text = brief_ranks(broken)
    assert text.endswith(",... (511 ranks)") and len(text) <= 100 and text.startswith("0-1,4-5,8-9,")


@pytest.mark.parametrize(
    "opts,msg",
    [
        (["--simulate-world", "0"], "give a world size"),
        (["--simulate-ranks", "0,1"], "need --simulate-world"),
        (["--simulate-world", "16", "--simulate-ranks", "0,16"], "outside a world of 16"),
        (["--simulate-world", "16", "--mesh", "dp=4,tp=2"], "not the 16 of --simulate-world"),
    ],
)
def test_bad_options_are_one_line_and_run_nothing(tmp_path, opts, msg):
    out = tmp_path / "cap"
    r = run_cli("capture", "--out", str(out), *opts, "--", sys.executable, "-c", "pass")
    assert r.returncode == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_a_launcher_in_the_command_is_refused(tmp_path):
    r = run_cli(
        "capture",
        "--out",
        str(tmp_path / "cap"),
        "--simulate-world",
        "8",
        "--",
        "torchrun",
        "--nproc-per-node",
        "8",
        "x.py",
    )
    assert r.returncode == 2 and "not torchrun" in r.stderr


# -- a real simulated world -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def world16(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim") / "w16"
    r = run_cli(
        "capture",
        "--out",
        str(out),
        "--pass",
        "graphtrain_inspect.samples.mesh3d_passes:PIPELINE",
        "--simulate-world",
        "16",
        "--simulate-ranks",
        "0,3,9,15",
        "--stop-after-passes",
        "--",
        sys.executable,
        "-m",
        "graphtrain_inspect.samples.mesh3d",
        "--bug",
        "rank",
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return out, r


@pytest.mark.slow
def test_rank_literal_found_on_all_four_simulated_ranks(world16):
    out, _ = world16
    # the rank read as an int by model code: right in each rank's own trace (info, exit 0), an
    # error in a graph loaded by every rank (--shared-graph)
    assert run_cli("check", str(out)).returncode == 0
    r = run_cli("check", str(out), "--json", "--shared-graph")
    assert r.returncode == 1, r.stderr
    found = [f for f in json.loads(r.stdout)["findings"] if f["kind"] == "rank-baked-constant"]
    assert found and all(f["severity"] == "error" for f in found), r.stdout[:2000]
    for f in found:
        assert f["ranks"] == [0, 3, 9, 15]
        values = {str(k): v for k, v in f["evidence"]["values"].items()}
        assert values == {"0": 1, "3": 4, "9": 10, "15": 16}, f["evidence"]


@pytest.mark.slow
def test_simulated_world_is_recorded_and_shown(world16):
    out, run = world16
    m = json.loads((out / "manifest.json").read_text())
    sim = m["simulated"]
    assert sim["world_size"] == 16 and sim["local_world_size"] == 8 and sim["ranks"] == [0, 3, 9, 15]
    assert sim["stopped_after_passes"] == [0, 3, 9, 15] and sim["chosen_by"] == "--simulate-ranks"
    assert sorted(m["ranks"]) == ["0", "15", "3", "9"]
    assert "stopped after their passes" in run.stderr and "simulated: 4 of 16 ranks (0,3,9,15)" in run.stderr
    ls = run_cli("ls", str(out))
    assert "simulated: 4 of 16 ranks (0,3,9,15), hosts of 8" in ls.stdout
    notes = json.loads(run_cli("check", str(out), "--json").stdout)["summary"]["notes"]
    assert any(n.startswith("simulated: 4 of 16 ranks") for n in notes)
    from graphtrain_inspect.inspector import open_capture

    cap = open_capture(str(out))
    assert cap.header(9)["simulated"]["world_size"] == 16 and cap.header(9)["local_rank"] == 1
    assert cap.header(9)["simulated"]["device_index"] == 1 and cap.header(9)["simulated"]["requested_backend"] == "gloo"
    table = cap.rank_table(9)
    assert table["backend"] == "fake" and table["meshes"][0]["coordinate"] == [2, 0, 1]
    # the sample calls the graph its last pass returned: the rank ends there, before the step runs
    assert cap.end(9).get("stopped_after_passes", {}).get("at") == "first call of the graph fold_scale_by_one returned"


@pytest.mark.slow
def test_default_ranks_of_the_3d_sample_and_tp_coordinate_attributed(tmp_path):
    """No --simulate-ranks: rank 0 runs first, its mesh picks the others; the baked tp coordinate
    is told apart from dp, ep, the rank and the local rank."""
    out = tmp_path / "w8"
    r = run_cli(
        "capture",
        "--out",
        str(out),
        "--pass",
        "graphtrain_inspect.samples.mesh3d_passes:PIPELINE",
        "--simulate-world",
        "8",
        "--stop-after-passes",
        "--",
        sys.executable,
        "-m",
        "graphtrain_inspect.samples.mesh3d",
        "--bug",
        "tp-coordinate",
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    sim = json.loads((out / "manifest.json").read_text())["simulated"]
    assert sim["chosen_by"] == "default" and "rank 0's mesh (dp, tp, ep) = (2, 2, 2)" in sim["mesh_source"]
    assert "ranks chosen" in r.stderr and all(line in r.stderr for line in sim["reasons"])
    c = run_cli("check", str(out), "--json")
    found = [f for f in json.loads(c.stdout)["findings"] if f["kind"] == "rank-baked-constant"]
    assert found and all(f["ranks"] == sim["ranks"] for f in found)
    for f in found:  # coordinate[tp] (and the rank within the tp group, the same number), nothing else
        vectors = [m["vector"] for m in f["evidence"]["matches"]]
        assert vectors[0] == "coordinate[tp]" and set(vectors) <= {"coordinate[tp]", "group_rank[mesh.tp[2]]"}, vectors


def test_mesh_option_parsed_and_checked():
    assert simulate.parse_mesh("dp=4,tp=2,ep=2", 16) == (["dp", "tp", "ep"], [4, 2, 2])
    for bad in ("dp=4,tp", "dp=0,tp=16", "dp=3,tp=2"):
        with pytest.raises(simulate.SimulateError):
            simulate.parse_mesh(bad, 16)
    ranks, why = node_ranks.choose_ranks(
        16, 8, node_ranks.Meshes(node_ranks.mesh_coords(*simulate.parse_mesh("dp=4,tp=2,ep=2", 16)), "--mesh")
    )
    assert ranks[0] == 0 and ranks[-1] == 15 and why[0].startswith("rank 0: first rank")


@pytest.mark.slow
def test_real_and_simulated_two_rank_worlds_give_the_same_graphs_and_findings():
    """The 8-rank comparison is `python -m benchmarks simulated-vs-real` (too heavy for the suite);
    the same case on a 2-rank tp mesh: a real gloo torchrun against the fake process group."""
    from tests.capture_utils import run_plain

    r = run_plain(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "simulated-vs-real",
            "--nproc",
            "2",
            "--tp",
            "2",
            "--ep",
            "1",
            "--bug",
            "tp-coordinate",
        ],
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "SAME graphs on every rank, SAME findings" in r.stdout and "findings: 2 real, 2 simulated" in r.stdout


def test_a_failing_first_rank_stops_the_world_with_its_exit_code(tmp_path):
    out = tmp_path / "cap"
    r = run_cli(
        "capture",
        "--out",
        str(out),
        "--simulate-world",
        "64",
        "--",
        sys.executable,
        "-c",
        "import os, sys; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'], 'local', "
        "os.environ['LOCAL_RANK']); sys.exit(3)",
    )
    assert r.returncode == 3 and "the other 2 ranks were not run" in r.stderr
    sim = json.loads((out / "manifest.json").read_text())["simulated"]
    assert sim["ranks"] == [0] and sim["not_run"] == [8, 63] and sim["per_rank"]["0"]["exit_code"] == 3
    assert (out / "simulate" / "rank_0.out").read_text().strip() == "rank 0 of 64 local 0"


@pytest.mark.slow
def test_a_failed_first_rank_is_not_called_a_compile_on_one_rank(tmp_path):
    """Rank 0 compiles, then fails: the other chosen ranks never ran. check and ls say so, and
    check does not take rank 0's graphs for a compile on one rank (nobody loaded them)."""
    out = tmp_path / "cap"
    r = run_cli(
        "capture",
        "--out",
        str(out),
        "--simulate-world",
        "4",
        "--",
        sys.executable,
        "-c",
        "import sys, torch; torch.compile(lambda x: x * 2 + 1)(torch.ones(3)); sys.exit(3)",
        timeout=600,
    )
    assert r.returncode == 3 and "the other 1 ranks were not run" in r.stderr, r.stderr[-3000:]
    check = run_cli("check", str(out), "--json")
    doc = json.loads(check.stdout)
    notes = doc["summary"]["notes"]
    assert not any("compile on one rank" in n for n in notes), notes
    assert any(n.endswith("failed or stopped 0; never ran 3") for n in notes), notes
    assert "rank-baked-constant: needs graphs of at least two ranks" in run_cli("check", str(out)).stdout
    ls = run_cli("ls", str(out))
    assert "simulated: 1 of 4 ranks (0), hosts of 4" in ls.stdout and "failed or stopped 0; never ran 3" in ls.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode,printed,stopped_at",
    [
        # a graph trainer: the rank ends as the step's graph is first called, not after running it
        ("traced", ["PIPELINE DONE"], "first call of the graph run_graph_pass returned"),
        # torch.compile: its passes run in the forward and in the backward; the graphs it compiled
        # are called by its own runtime, so the rank ends at the optimizer step
        ("compiled", ["FORWARD RAN", "BACKWARD RAN"], "first optimizer step"),
    ],
)
def test_stop_after_passes_ends_where_the_passes_are_done(tmp_path, mode, printed, stopped_at):
    out = tmp_path / "cap"
    r = run_cli(
        "capture",
        "--out",
        str(out),
        "--pass",
        "tests.programs.stop_step:PASSES",
        "--simulate-world",
        "2",
        "--simulate-ranks",
        "0",
        "--stop-after-passes",
        "--",
        sys.executable,
        "-m",
        "tests.programs.stop_step",
        mode,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    output = (out / "simulate" / "rank_0.out").read_text()
    markers = [
        m for m in ("PIPELINE DONE", "FORWARD RAN", "BACKWARD RAN", "STEP RAN", "OPTIMIZER STEP RAN") if m in output
    ]
    assert markers == printed, output[-3000:]
    from graphtrain_inspect.inspector import open_capture

    assert open_capture(str(out)).end(0)["stopped_after_passes"]["at"] == stopped_at
