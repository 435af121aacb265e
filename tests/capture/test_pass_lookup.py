"""A `--pass` that cannot resolve ends `capture` at once with one line naming it and why, exit 2,
before anything runs (issue 32: a typo exited 0 with an unexplained capture error)."""

from __future__ import annotations

import sys
import textwrap

import pytest

from graphtrain_inspect.capture.pass_lookup import why_unresolvable
from tests.capture_utils import run_cli


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
    """Under --coor rank 1 loads rank 0's graph and writes no log: the summary says so (issue 32)."""
    import argparse

    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    from graphtrain_inspect.capture import logformat
    from graphtrain_inspect.capture.launcher import _print_summary
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
    _print_summary(str(tmp_path), argparse.Namespace(passes=[], no_inductor=False), summaries, 0, None)
    err = capsys.readouterr().err
    assert "  rank 1 of world size 2: recorded nothing (no log; ran no captured pass)\n" in err, err


def test_a_target_only_the_workers_can_import_is_explained_in_the_summary(tmp_path):
    """Where the launcher cannot tell (the module is on the workers' path only), the summary names
    the worker's reason instead of 'never imported' (issue 32: the module had been imported)."""
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "gti_worker_only.py").write_text("def real_pass(gm):\n    return gm\n")
    program = f"import sys; sys.path.insert(0, {str(mods)!r}); import gti_worker_only"
    r = run_cli(
        "capture", "--out", str(tmp_path / "cap"), "--no-inductor", "--pass", "gti_worker_only:real_pas",
        "--", sys.executable, "-c", program,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr  # the command's own exit code: the training ran
    assert "--pass gti_worker_only:real_pas: not captured: AttributeError:" in r.stderr, r.stderr
    why = r.stderr.split("not captured:")[1].splitlines()[0]
    assert why == " AttributeError: module 'gti_worker_only' has no attribute 'real_pas'", why
    assert "were never imported" not in r.stderr, r.stderr
    c = run_cli("check", str(tmp_path / "cap"))
    assert c.returncode == 0, c.stderr  # a fact about the capture, not a bug in the training: a warning
    assert (
        "WARNING" in c.stdout
        and "--pass gti_worker_only:real_pas was not captured: AttributeError: module 'gti_worker_only' has no "
        "attribute 'real_pas'; none of its runs is in the capture"
        in c.stdout
    ), c.stdout
