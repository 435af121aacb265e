"""torch.compile's own story where a user looks (`ls`, `ls --json`, `check --json`), on real runs:

* the four-event program (tests/programs/compile_events.py: a print() break, a data-dependent
  break, a shape recompile, a fullgraph=True failure) under TORCH_TRACE: every failure, restart,
  break and stack-trie entry tlparse shows for its log is there, with its reason and line, and
  `check` reports the failure as an error, the breaks as warnings, the recompiles as info;
* (slow: torchrun) 2 gloo ranks where only rank 1 recompiles (tests/programs/rank_recompile.py --divergent),
  captured with --torch-trace: exactly one rank-divergent-compile error; its twin (no rank
  recompiles): none. Rank 1's recompile starts from the very graph of its first compile: its
  Inductor passes and generated code are filed under compile 0/1, not 0/0.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.output_code import output_codes, pipeline_of
from tests.capture_utils import run_cli, torchrun
from tests.read.test_compile_events import ls_lists, tlparse_lists

# tlparse's failure row, all four cells: label, type, description, source (file:line)
_FAIL_ROW_RE = re.compile(
    r"\[([^\]]+)\]</a>\s*</td><td><pre>([^<]*)</pre></td>\s*<td><pre>.*?</pre></td>\s*<td><pre>([^<]*):(\d+)</pre></td>",
    re.S,
)


@pytest.fixture
def four_events(compile_events_trace) -> Path:
    return compile_events_trace


def test_four_events_ls_json_lists_all_tlparse_lists(four_events, tmp_path):
    log = next(four_events.glob("*.log"))
    rows, breaks, trie = tlparse_lists(log, tmp_path / "tl")
    assert {t for _, t in rows} == {"RestartAnalysis", "Unsupported"} and breaks and trie  # the program makes them all
    r = run_cli("ls", str(four_events), "--json")
    assert r.returncode == 0, r.stderr
    got_rows, got_breaks, got_trie = ls_lists(json.loads(r.stdout))
    assert rows <= got_rows and breaks <= got_breaks and trie <= got_trie


def test_four_events_check_json_has_each_with_reason_and_line(four_events, tmp_path):
    log = next(four_events.glob("*.log"))
    tl = tmp_path / "tl"
    tlparse_lists(log, tl)
    failures = {
        (label, t, Path(f).name, int(line))
        for label, t, f, line in _FAIL_ROW_RE.findall((tl / "failures_and_restarts.html").read_text())
    }
    assert failures  # the fullgraph=True failure, with its source line
    break_lines = set()
    for p in tl.rglob("dynamo_graph_break_reason_*.txt"):
        m = re.search(r"Graph break in user code at (.+):(\d+)", p.read_text())
        _, frame, compile_, _attempt = p.parent.name.split(
            "_"
        )  # tlparse's directory of compile 0/1 attempt 0: "-_0_1_0"
        break_lines.add((f"{frame}/{compile_}", Path(m.group(1)).name, int(m.group(2))))
    r = run_cli("check", str(four_events), "--json")
    assert r.returncode == 1, r.stderr  # the failed compile is an error
    findings = json.loads(r.stdout)["findings"]
    got_fail = {
        (
            f["evidence"]["label"].strip("[]"),
            f["evidence"]["fail_type"],
            Path(f["source"]["file"]).name,
            f["source"]["line"],
        )
        for f in findings
        if f["kind"] == "compile-failure"
    }
    assert failures <= got_fail
    fail = next(f for f in findings if f["kind"] == "compile-failure")
    assert (
        fail["severity"] == "error"
        and "fullgraph=True" in fail["message"]
        and "Data-dependent branching" in fail["message"]
    )
    assert fail["source"]["code"] == "if y.sum() > 0:"
    got_breaks = {
        (f["evidence"]["compile_id"], Path(f["source"]["file"]).name, f["source"]["line"])
        for f in findings
        if f["kind"] == "graph-break"
    }
    assert break_lines <= got_breaks, (break_lines, got_breaks)
    assert {f["severity"] for f in findings if f["kind"] == "graph-break"} == {"warning"}
    assert {f["source"]["code"] for f in findings if f["kind"] == "graph-break"} == {
        'print("inside f")',
        "if x.sum() > 0:",
    }
    assert all(
        f["evidence"]["resume"].startswith("torch_dynamo_resume_in_") for f in findings if f["kind"] == "graph-break"
    )
    rec = [f for f in findings if f["kind"] == "recompile"]
    assert rec and {f["severity"] for f in rec} == {"info"} and all("rank mismatch" in f["message"] for f in rec)
    assert not [f for f in findings if f["kind"] == "rank-divergent-compile"]  # one rank


def test_four_events_ls_text_shows_the_failed_compile(four_events):
    r = run_cli("ls", str(four_events))
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "compile events:" in text and "1 failure" in text and "graph break" in text
    assert re.search(
        r"\[4/0\]\s+failure\s+tests/programs/compile_events.py:33\s+if y.sum\(\) > 0:\s+Unsupported: "
        r"Data-dependent branching",
        text,
    )
    assert "(resumes in torch_dynamo_resume_in_f_at_19)" in text


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    caps = {}
    for name, extra in (("divergent", ["--divergent"]), ("twin", ["--backend", "aot_eager"])):
        out = tmp_path_factory.mktemp("rank_recompile") / name
        r = run_cli(
            "capture",
            "--out",
            str(out),
            "--torch-trace",
            "--",
            *torchrun(2, "tests.programs.rank_recompile", *extra),
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-4000:]
        caps[name] = out
    return caps


@pytest.mark.slow
def test_only_rank1_recompiles_is_one_rank_divergent_compile_error(two_ranks):
    r = run_cli("check", str(two_ranks["divergent"]), "--json")
    assert r.returncode == 1, r.stderr
    div = [f for f in json.loads(r.stdout)["findings"] if f["kind"] == "rank-divergent-compile"]
    assert len(div) == 1 and div[0]["severity"] == "error"
    assert (
        "[0/1]" in div[0]["message"]
        and "mode == 'warmup'" in div[0]["message"]
        and "rank 0: no compile [0/1]" in div[0]["message"]
    )
    assert div[0]["evidence"]["divergent_ranks"] == [1]


@pytest.mark.slow
def test_rank1_recompiling_alone_is_an_error_without_torch_logs(two_ranks, tmp_path):
    """The capture's own compile ids say it (the same capture without torch's logs, as a capture
    made without --torch-trace is): exactly the rank-divergent-compile error, and nothing taken
    for compile on one rank (no device-baked or shared-graph finding)."""
    import shutil

    out = tmp_path / "divergent"
    shutil.copytree(two_ranks["divergent"], out, ignore=shutil.ignore_patterns("torch_trace"))
    r = run_cli("check", str(out), "--json")
    assert r.returncode == 1, r.stdout[-3000:]
    doc = json.loads(r.stdout)
    found = [(f["kind"], f["severity"], f["ranks"]) for f in doc["findings"] if f["severity"] != "info"]
    assert found == [("rank-divergent-compile", "error", [0, 1])]
    assert "rank 0: no compile [0/1]" in doc["findings"][0]["message"]
    assert not any("compile on one rank" in n for n in doc["summary"]["notes"])
    assert "compile-failure" in json.dumps(doc["summary"]["not_run"])  # breaks and failures: torch's logs only


@pytest.mark.slow
def test_twin_has_no_rank_divergent_compile(two_ranks):
    r = run_cli("check", str(two_ranks["twin"]), "--json", "--severity", "info")
    assert r.returncode == 0, r.stdout[-3000:]
    findings = json.loads(r.stdout)["findings"]
    assert not [
        f for f in findings if f["kind"] in ("rank-divergent-compile", "recompile", "graph-break", "compile-failure")
    ]


@pytest.mark.slow
def test_recompile_from_the_same_graph_keeps_its_passes(two_ranks):
    with open_capture(str(two_ranks["divergent"])) as cap:
        pls = cap.pipelines(1)
        firsts = {cid: next(p for p in pls if p.passes[0].compile_id == cid) for cid in ("0/0", "0/1")}
        # the condition under test: both compiles start from the same graph
        assert firsts["0/0"].traced == firsts["0/1"].traced
        for pl in pls:
            assert len({p.compile_id for p in pl.passes}) == 1, [(p.seq, p.name, p.compile_id) for p in pl.passes]
        assert sum(1 for pl in pls if pl.passes[0].compile_id == "0/1") == sum(
            1 for pl in pls if pl.passes[0].compile_id == "0/0"
        )
        for oc in output_codes(cap, 1):
            assert {p.compile_id for p in pipeline_of(cap, oc).passes} == {oc.compile_id}


def _metrics_log(directory: Path, restart_reasons: list[str]) -> Path:
    """A one-compile TORCH_TRACE log whose `compilation_metrics` lists these restarts (attempt 1)."""
    env = {
        "compilation_metrics": {
            "co_name": "step",
            "co_filename": "/src/train.py",
            "co_firstlineno": 10,
            "graph_op_count": 4,
            "restart_reasons": restart_reasons,
        },
        "rank": 0,
        "frame_id": 0,
        "frame_compile_id": 0,
        "attempt": 1,
    }
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "dedicated_log_torch_trace_rank_0_abc.log"
    path.write_text(f"V1124 03:04:38.336000 4242 torch/_dynamo/utils.py:1] {json.dumps(env)}\n")
    return path


def test_torchs_own_retrace_is_not_a_graph_break(tmp_path):
    """Compiler collectives (`torch._dynamo.config.enable_compiler_collectives`) trace a frame, share
    its dynamic-shape decisions across ranks and trace it again: torch raises
    `CompileCollectiveRestartAnalysis` (no `restart_reason`, so `str(type(e))` is logged) on every
    rank of a correct job. A restart nothing else explains is still a break."""
    from graphtrain_inspect.inspector.checks import run_checks

    own = "<class 'torch._dynamo.exc.CompileCollectiveRestartAnalysis'>"
    _metrics_log(tmp_path / "own", [own])
    assert [f for f in run_checks(open_capture(str(tmp_path / "own"))) if f.kind == "graph-break"] == []
    _metrics_log(tmp_path / "break", ["Graph break due to unsupported builtin print"])
    (f,) = [f for f in run_checks(open_capture(str(tmp_path / "break"))) if f.kind == "graph-break"]
    assert f.severity == "warning" and "print" in f.message
