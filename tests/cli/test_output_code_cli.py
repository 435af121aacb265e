"""`ls` and `diff --output-code` on hand-made TORCH_TRACE logs with generated code."""

from __future__ import annotations

import json

from tests.capture_utils import run_cli
from tests.read.output_code_logs import post_grad, torch_log, wrapper


def _two_ranks(tmp_path):
    for r in (0, 1):
        torch_log(
            tmp_path,
            r,
            [
                {"graph": post_grad(str(r + 3)), "code": wrapper(f"{r + 3}.0", n=r)},
                {"graph": post_grad("7"), "code": wrapper("7.0", n=r + 1, aot=1)},
            ],
        )
    return tmp_path


def test_ls_shows_generated_code_as_the_last_stage(tmp_path):
    r = run_cli("ls", str(_two_ranks(tmp_path)), "--color", "never")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    i = next(k for k, l in enumerate(lines) if "inductor codegen" in l)
    assert (
        "generated code, 1 kernel" in lines[i] and "inductor_post_grad_graph" in lines[i - 1]
    )  # the post-grad graph it was made from, then its code
    doc = json.loads(run_cli("ls", str(tmp_path), "--json").stdout)
    assert [len(e["output_code"]) for e in doc["ranks"]] == [2, 2]
    assert (
        doc["ranks"][0]["output_code"][0]["kernels"] == 1 and doc["ranks"][0]["output_code"][0]["compile_id"] == "0/0"
    )


def test_diff_output_code_across_ranks_and_compiles(tmp_path):
    _two_ranks(tmp_path)
    doc = json.loads(run_cli("diff", str(tmp_path), "--output-code", "--ranks", "0,1", "--json").stdout)
    assert [d["empty"] for d in doc["diffs"]] == [False, True]
    assert [l for l in doc["diffs"][0]["diff"] if l[:1] in "+-" and l[:3] not in ("+++", "---")] == [
        "-        auto tmp4 = static_cast<float>(3.0);",
        "+        auto tmp4 = static_cast<float>(4.0);",
    ]
    r = run_cli("diff", str(tmp_path), "--output-code", "--compiles", "0/0,1/0", "--rank", "1", "--color", "never")
    assert r.returncode == 0 and "static_cast<float>(7.0)" in r.stdout and "static_cast<float>(4.0)" in r.stdout


def test_bad_requests_are_one_line(tmp_path):
    _two_ranks(tmp_path)
    for args in (
        ["--output-code", "--ranks", "0,5"],
        ["--output-code", "--compiles", "0/0,9/9"],
        ["--output-code", "--ranks", "x"],
        [],
    ):
        r = run_cli("diff", str(tmp_path), *args)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, (
            args,
            r.stderr,
        )
