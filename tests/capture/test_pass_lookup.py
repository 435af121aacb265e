"""A `--pass` that cannot resolve ends `capture` at once with one line naming it and why, exit 2,
before anything runs (a typo must not exit 0 with an unexplained capture error)."""

from __future__ import annotations

import sys
import textwrap

import pytest

from graphtrain_inspect.capture.pass_lookup import why_unresolvable
from tests.capture_utils import capture, run_cli


@pytest.fixture
def pkg(tmp_path, monkeypatch):
    """A package `gtiuser` on sys.path whose import would fail loudly: the lookup must not run it."""
    root = tmp_path / "gtiuser"
    root.mkdir()
    (root / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (root / "passes.py").write_text(
        textwrap.dedent(
            """
            import functools
            from collections import OrderedDict as OD
            raise RuntimeError('imported')

            def fold(gm): ...

            class Passes:
                def run(self, gm): ...

            try:
                import fancy
                FAST = fancy.x
            except ImportError:
                SLOW = 1
            PIPELINE, OTHER = [fold], ()
            """
        )
    )
    (root / "star.py").write_text("from os.path import *\n")
    (root / "lazy.py").write_text("def __getattr__(name): ...\n")
    (root / "dynamic.py").write_text("globals()['made'] = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("gtiuser", None)
    yield "gtiuser"
    assert "gtiuser" not in sys.modules  # looked up, never imported


@pytest.mark.parametrize("name", ["fold", "Passes.run", "PIPELINE", "OTHER", "FAST", "SLOW", "functools", "OD"])
def test_names_the_module_binds_pass(pkg, name):
    assert why_unresolvable(f"{pkg}.passes:{name}") is None


def test_a_typo_is_named_with_the_closest_name(pkg):
    why = why_unresolvable(f"{pkg}.passes:PIPELIN")
    assert why.startswith(f"--pass {pkg}.passes:PIPELIN: module {pkg}.passes (")
    assert "has no attribute 'PIPELIN'; did you mean gtiuser.passes:PIPELINE?" in why
    assert "did you mean gtiuser.passes:Passes.run?" in why_unresolvable(f"{pkg}.passes:Passe.run")


def test_a_missing_module_is_named(pkg):
    assert "no module named 'gtiuser.pases'" in why_unresolvable(f"{pkg}.pases:fold")
    assert "gtiuser.passes is a module, not a package" in why_unresolvable(f"{pkg}.passes.sub:fold")


@pytest.mark.parametrize("module", ["star", "lazy", "dynamic"])
def test_what_cannot_be_told_from_the_source_is_left_to_the_workers(pkg, module):
    assert why_unresolvable(f"{pkg}.{module}:anything") is None


def test_a_module_not_on_this_path_is_left_to_the_workers():
    assert why_unresolvable("gti_no_such_top_level_module.x:f") is None


def test_capture_stops_before_training_with_one_line(tmp_path):
    out = tmp_path / "cap"
    r = run_cli(
        "capture", "--out", str(out), "--pass", "graphtrain_inspect.samples.pipeline:PIPELIN",
        "--", sys.executable, "-c", "open('ran', 'w')",
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert "has no attribute 'PIPELIN'; did you mean graphtrain_inspect.samples.pipeline:PIPELINE?" in r.stderr
    assert "nothing was run" in r.stderr and not out.exists()


def test_the_summary_names_ranks_that_recorded_nothing(tmp_path, capsys):
    """Under --coor rank 1 loads rank 0's graph and writes no log: the summary says so."""
    import argparse

    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    from graphtrain_inspect.capture.launch_summary import print_summary
    from graphtrain_inspect.capture.shared import logformat
    from graphtrain_inspect.capture.summary import summarize_log
    from tests.small_captures import CaptureWriter

    gm = make_fx(lambda x: (x * 2).relu().sum())(torch.randn(4))
    w = CaptureWriter(tmp_path, world_size=2)
    r0 = w.rank(0)
    r0.apply("drop_relu", gm, gm)
    r0.end()
    w.finish()
    summaries = [summarize_log(str(tmp_path / logformat.log_file_name(0)), 0)]
    assert summaries[0].world_size == 2
    print_summary(str(tmp_path), argparse.Namespace(passes=[], no_inductor=False), summaries, 0, None)
    err = capsys.readouterr().err
    assert "  rank 1 of world size 2: recorded nothing (no log; ran no captured pass)\n" in err, err


def _worker_only_module(tmp_path) -> str:
    """A folder holding module `gti_worker_only`, on no path but the one the training adds: the
    launcher cannot look into it, only the workers that import it can tell the typo."""
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "gti_worker_only.py").write_text("def real_pass(gm):\n    return gm\n")
    return str(mods)


TYPO = "gti_worker_only:real_pas"
LAST_LINE = (
    f"graphtrain-inspect capture: --pass {TYPO}: not captured: AttributeError: module 'gti_worker_only' has no "
    "attribute 'real_pas'"
)


def test_a_target_only_the_workers_can_resolve_ends_capture_after_training_exit_2(tmp_path):
    """torchrun's two workers import the module and record the typo; the training runs to its end
    unchanged, then `capture` ends with one line naming the target and the workers' reason, exit 2,
    instead of the training's 0 and an unexplained capture error."""
    train = tmp_path / "train.py"
    train.write_text(
        f"import os, sys\nsys.path.insert(0, {_worker_only_module(tmp_path)!r})\nimport gti_worker_only\n"
        f"open(os.path.join({str(tmp_path)!r}, 'done-' + os.environ['RANK']), 'w').close()\n"
    )
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(train)]
    r = capture(tmp_path / "cap", torchrun, "--no-inductor", "--pass", TYPO)
    assert r.returncode == 2, r.stderr
    assert "graphtrain-inspect capture: command exited with 0" in r.stderr, r.stderr
    assert (tmp_path / "done-0").exists() and (tmp_path / "done-1").exists()  # the training ran to its end
    last = r.stderr.rstrip("\n").splitlines()[-1]
    assert last.startswith(LAST_LINE) and last.endswith(
        "(the workers could not resolve it; the training ran unchanged)"
    )
    assert r.stderr.count(f"--pass {TYPO}") == 1, r.stderr  # said once, last
    assert "were never imported" not in r.stderr, r.stderr
    c = run_cli("check", str(tmp_path / "cap"))
    assert c.returncode == 0, c.stderr  # a fact about the capture, not a bug in the training: a warning
    assert (
        "WARNING" in c.stdout
        and f"--pass {TYPO} was not captured: AttributeError: module 'gti_worker_only' has no "
        "attribute 'real_pas'; none of its runs is in the capture"
        in c.stdout
    ), c.stdout


def test_a_failed_training_keeps_its_exit_code_and_still_names_the_target(tmp_path):
    program = f"import sys; sys.path.insert(0, {_worker_only_module(tmp_path)!r}); import gti_worker_only; sys.exit(3)"
    r = capture(tmp_path / "cap", [sys.executable, "-c", program], "--no-inductor", "--pass", TYPO)
    assert r.returncode == 3, r.stderr
    assert r.stderr.rstrip("\n").splitlines()[-1].startswith(LAST_LINE), r.stderr
