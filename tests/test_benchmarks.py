"""The benchmarks' entry point: `--list` names every case, and every case's function imports (the
cases themselves are not run here: each makes or reads captures of minutes)."""

import subprocess
import sys

from benchmarks.__main__ import CASES, resolve
from tests.capture_utils import ROOT


def test_list_names_every_case_and_each_resolves_to_a_function():
    r = subprocess.run([sys.executable, "-m", "benchmarks", "--list"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    listed = [line.split()[0] for line in r.stdout.splitlines() if line.strip()]
    assert listed == [c.name for c in CASES]
    assert len(set(listed)) == len(listed)
    for case in CASES:
        assert callable(resolve(case)), case.name


def test_an_unknown_case_is_one_line_and_exit_2():
    r = subprocess.run([sys.executable, "-m", "benchmarks", "no-such"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--list" in r.stderr
