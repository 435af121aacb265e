"""`check` says what it looked at ("no findings" says over what), and lists
findings in FX's naming order (ge, ge_1, ge_2, ..., ge_10)."""

from __future__ import annotations

import json
import re

from graphtrain_inspect.inspector.checks import CHECKS, Finding, sort_key
from graphtrain_inspect.inspector.cli.main import main

LINE = re.compile(
    r"^checked: (\d+) checks? over (\d+) ranks? x (\d+(?:-\d+)?) pass(?:es)? \(([\d,]+) graphs?"
    r"(?:, ([\d,]+) symbol uses?)?\)(?:; not run: (.+))?$"
)


def _run(capsys, *args):
    code = main(list(args))
    return code, capsys.readouterr().out


def test_checked_line_agrees_with_ls_and_the_json_summary(bundled_capture, capsys):
    path = str(bundled_capture("h200x2-stale-symbol"))
    code, out = _run(capsys, "check", path)
    lines = [l for l in out.splitlines() if l.startswith("checked:")]
    assert len(lines) == 1 and out.splitlines()[-1] != lines[0], out  # before the counts line
    m = LINE.match(lines[0])
    assert m, lines[0]
    _, listing = _run(capsys, "ls", path, "--json")
    ranks = json.loads(listing)["ranks"]
    _, report = _run(capsys, "check", path, "--json")
    summary = json.loads(report)["summary"]
    not_run = {c for n in summary["not_run"] for c in n["check"].split(", ")}
    assert int(m.group(1)) == len([c for c in CHECKS if c not in not_run])
    assert int(m.group(2)) == len(ranks) == len(summary["ranks"])
    assert m.group(3) == str(len(ranks[0]["passes"])) and all(
        len(r["passes"]) == len(ranks[0]["passes"]) for r in ranks
    )
    assert int(m.group(4).replace(",", "")) == sum(r["graphs"] for r in ranks)
    assert int(m.group(5).replace(",", "")) > 0  # the stale-symbol check walked the symbol maps
    assert m.group(6) == ", ".join(n["check"] for n in summary["not_run"])


def test_only_the_checks_asked_for_are_counted(bundled_capture, capsys):
    _, out = _run(capsys, "check", str(bundled_capture("h200x2-rank-baked")), "--check", "rank-baked-constant")
    m = LINE.match(next(l for l in out.splitlines() if l.startswith("checked:")))
    assert m.group(1) == "1" and m.group(5) is None  # no symbol walk without the stale-symbol check


def test_findings_list_node_names_in_naming_order():
    names = ["ge_10", "ge", "ge_2", "ge_1", "ge_11", "ge_9"]
    found = sorted((Finding("rank-baked-constant", "info", "m", node=n) for n in names), key=sort_key)
    assert [f.node for f in found] == ["ge", "ge_1", "ge_2", "ge_9", "ge_10", "ge_11"]


def test_the_capture_counts_symbol_uses_in_the_envelope(sample_capture):
    """The summary line takes each map's uses from its envelope (`uses`) where the capture wrote
    it: there it is the sum the decoded map gives."""
    from graphtrain_inspect.capture.shared import logformat
    from graphtrain_inspect.inspector.checks import coverage
    from graphtrain_inspect.inspector.read.capture_index import open_capture
    from graphtrain_inspect.samples.bugs import ALL as ALL_BUGS

    with open_capture(str(sample_capture(*ALL_BUGS))) as cap:
        counted = 0
        for r in cap.ranks:
            for gid in cap.graphs(r):
                rec = cap.graph_record(r, gid, logformat.SYMBOLS)
                decoded = sum(s["uses"] for s in (cap.symbols(r, gid) or {}).get("symbols", {}).values())
                assert rec is not None and rec.meta.get("uses") == decoded == coverage._symbol_uses(cap, r, gid)
                counted += decoded
        assert counted > 0
