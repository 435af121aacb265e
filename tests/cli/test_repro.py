"""`graphtrain-inspect repro`: a folder that reproduces a finding with torch alone. Its repro.py
runs in an interpreter that has torch (and torch's own dependencies) but not this tool, exits 1
while the bundled capture's planted bug is there and 0 when the same pass runs without it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.capture_utils import run_cli

SETUP = "graphtrain_inspect.samples.bugs:from_argv"  # the sample's --bug switches, as replay --setup
# torch and what importing it needs: nothing else is on the path repro.py runs with
TORCH_ONLY = ("torch", "torchgen", "functorch", "sympy", "mpmath", "typing_extensions", "filelock", "networkx",
              "jinja2", "markupsafe", "fsspec")  # fmt: skip


@pytest.fixture(scope="module")
def torch_only(tmp_path_factory) -> Path:
    """A folder with links to torch and its dependencies only, for `python -S` (no site-packages)."""
    d = tmp_path_factory.mktemp("torch-only")
    for name in TORCH_ONLY:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            continue
        src = Path(spec.origin)
        src = src.parent if src.name == "__init__.py" else src
        (d / src.name).symlink_to(src)
    return d


def run_repro(bundle: Path, torch_only: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(torch_only)
    return subprocess.run(
        [sys.executable, "-S", str(bundle / "repro.py")],
        cwd=bundle.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def without_bug(bundle: Path) -> None:
    """The bundle as the clean twin ran: its command line without --bug, so the pass is fixed."""
    p = bundle / "repro.json"
    cfg = json.loads(p.read_text())
    for r in cfg["ranks"].values():
        i = r["argv"].index("--bug")
        del r["argv"][i : i + 2]
    p.write_text(json.dumps(cfg))


def test_the_interpreter_has_torch_and_not_the_tool(torch_only):
    env = {"PYTHONPATH": str(torch_only), "PATH": os.environ.get("PATH", "")}
    code = "import torch, importlib.util as u; print(u.find_spec('graphtrain_inspect'), u.find_spec('numpy'))"
    r = subprocess.run([sys.executable, "-S", "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["None", "None"], r.stderr


@pytest.mark.parametrize(
    "sample, finding, says, grading",
    [
        # the ranks' collectives agree: an error where the graph is shared
        ("h200x2-rank-divergent", "rank-divergent-graph", "differs between rank 0 and rank 1", ["--shared-graph"]),
        ("h200x2-stale-symbol", "stale-unbacked-symbol", "stale unbacked symbol u18", []),
    ],
)
def test_repro_exits_1_while_the_bug_is_there(bundled_capture, tmp_path, torch_only, sample, finding, says, grading):
    cap = bundled_capture(sample)
    listed = json.loads(run_cli("check", str(cap), "--json", "-j", "1", *grading).stdout)["findings"]
    n = next(i for i, f in enumerate(listed, 1) if f["kind"] == finding and f["severity"] == "error")
    bundle = tmp_path / "bundle"
    r = run_cli("repro", str(cap), *grading, "--finding", str(n), "-o", str(bundle), "--setup", SETUP)
    assert r.returncode == 0 and r.stdout.startswith(f"wrote {bundle}: {finding}"), r.stderr
    assert (bundle / "src/graphtrain_inspect/samples/bugs.py").is_file() and (bundle / "rank0.gpkl").is_file()
    assert "pickles" in (bundle / "README.md").read_text()
    got = run_repro(bundle, torch_only)
    assert got.returncode == 1 and "REPRODUCED: " in got.stdout and says in got.stdout, got.stdout + got.stderr
    without_bug(bundle)
    got = run_repro(bundle, torch_only)
    assert got.returncode == 0 and "not reproduced" in got.stdout, got.stdout + got.stderr


def test_a_finding_of_the_traced_graph_has_no_pass_to_reproduce(bundled_capture, tmp_path):
    cap = bundled_capture("h200x2-rank-divergent")
    listed = json.loads(run_cli("check", str(cap), "--json", "-j", "1").stdout)["findings"]
    n = next(i for i, f in enumerate(listed, 1) if f["introduced_by"] == "trace")
    r = run_cli("repro", str(cap), "--finding", str(n), "-o", str(tmp_path / "b"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "already in the traced graph" in r.stderr
    assert not (tmp_path / "b").exists()
    r = run_cli("repro", str(cap), "--finding", str(len(listed) + 1), "-o", str(tmp_path / "b"))
    assert r.returncode == 2 and f"has {len(listed)}" in r.stderr


def test_an_untrusted_capture_writes_nothing(tui_small_capture, tmp_path):
    # the small capture's rank literal is put there by a pass, but nobody signed the capture
    r = run_cli("repro", str(tui_small_capture), "--finding", "1", "-o", str(tmp_path / "b"))
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "--trust" in r.stderr, r.stderr
    assert not (tmp_path / "b").exists()


def rank_baking_capture(
    directory: Path, qualname: str = "tests.cli.rank_pass:shard_rows", cwd: Path | None = None
) -> Path:
    """tests.tui_support's 2-rank graphs, its rank-baking pass a real function (tests.cli.rank_pass)
    with the blob of the graph it received, signed with the test's key as `capture` signs.
    `cwd`: the training's working directory the manifest records (where it found `qualname`)."""
    from graphtrain_inspect.capture import blobs
    from graphtrain_inspect.capture.shared import signing
    from tests.small_captures import CaptureWriter, mesh_rank_table
    from tests.tui_support import _graphs

    w = CaptureWriter(directory, world_size=2)
    for r in range(2):
        rw = w.rank(r, rank_table=mesh_rank_table(r, (2,), ("dp",)), own_device="cpu")
        g0, g1, g2 = _graphs(r)
        rw.apply("remove_dead_code", g0, g1)
        ref = blobs.dump(str(directory), g1, None)
        rw.apply("shard_rows", g1, g2, qualname=qualname, blobs={rw.graph(g1): ref})
        rw.end()
    w.finish()
    if cwd is not None:
        manifest = directory / "manifest.json"
        doc = json.loads(manifest.read_text())
        manifest.write_text(json.dumps({**doc, "cwd": str(cwd), "command": ["torchrun", "train.py"]}))
    signing.sign(str(directory))
    return directory


def test_a_rank_literal_a_pass_bakes(tmp_path, torch_only):
    cap = rank_baking_capture(tmp_path / "cap")
    listed = json.loads(run_cli("check", str(cap), "--json", "-j", "1").stdout)["findings"]
    n = next(i for i, f in enumerate(listed, 1) if f["kind"] == "rank-baked-constant")
    assert listed[n - 1]["introduced_by"] == "shard_rows"
    bundle = tmp_path / "bundle"
    r = run_cli("repro", str(cap), "--finding", str(n), "-o", str(bundle))
    assert r.returncode == 0, r.stderr
    assert (bundle / "src/tests/cli/rank_pass.py").is_file() and (bundle / "src/tests/__init__.py").is_file()
    got = run_repro(bundle, torch_only)
    assert got.returncode == 1 and "REPRODUCED: node select differs across ranks" in got.stdout, got.stdout + got.stderr
    assert "rank 0: aten.select.int(relu, 0, 0)" in got.stdout and "rank 1: aten.select.int(relu, 0, 1)" in got.stdout
    cfg = json.loads((bundle / "repro.json").read_text())
    cfg["pass"] = "tests.cli.rank_pass:sum_all"  # the fix
    (bundle / "repro.json").write_text(json.dumps(cfg))
    got = run_repro(bundle, torch_only)
    assert got.returncode == 0 and "not reproduced" in got.stdout, got.stdout + got.stderr


def test_the_users_own_pass_module_is_bundled_and_a_bundle_that_cannot_run_says_so(tmp_path, torch_only):
    """The common case: the pass lives in the user's module beside the training script
    (`--pass my_passes:fn`), importable only from the training's folder. repro finds it there (the
    manifest's working directory and the script's folder), bundles it, and repro.py reproduces; a
    bundle whose pass cannot be imported exits 3 with one line, never 1 ("the finding is there")."""
    import shutil

    from tests.capture_utils import ROOT

    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(ROOT / "tests/cli/rank_pass.py", work / "my_passes.py")
    cap = rank_baking_capture(tmp_path / "cap", qualname="my_passes:shard_rows", cwd=work)
    listed = json.loads(run_cli("check", str(cap), "--json", "-j", "1").stdout)["findings"]
    n = next(i for i, f in enumerate(listed, 1) if f["kind"] == "rank-baked-constant")
    bundle = tmp_path / "bundle"
    r = run_cli("repro", str(cap), "--finding", str(n), "-o", str(bundle))
    assert r.returncode == 0, r.stderr
    assert (bundle / "src/my_passes.py").is_file(), sorted(p.name for p in bundle.rglob("*"))
    got = run_repro(bundle, torch_only)
    assert got.returncode == 1 and "REPRODUCED" in got.stdout, got.stdout + got.stderr
    (bundle / "src/my_passes.py").unlink()
    got = run_repro(bundle, torch_only)
    assert got.returncode == 3 and "Traceback" not in got.stdout + got.stderr, got.stdout + got.stderr
    assert got.stdout.splitlines()[-1].startswith("cannot run: ModuleNotFoundError: No module named 'my_passes'")
