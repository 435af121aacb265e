"""Every way of looking at a capture counts the same findings: on each bundled capture, under both
gradings (per rank and `--shared-graph`), `check --json`'s totals by severity, `check`'s headline,
the report's headline and its cards (one per finding, each with its own number), the SARIF results
and what the TUI's Findings tab counts from the `check --json` it reads. A finding is a root cause:
the findings that follow from it are its consequences, counted apart and the same everywhere
(`--json`'s summary, inside each root, SARIF's relatedLocations, `check --all`, the report's
cards and the TUI).

In one process: the checks run once per capture (`check_reports`, which tests/checks holds equal
to `check_report`) and every command is given those reports; the report's diff excerpts, which
count nothing, are left out to keep the test fast."""

from __future__ import annotations

import io
import re
from collections import Counter
from contextlib import redirect_stdout
from dataclasses import replace

import orjson
import pytest

from graphtrain_inspect.inspector import checks as checks_pkg
from graphtrain_inspect.inspector.checks import SEVERITIES, check_reports
from graphtrain_inspect.inspector.checks.severity_filter import at_least
from graphtrain_inspect.inspector.cli.html_report import contents
from graphtrain_inspect.inspector.cli.main import main
from graphtrain_inspect.inspector.read import bundled
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.tui.checks_runner import parse_report
from graphtrain_inspect.tui.widgets.findings_view import FindingsView
from tests.report.support import headlines

_CARD = re.compile(r'<article class="finding[^"]*" id="([ps])(\d+)" data-grading="([\w-]+)" data-sev="(\w+)"')
_CONSEQUENCES = re.compile(
    r'<article class="finding[^"]*" id="([ps]\d+)".*?(?:<summary>(\d+) consequences? of this finding|</article>)', re.S
)


def _copy(rep):
    """The report as the checks made it (commands change the lists they are given)."""
    return replace(rep, findings=list(rep.findings), not_run=list(rep.not_run), notes=list(rep.notes))


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        rc = main(list(argv))
    return rc, out.getvalue()


@pytest.mark.parametrize("name", bundled.names())
def test_every_surface_counts_what_check_counts(name, tmp_path, monkeypatch):
    path = str(bundled.path_of(name))
    reports = check_reports(open_capture(path), [False, True])
    by_shared = dict(zip((False, True), reports))
    monkeypatch.setattr(
        checks_pkg, "check_report", lambda cap, only=None, *, shared_graph=False, **kw: _copy(by_shared[shared_graph])
    )
    monkeypatch.setattr(checks_pkg, "check_reports", lambda cap, shared, **kw: [_copy(by_shared[s]) for s in shared])
    monkeypatch.setattr(contents.Diffs, "made", lambda self: [])

    rc, _ = _run("report", path, "-o", str(tmp_path / "r.html"), "-j", "1")
    assert rc == 0
    page = (tmp_path / "r.html").read_text()
    heads = headlines(page)
    cards = _CARD.findall(page)
    for grading, shared in (("per-rank", False), ("shared", True)):
        flags = ["--shared-graph"] if shared else []
        _, out = _run("check", path, "--json", "-j", "1", *flags)
        doc = orjson.loads(out)
        totals = {s: doc["summary"][s] for s in SEVERITIES}
        assert Counter(f["severity"] for f in doc["findings"]) == Counter({s: n for s, n in totals.items() if n})
        default = totals["error"] + totals["warning"]  # what a table shows when nobody asks for info

        # check's table and the report's headline say the same, with and without info
        _, table = _run("check", path, "-j", "1", "--color", "never", *flags)
        _, table_info = _run("check", path, "-j", "1", "--color", "never", "--severity", "info", *flags)
        head = next(l for l in reversed(table.splitlines()) if re.match(r"(\d+ findings?|no findings):", l))
        head_info = next(l for l in reversed(table_info.splitlines()) if re.match(r"(\d+ findings?|no findings):", l))
        assert heads[(grading, False)][0] == head
        assert heads[(grading, True)][0] == head_info
        assert head_info.startswith(f"{sum(totals.values())} finding" if sum(totals.values()) else "no findings")

        # one card per finding, numbered 1..N as check --json numbers them, with its own severity
        mine = [(int(n), sev) for p, n, g, sev in cards if g == grading]
        assert mine == [(i, f["severity"]) for i, f in enumerate(doc["findings"], 1)]
        assert {p for p, _, g, _ in cards if g == grading} <= {grading[0]}

        # SARIF: the findings the table shows (errors and warnings), and all of them with info
        for severity, want in ((None, default), ("info", sum(totals.values()))):
            sarif = tmp_path / f"{grading}-{severity}.sarif"
            _run(
                "check", path, "-j", "1", "--sarif", str(sarif), *flags, *(["--severity", severity] if severity else [])
            )
            assert len(orjson.loads(sarif.read_bytes())["runs"][0]["results"]) == want

        # the TUI reads `check --json` and its Findings tab counts what its severity filter lets through
        found = parse_report(out.encode()).findings
        assert len(FindingsView().visible(found)) == default == len(at_least(found, None))
        _consequences_agree(path, doc, flags, found, page, grading, tmp_path)


def _consequences_agree(path, doc, flags, found, page, grading, tmp_path) -> None:
    """Each root's consequences, counted the same in --json, check --all, SARIF, report and TUI."""
    per_root = [len(f.get("consequences") or []) for f in doc["findings"]]
    assert doc["summary"]["consequences"] == sum(per_root)
    assert [len(f.consequences) for f in found] == per_root
    for f in doc["findings"]:
        for c in f.get("consequences") or []:
            assert "consequences" not in c and set(c["ranks"]) <= set(f["ranks"])
    _, table = _run("check", path, "-j", "1", "--color", "never", "--severity", "info", "--all", *flags)
    assert len(re.findall(r"^ +consequence \d+ of \d+:", table, re.M)) == sum(per_root)
    sarif = tmp_path / f"{grading}-all.sarif"
    _run("check", path, "-j", "1", "--sarif", str(sarif), "--severity", "info", *flags)
    results = orjson.loads(sarif.read_bytes())["runs"][0]["results"]
    assert [len(r.get("relatedLocations") or []) for r in results] == per_root
    cards = {cid: int(n or 0) for cid, n in _CONSEQUENCES.findall(page)}
    assert [cards[f"{grading[0]}{i}"] for i in range(1, len(per_root) + 1)] == per_root
