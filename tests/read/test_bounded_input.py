"""What a capture claims costs no more than what it holds, and a value of the wrong type or shape
is a reading problem: a manifest field of another type than docs/log-format.md's (`"options":
[0]`, `"status": 7`) never reaches a reader, a header's world size of 10**9 sizes no list, and a
node argument nested 1,000 deep is cut where it passes `MAX_NESTING`, never a RecursionError.
Every command ends in its output or one line: ls, check, diff, report, in process."""

from __future__ import annotations

import contextlib
import copy
import io
import os
import resource
import shutil
import subprocess
import sys

import orjson
import pytest

from graphtrain_inspect.capture import graph_tables
from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.inspector.cli.main import main
from graphtrain_inspect.inspector.read import bundled
from graphtrain_inspect.inspector.read.graphmodel import MAX_NESTING
from graphtrain_inspect.inspector.read.validators import MANIFEST_SCHEMA, clean_manifest, fits
from tests.capture_utils import ROOT
from tests.small_captures import CaptureWriter
from tests.tui_support import _graphs


def _capture(directory, *, world: int = 2) -> str:
    """Two ranks of the same rank-agnostic passes: nothing to find."""
    w = CaptureWriter(directory, world_size=world)
    for r in range(2):
        rw = w.rank(r, own_device="cpu")
        g0, g1, _ = _graphs(r)
        rw.apply("remove_dead_code", g0, g1)
        rw.apply("noop", g1, g1)
        rw.end()
    return w.finish()


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _commands(path: str, tmp) -> list[list[str]]:
    return [
        ["ls", path],
        ["ls", "--json", path],
        ["check", path],
        ["diff", path, "--pass", "noop", "--ranks", "0,1"],
        ["diff", path, "--pass", "remove_dead_code", "--rank", "1"],
        ["report", path, "-o", str(tmp / "report")],
    ]


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    return _capture(tmp_path_factory.mktemp("bounded") / "cap")


@pytest.fixture(scope="module")
def baseline(clean, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("baseline")
    return [_run(*argv)[0] for argv in _commands(clean, tmp)]


# -- the manifest ------------------------------------------------------------------------------

WRONG = {"list": [0], "int": 7, "str": "x", "object": {"k": 0}, "bool": True}

# Fields inside the manifest's objects, as the launcher writes them (a valid value beside each).
NESTED = {
    ("options", "passes"): [],
    ("options", "inductor"): False,
    ("options", "blobs"): False,
    ("ranks", "1", "log"): "dedicated_log_torch_trace_rank_1_gti.log",
    ("ranks", "1", "exit"): {"exit_code": 0, "signal": None},
    ("ranks", "1", "exit", "exit_code"): 0,
    ("ranks", "1", "processes"): [],
    ("stopped_ranks", "1"): "disk full",
    ("still_running", "1"): [4242],
    ("disk", "full"): False,
    ("disk", "free_bytes"): 1 << 30,
    ("env", "CUDA_VISIBLE_DEVICES"): "0,1",
    ("simulated", "ranks"): [0, 1],
    ("simulated", "world_size"): 2,
    ("simulated", "per_rank"): {"1": {"exit_code": 0, "signal": None}},
    ("simulated", "per_rank", "1", "exit_code"): 0,
}


def _wrong(value, spec) -> bool:
    return not fits(value, spec)


def _spec_at(path: tuple[str, ...]):
    spec = MANIFEST_SCHEMA
    for k in path:
        spec = next(s for s in (spec if isinstance(spec, tuple) else (spec,)) if isinstance(s, dict))
        spec = spec.get("*", spec.get(k))
    return spec


def _manifest_with(clean: str, level: str, kind: str, only: str | None = None) -> tuple[dict, list[str]]:
    """The clean capture's manifest with a value of `kind` in every field it is wrong for (or in
    field `only`): the top-level fields, or the fields inside its objects."""
    with open(os.path.join(clean, logformat.MANIFEST_NAME), "rb") as f:
        m = orjson.loads(f.read())
    bad = WRONG[kind]
    changed = []
    if level == "top":
        for key, spec in MANIFEST_SCHEMA.items():
            if _wrong(bad, spec) and only in (None, key):
                m[key] = copy.deepcopy(bad)
                changed.append(key)
        return m, changed
    for path, good in NESTED.items():  # first every field valid, then each wrong where it can be
        at = m
        for k in path[:-1]:
            at = at.setdefault(k, {})
        at[path[-1]] = copy.deepcopy(good)
    for path in NESTED:
        name = ".".join(path)
        if _wrong(bad, _spec_at(path)) and only in (None, name):
            at = m
            for k in path[:-1]:
                at = at.get(k) if isinstance(at, dict) else None
            if isinstance(at, dict):
                at[path[-1]] = copy.deepcopy(bad)
                changed.append(name)
    return m, changed


@pytest.mark.parametrize("level", ["top", "nested"])
@pytest.mark.parametrize("kind", sorted(WRONG))
def test_manifest_field_of_the_wrong_type_is_a_reading_problem(clean, baseline, tmp_path, level, kind):
    manifest, changed = _manifest_with(clean, level, kind)
    assert changed
    cap = tmp_path / "cap"
    shutil.copytree(clean, cap)
    (cap / logformat.MANIFEST_NAME).write_bytes(orjson.dumps(manifest))
    for argv, expected in zip(_commands(str(cap), tmp_path), baseline):
        code, out, err = _run(*argv)
        assert "Traceback" not in err, (argv, err)
        # never exit 1 ("error findings") or 2 ("unreadable"): the same as the capture as written
        assert code == expected, (argv, code, err[-2000:])
    code, out, err = _run("ls", str(cap))
    assert f"{logformat.MANIFEST_NAME}: " in out + err and "left out" in out + err
    assert "None" not in out.splitlines()[0]  # a status left out reads unknown (or not at all), not `None`


def test_every_manifest_field_is_named(clean):
    """Each field of the wrong type is said by its path, and left out; the manifest read is not
    changed."""
    for level in ("top", "nested"):
        for kind in WRONG:
            for field in _manifest_with(clean, level, kind)[1]:
                manifest, _ = _manifest_with(clean, level, kind, only=field)
                before = copy.deepcopy(manifest)
                cleaned, problems = clean_manifest(manifest)
                assert len(problems) == 1 and problems[0].startswith(f"{field} is "), (field, problems)
                assert problems[0].endswith(": left out") and manifest == before
                at = cleaned
                for k in field.split(".")[:-1]:
                    at = at[k]
                assert field.split(".")[-1] not in at
    cleaned, problems = clean_manifest({"options": [0], "status": 7})
    assert cleaned == {} and problems == [
        "options is a list, not an object: left out",
        "status is an integer, not a string: left out",
    ]
    _, problems = clean_manifest({"ranks": {"0": {"exit": {"exit_code": "x"}}}, "problems": [1, 2, 3, 4, 5]})
    assert problems == [
        "ranks.0.exit.exit_code is a string, not an integer or null: left out",
        "problems[0] is an integer, not a string: left out",
        "problems[1] is an integer, not a string: left out",
        "and 3 more values of the wrong type",
    ]


@pytest.mark.parametrize("name", bundled.names())
def test_no_bundled_manifest_has_a_field_of_the_wrong_type(name):
    """The schema is the launcher's own: a manifest it wrote loses nothing."""
    path = bundled.path_of(name) / logformat.MANIFEST_NAME
    if not path.exists():
        pytest.skip("no manifest")
    m = orjson.loads(path.read_bytes())
    assert clean_manifest(m) == (m, [])


# -- a header's world size ---------------------------------------------------------------------


def test_world_size_claim_sizes_nothing(tmp_path):
    """A header saying world_size 10**9 of a two-rank capture: `check` ran out of memory (17 GB)
    building range(world); now a note, in little memory and time."""
    cap = _capture(tmp_path / "cap", world=10**9)

    def limit() -> None:  # 1 GiB of address space: a list of 10**9 ranks does not fit
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for argv in (["check", cap], ["ls", cap], ["ls", "--json", cap]):
        p = subprocess.run(
            [sys.executable, "-m", "graphtrain_inspect.inspector.cli", *argv],
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=limit,
            env=env,
        )
        assert p.returncode == 0 and "Traceback" not in p.stderr and "MemoryError" not in p.stderr, (argv, p.stderr)
    code, out, err = _run("check", cap)
    assert code == 0 and "world size 1000000000 (a log header's) is past 1048576 ranks" in out + err, out + err


# -- nesting -----------------------------------------------------------------------------------

DEEP = b"[" * 1000 + b"1" + b"]" * 1000  # orjson reads 1024 levels; every walker recursed


class _DeepDumps:
    """logformat's orjson, writing DEEP where a value says "DEEP": what an edited log holds (a
    writer cannot make it: orjson writes 255 levels)."""

    def __getattr__(self, name):
        return getattr(orjson, name)

    def dumps(self, *a, **kw):
        return orjson.dumps(*a, **kw).replace(b'"DEEP"', DEEP)


@pytest.fixture(scope="module")
def deep(tmp_path_factory):
    """Rank 1's relu with an argument, a keyword argument and value metadata nested 1,000 deep."""
    real = graph_tables.node_tables

    def tables(gm):
        t = real(gm)
        for row in t["graphs"][0]["nodes"]:
            if "relu" in str(row.get("target")):
                row["args"] = [*row["args"], "DEEP"]
                row["kwargs"] = {"k": "DEEP"}
                row["val"] = ["DEEP"]
        return t

    directory = tmp_path_factory.mktemp("deep") / "cap"
    w = CaptureWriter(directory, world_size=2)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(logformat, "orjson", _DeepDumps())
        for r in range(2):
            mp.setattr(graph_tables, "node_tables", tables if r == 1 else real)
            rw = w.rank(r, own_device="cpu", digests=r == 0)
            g0, g1, _ = _graphs(r)
            rw.apply("remove_dead_code", g0, g1)
            rw.apply("noop", g1, g1)
            rw.end()
    return w.finish()


def test_arguments_nested_1000_deep(deep, tmp_path):
    log = (open(os.path.join(deep, logformat.log_file_name(1)), "rb")).read()
    assert DEEP in log
    seen = ""
    for argv in [*_commands(deep, tmp_path), ["check", "--json", deep], ["diff", "--json", deep, "--pass", "noop"]]:
        code, out, err = _run(*argv)
        assert code in (0, 1) and "Traceback" not in err and "RecursionError" not in err, (argv, err[-3000:])
        seen += out
    cut = f"<nested deeper than {MAX_NESTING} levels: not read>"
    assert f"mm, {'[' * (MAX_NESTING - 2)}{cut}{']' * (MAX_NESTING - 2)}" in seen  # the rank diff's relu, cut
