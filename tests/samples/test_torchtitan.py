"""torchtitan's graph_trainer (llama3 debug model, FSDP x TP on a 2-D mesh) captured in a simulated
world of 8 ranks on this CPU, as `python -m graphtrain_inspect.samples.torchtitan` runs it: every
pass of its pipeline by name, the ranks chosen from the mesh read from rank 0's run, each rank
ended right after its passes, and ranks of the same tp coordinate with the same graphs.

Needs the `torchtitan` extra (CI installs it); skipped with the reason without it.
"""

from __future__ import annotations

import json
import sys

import pytest

from tests.capture_utils import run_cli, run_plain

pytest.importorskip(
    "torchtitan.experiments.graph_trainer.passes",
    reason="the torchtitan extra is not installed (pip install -e '.[torchtitan]')",
)

pytestmark = pytest.mark.slow

# graph_trainer's compile_time_passes(...) on this config, less the passes that cannot run on a CPU
PIPELINE = [
    "eliminate_dead_code_pass",
    "canonicalize_graph_pass",
    "deduplicate_fsdp_unshard_chains_pass",
    "tag_with_memory_policy_pass",
    "apply_cpu_offload_pass",
    "annotate_flex_attention_for_regional_inductor_pass",
    "regional_inductor_pass",
]


@pytest.fixture(scope="module")
def llama3_world8(tmp_path_factory):
    base = tmp_path_factory.mktemp("torchtitan")
    out = base / "cap"
    r = run_plain(
        [
            sys.executable,
            "-m",
            "graphtrain_inspect.samples.torchtitan",
            "--model",
            "llama3",
            "--world",
            "8",
            "--out",
            str(out),
            "--assets",
            str(base / "assets"),
        ],
        timeout=1200,
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    return out, r


def test_the_command_is_printed_and_nothing_is_downloaded(llama3_world8):
    _, r = llama3_world8
    line = next(x for x in r.stdout.splitlines() if " capture " in x)
    assert line.startswith("HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 ")
    assert (
        "--pass torchtitan.experiments.graph_trainer.passes:compile_time_passes --simulate-world 8 --stop-after-passes"
        in line
    )
    assert "-m graphtrain_inspect.samples.torchtitan_cpu --module graph_trainer.llama3" in line
    assert "# disabled on CPU: joint_transformer_block_bucketing_reordering_pass:" in r.stdout


def test_every_pass_of_the_pipeline_recorded_on_every_chosen_rank(llama3_world8):
    out, _ = llama3_world8
    with open(out / "manifest.json") as f:
        sim = json.load(f)["simulated"]
    # the (fsdp, tp) = (4, 2) mesh was read from rank 0's run: the ranks cover both tp coordinates
    assert sim["ranks"][0] == 0 and 7 in sim["ranks"] and sim["chosen_by"] != "--simulate-ranks"
    from graphtrain_inspect.inspector import open_capture

    cap = open_capture(str(out))
    for r in sim["ranks"]:
        passes = [p.name for p in cap.passes(r)]
        assert passes == PIPELINE, (r, passes)
        end = cap.end(r)
        assert end["capture_errors"] == 0
        # ended as the step's graph was first called: the traced step never ran on the fake group
        assert end["stopped_after_passes"]["at"] == "first call of the graph regional_inductor_pass returned"
    ls = run_cli("ls", str(out))
    assert ls.returncode == 0 and "canonicalize_graph_pass" in ls.stdout


def test_ranks_with_the_same_graphs_diff_empty(llama3_world8):
    out, _ = llama3_world8
    with open(out / "manifest.json") as f:
        ranks = json.load(f)["simulated"]["ranks"]
    tp = {r: r % 2 for r in ranks}  # (fsdp, tp) = (4, 2): the tp coordinate is the rank's parity
    a, b = next((a, b) for a in ranks for b in ranks if a < b and tp[a] == tp[b])
    for name in PIPELINE:
        r = run_cli("diff", str(out), "--pass", name, "--ranks", f"{a},{b}")
        assert r.returncode == 0 and f"ranks {a} and {b} agree" in r.stdout, r.stdout[-2000:]


def test_check_finds_nothing_a_pass_introduced(llama3_world8):
    """No warning, and nothing blamed on a pass. (torchtitan's vocab-parallel embedding and loss
    compute their vocabulary offset from the tp rank, traced as a literal into each rank's graph:
    reported as found in the trace, see docs/torchtitan.md.)"""
    out, _ = llama3_world8
    r = run_cli("check", str(out), "--json")
    doc = json.loads(r.stdout)
    assert doc["summary"]["warning"] == 0, r.stdout[-3000:]
    assert all(f["introduced_by"] == "trace" for f in doc["findings"] if f["severity"] != "info"), r.stdout[-3000:]


def test_without_the_extra_the_sample_says_so_in_one_line(tmp_path):
    # the sample's own guard, run in a Python that cannot import torchtitan
    code = (
        "import sys; sys.modules['torchtitan'] = None; from graphtrain_inspect.samples import torchtitan as t; "
        f"sys.exit(t.main(['--out', {str(tmp_path / 'x')!r}]))"
    )
    r = run_plain([sys.executable, "-c", code])
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "pip install -e '.[torchtitan]'" in r.stderr
