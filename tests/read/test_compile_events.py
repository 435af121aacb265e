"""torch.compile's own events read from TORCH_TRACE logs: on tlparse's test corpus, every failure,
restart and graph break tlparse lists for a log is listed by `ls --json` (tlparse's list is read
from its own output on that log, run here: failures_and_restarts.html, compile_directory.json)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from graphtrain_inspect.inspector.cli.ls import listing
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.compile_events import compile_story
from tests.capture_utils import tlparse_exe
from tests.read.test_tlparse_corpus import NAMES, corpus  # noqa: F401  (the extracted corpus fixture)

# a row of tlparse's failures_and_restarts.html: <a href='...'>[0/0]</a> </td><td><pre>BackendCompilerFailed</pre>
# (failures) or ...[0/0_1]</a> </td><td> RestartAnalysis </td> (restarts)
_ROW_RE = re.compile(r"<a href='[^']*'>\[([^\]]+)\]</a>\s*</td><td>(?:<pre>)?\s*([^<]*?)\s*(?:</pre>)?</td>")


def tlparse_lists(log: Path, out: Path) -> tuple[set[tuple[str, str]], set[str], set[str]]:
    """What tlparse lists for a log: (failure/restart rows as (label, type), compile ids with a
    graph break reason, compile ids in its stack trie)."""
    r = subprocess.run(
        [tlparse_exe(), str(log), "-o", str(out), "--no-browser", "--overwrite"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    rows = set(_ROW_RE.findall((out / "failures_and_restarts.html").read_text()))
    directory = json.loads((out / "compile_directory.json").read_text())
    breaks = {
        re.sub(r"_\d+$", "", k.strip("[]"))
        for k, v in directory.items()
        for a in v.get("artifacts", [])
        if a["name"].startswith("dynamo_graph_break_reason")
    }
    trie = set(re.findall(r"<a href='#\[([^\]]+)\]'", (out / "index.html").read_text()))
    return rows, breaks, trie


def ls_lists(doc: dict) -> tuple[set[tuple[str, str]], set[str], set[str]]:
    """The same three lists from `ls --json` (every rank of the log)."""
    rows, breaks, trie = set(), set(), set()
    for rank in doc["ranks"]:
        c = rank.get("compile") or {"events": [], "trie": []}
        for e in c["events"]:
            if e["kind"] == "failure":
                rows.add((e["label"].strip("[]"), e["fail_type"]))
            elif e["kind"] == "restart":
                rows.add((e["label"].strip("[]"), "RestartAnalysis"))
            elif e["kind"] == "break":
                breaks.add(e["compile_id"])
        trie.update(cid for t in c["trie"] for cid in t["compile_ids"])
    return rows, breaks, trie


@pytest.mark.parametrize("name", NAMES)
def test_every_failure_restart_and_break_tlparse_lists_is_in_ls_json(corpus, tmp_path, name):  # noqa: F811
    rows, breaks, trie = tlparse_lists(corpus / name, tmp_path / "tl")
    with open_capture(str(corpus / name)) as cap:
        doc = json.loads(json.dumps(listing(cap)))
        assert [str(e) for e in cap.all_errors()] == []  # reading compile events reports nothing as damaged
    got_rows, got_breaks, got_trie = ls_lists(doc)
    assert rows <= got_rows, (name, rows - got_rows)
    assert breaks <= got_breaks, (name, breaks - got_breaks)
    assert trie <= got_trie, (name, trie - got_trie)


def test_the_corpus_has_failures_and_restarts_to_find(corpus, tmp_path):  # noqa: F811
    """The test above is not empty: tlparse lists failures and restarts on several corpus logs."""
    found = [tlparse_lists(corpus / n, tmp_path / str(i))[0] for i, n in enumerate(NAMES)]
    kinds = {t for rows in found for _, t in rows}
    assert {"BackendCompilerFailed", "RestartAnalysis"} <= kinds


def test_failure_fields_from_the_corpus(corpus):  # noqa: F811
    with open_capture(str(corpus / "comp_failure.log")) as cap:
        story = compile_story(cap)
        (fail,) = story.events(kinds=("failure",))
        assert fail.fail_type == "BackendCompilerFailed" and "broken backend" in fail.reason
        assert fail.fell_back is not None
        assert story.compile(0, fail.compile_id).status == "failed"
