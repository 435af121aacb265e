"""cache-shared-code: ranks that compiled different code under one FX graph cache key, on
hand-made logs of two ranks and on real captures of tests/programs/cache_rank_offset.py (which
models pytorch/pytorch#188332: Inductor's all-gather bucketing wrote `512 * rank` into the packed
buffer's offset after the FX graph cache key was taken; the fix keys the cache by rank)."""

from __future__ import annotations

import json

import pytest

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.inspector.checks import run_checks
from graphtrain_inspect.inspector.read.capture_index import open_capture
from tests.capture_utils import capture, payloads, run_cli, torchrun
from tests.read.output_code_logs import wrapper

KIND = "cache-shared-code"


def _log(tmp_path, rank: int, codes: list[tuple[str, dict]], group: str | None = None) -> None:
    header = {
        "format": logformat.FORMAT_NAME,
        "format_version": logformat.FORMAT_VERSION,
        "rank": rank,
        "local_rank": rank,
        "world_size": 2,
        "pid": 1 + rank,
        "host": "h",
        "user": "u",
        "argv": [],
        "torch_version": "2.13",
        "python": "3",
        "time": 0.0,
        "sources": ["inductor"],
        "blobs": False,
    }
    data = logformat.encode_record(logformat.HEADER, header, rank=rank)
    if group is not None:  # the rank's own process group, named differently on each rank
        ranks = {"rank": rank, "world_size": 2, "backend": "nccl", "groups": {group: {"ranks": [rank], "desc": "tp"}}}
        data += logformat.encode_record(logformat.RANKS, ranks, rank=rank)
    for i, (code, extra) in enumerate(codes):
        oid = f"o{rank}{i}"
        link = {"oid": oid, "graph": None, "compile_id": f"{i}/0", "kernels": {}, **extra}
        data += logformat.encode_record(logformat.OUTPUT_CODE, code, rank=rank, meta={"oid": oid})
        data += logformat.encode_record(logformat.CODEGEN, link, rank=rank, meta={"oid": oid})
    (tmp_path / logformat.log_file_name(rank)).write_bytes(data)


def _found(tmp_path):
    return [f for f in run_checks(open_capture(str(tmp_path))) if f.kind == KIND]


def test_different_code_under_one_key_is_an_error_naming_the_key_and_ranks(tmp_path):
    for r in (0, 1):
        _log(tmp_path, r, [(wrapper(f"{r + 3}.0", n=r), {"cache_key": "fkey"})])
    (f,) = _found(tmp_path)
    assert (f.severity, f.ranks, f.layer) == ("error", [0, 1], "codegen")
    assert f.message.startswith("rank 1 would run rank 0's code from a shared cache")
    ev = f.evidence
    assert ev["cache_key"] == "fkey" and ev["differing_ranks"] == [1] and ev["output_code"] == {"0": "o00", "1": "o10"}
    # no graphs to compare: blamed on Inductor's lowering, and the literal is the rank's (rank + 3)
    assert ev["pass"] == "inductor_codegen" and any("4.0" in l for l in ev["code_diff"])
    assert ev["rank_literals"][0]["values"] == {"0": 3.0, "1": 4.0}
    # a difference no rank explains (a tuning choice): said, as info
    other = tmp_path / "tuned"
    other.mkdir()
    for r in (0, 1):
        _log(other, r, [(wrapper(("16.0", "8.0")[r], n=r), {"cache_key": "fkey"})])
    (f,) = _found(other)
    assert f.severity == "info" and "no rank-derived value" in f.message and "rank_literals" not in f.evidence


def test_a_key_under_which_one_rank_compiled_two_codes_compares_nothing(tmp_path):
    """Seen on torch 2.14.1 (FSDP2 with a recompile): one rank filed two different codes under one
    key, so the key does not determine the code and two ranks' codes under it prove no sharing."""
    from graphtrain_inspect.inspector.checks import check_report

    for r in (0, 1):
        _log(tmp_path, r, [(wrapper("3.0", n=r), {"cache_key": "fkey"}), (wrapper("5.0", n=r), {"cache_key": "fkey"})])
    report = check_report(open_capture(str(tmp_path)))
    assert [f for f in report.findings if f.kind == KIND] == []
    assert any("held two different codes on rank 0 itself" in n for n in report.notes)


def test_same_code_other_keys_no_keys_and_comments_are_quiet(tmp_path):
    cases = {
        # the same code under one key (kernel names normalized): what sharing is for
        "same": [(wrapper("3.0", n=0), {"cache_key": "fkey"}), (wrapper("3.0", n=1), {"cache_key": "fkey"})],
        # rank-specific code under keys of its own: the fix
        "keyed": [(wrapper("3.0"), {"cache_key": "fa"}), (wrapper("4.0"), {"cache_key": "fb"})],
        # a capture from before the keys, or a graph torch would not cache
        "none": [(wrapper("3.0"), {}), (wrapper("4.0"), {"cache_bypass": "unsupported"})],
        # Inductor copies FX node text into comments: sharing them changes nothing that runs
        "comment": [
            (wrapper("3.0"), {"cache_key": "fkey"}),
            (
                wrapper("3.0").replace("async_compile.wait", "# rank 1's note\nasync_compile.wait"),
                {"cache_key": "fkey"},
            ),
        ],
    }
    for name, per_rank in cases.items():
        d = tmp_path / name
        d.mkdir()
        for r, code in enumerate(per_rank):
            _log(d, r, [code])
        assert _found(d) == [], name
    # each rank's own device and its own group's name: the same code once normalized
    d = tmp_path / "own"
    d.mkdir()
    for r in (0, 1):
        _log(d, r, [(wrapper("3.0", n=r, cuda_dev=r, group=str(3 + r)), {"cache_key": "fkey"})], group=str(3 + r))
    assert _found(d) == []


# -- real captures: the bug and its fix ---------------------------------------------------------


def _capture(tmp_path_factory, *args: str):
    out = tmp_path_factory.mktemp("cache") / "cap"
    r = capture(
        out,
        torchrun(2, "tests.programs.cache_rank_offset", *args),
        timeout=600,
        env={"TORCHINDUCTOR_COMPILE_THREADS": "1"},  # no worker pool: less to start on 2 cores
    )
    assert r.returncode == 0, r.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def bug(tmp_path_factory):
    return _capture(tmp_path_factory)


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    return _capture(tmp_path_factory, "--fixed")


def _keys(out) -> dict[int, list[str]]:
    return {r: [p["cache_key"] for p in payloads(out / logformat.log_file_name(r), logformat.CODEGEN)] for r in (0, 1)}


def _check(out, *opts: str):
    r = run_cli("check", str(out), "--json", *opts)
    return r.returncode, json.loads(r.stdout)["findings"]


@pytest.mark.slow
def test_the_bug_compiles_rank_specific_code_under_one_key(bug):
    keys = _keys(bug)
    assert len(keys[0]) == 1 and keys[0] == keys[1] and keys[0][0].startswith("f")
    code, findings = _check(bug)
    assert code == 1
    (f,) = [f for f in findings if f["kind"] == KIND]
    ev = f["evidence"]
    assert f["severity"] == "error" and f["ranks"] == [0, 1] and f["layer"] == "codegen"
    assert f["message"].startswith("rank 1 would run rank 0's code from a shared cache")
    assert ev["cache_key"] == keys[0][0] and ev["differing_ranks"] == [1]
    # the pass that wrote the rank after the key was taken, and what it wrote
    assert f["introduced_by"] == ev["pass"] == "post_grad_custom_post_pass" in f["message"]
    assert f["node"] == "slice_1" and any("0 -> 512" in l for l in ev["graph_differences"])
    assert any("512L + x0" in l for l in ev["code_diff"])
    # the literal itself: each rank's own chunk of the packed buffer (512 * rank), right in code each
    # rank compiled for itself (info); what makes it a bug is the key the ranks share, above
    baked = [(x["severity"], x["introduced_by"]) for x in findings if x["kind"] == "rank-baked-constant"]
    assert ("info", "post_grad_custom_post_pass") in baked and {s for s, _ in baked} == {"info"}


@pytest.mark.slow
def test_the_fix_keys_each_rank_apart_and_is_quiet(fixed):
    keys = _keys(fixed)
    assert len(keys[0]) == len(keys[1]) == 1 and keys[0] != keys[1]
    code, findings = _check(fixed)
    assert code == 0
    assert [f for f in findings if f["severity"] in ("error", "warning")] == []
    baked = [f for f in findings if f["kind"] == "rank-baked-constant"]
    assert {f["severity"] for f in baked} == {"info"}
    assert any(f["introduced_by"] == "post_grad_custom_post_pass" for f in baked)
    # graphs that will be loaded elsewhere: the rank literal is wrong there, whatever the key
    code, shared = _check(fixed, "--shared-graph")
    assert code == 1 and any(f["kind"] == "rank-baked-constant" and f["severity"] == "error" for f in shared)
    assert not [f for f in shared if f["kind"] == KIND]
