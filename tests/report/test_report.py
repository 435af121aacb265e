"""`graphtrain-inspect report`: one self-contained page whose counts are `check`'s, under both
gradings and with or without info findings; capture text escaped; bad input in one line."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser

import pytest

from graphtrain_inspect.inspector.cli.html_report import excerpts
from tests.capture_utils import run_cli
from tests.report.support import HTML_HOSTILE, check_lines, headlines, html_hostile_capture, write_report
from tests.tui_support import HOSTILE, hostile_capture

PLANTED = ["h200x2-rank-divergent", "h200x2-rank-baked", "h200x2-stale-symbol", "h200x2-codegen-coor"]


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def tags_of(page: str) -> list[tuple[str, dict]]:
    p = Tags()
    p.feed(page)
    return p.tags


def _strip_how(more: str | None) -> str | None:
    return more.split(" (")[0] if more else None


@pytest.mark.parametrize("name", PLANTED)
def test_counts_equal_check_under_both_gradings(bundled_capture, tmp_path, name):
    cap = bundled_capture(name)
    page = write_report(cap, tmp_path / "r.html").read_text()
    heads = headlines(page)
    assert set(heads) == {(g, i) for g in ("per-rank", "shared") for i in (False, True)}
    for grading, flags in (("per-rank", []), ("shared", ["--shared-graph"])):
        head, more = check_lines(cap, *flags)
        assert heads[(grading, False)][0] == head
        assert _strip_how(heads[(grading, False)][1]) == _strip_how(more)
        head_info, _ = check_lines(cap, "--severity", "info", *flags)
        assert heads[(grading, True)] == (head_info, None)


def test_the_planted_bug_is_a_finding_with_its_diffs(bundled_capture, tmp_path):
    cap = bundled_capture("h200x2-rank-divergent")
    page = write_report(cap, tmp_path / "r.html").read_text()
    # the ranks' collectives agree: info per rank, an error where the graph is shared
    found = re.finditer(r'<article class="finding sev-(\w+)" id="\w+" data-grading="([\w-]+)".*?</article>', page, re.S)
    cards = {
        (m.group(2), m.group(1)): m.group(0)
        for m in found
        if "rank-divergent-graph" in m.group(0) and "tag_activation_checkpointing" in m.group(0)
    }
    assert set(cards) == {("per-rank", "info"), ("shared", "error")}
    card = cards[("per-rank", "info")]
    assert "mul_3" in card
    # the repro command numbers it as check --json does
    listed = json.loads(run_cli("check", str(cap), "--json", "-j", "1").stdout)["findings"]
    n = next(i for i, f in enumerate(listed, 1) if f["kind"] == "rank-divergent-graph")
    repro = re.search(r"reproduces it with torch alone: <code>([^<]*)</code>", card).group(1)
    assert html.unescape(repro).endswith(f"--finding {n} -o repro-{n}")
    # a bundled capture is named as the user names it, not by its place in the cache
    assert html.unescape(repro).startswith("graphtrain-inspect repro --sample h200x2-rank-divergent ")
    assert "<code>--sample h200x2-rank-divergent</code>" in page and "graphtrain-inspect/captures" not in page
    links = re.findall(r'<a href="#([\w-]+)">([^<]+)</a>', card)
    assert [label for _, label in links] == ["pass diff on rank 0", "rank diff 0 vs 1"]
    for did, _ in links:
        section = re.search(rf'<section class="diff" id="{did}">(.*?)</section>', page, re.S).group(1)
        assert "mul_3" in html.unescape(re.sub(r"<[^>]+>", "", section))
    # the grid cell of rank 1 at the pass links to the same rank diff, graded as its finding is
    cell = re.search(
        r'<td class="cell differs" data-rank="1" data-stage="tag_activation_checkpointing" '
        r'data-sev-per-rank="info" data-sev-shared="error"[^>]*>(.*?)</td>',
        page,
    )
    assert cell and f'href="#{links[1][0]}"' in cell.group(1)
    # the ranks' other differences hold no finding: no colour of their own
    assert re.search(r'<td class="cell differs" data-rank="1" data-stage="chunk_expert_tokens"', page)


def test_generated_code_excerpt_marks_the_kernel_line(bundled_capture, tmp_path):
    page = write_report(bundled_capture("h200x2-codegen-coor"), tmp_path / "r.html").read_text()
    cards = re.findall(r'<article class="finding sev-error".*?</article>', page, re.S)
    card = next(c for c in cards if "device-baked" in c)  # after the run's failure (training-failed)
    assert "generated code on rank 0" in card
    marked = re.search(r'<span class="hll">(.*?)</span>\n', card, re.S)
    assert marked and "DeviceProperties" in html.unescape(re.sub(r"<[^>]+>", "", marked.group(1)))


def test_self_contained(bundled_capture, tmp_path):
    page = write_report(bundled_capture("h200x2-rank-baked"), tmp_path / "r.html").read_text()
    for tag, attrs in tags_of(page):
        assert tag != "link" and "src" not in attrs, (tag, attrs)
        href = attrs.get("href")
        assert href is None or href.startswith("#"), href
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


@pytest.mark.parametrize("maker, texts", [(html_hostile_capture, HTML_HOSTILE), (hostile_capture, HOSTILE)])
def test_capture_text_is_escaped(tmp_path, maker, texts):
    cap = tmp_path / "cap"
    maker(cap)
    page = write_report(cap, tmp_path / "r.html").read_text()
    tags = tags_of(page)
    # the page's own elements only: one script, no image, the compile-time picture's svg alone, no event handler
    assert [t for t, _ in tags].count("script") == 1
    assert not [t for t, _ in tags if t in ("img", "i", "b")]
    assert [a.get("class") for t, a in tags if t == "svg"] in ([], ["timeline"])
    assert not [a for _, attrs in tags for a in attrs if a.startswith("on")]
    text = html.unescape(page)
    for value in (texts["pass"], texts["pass2"]):
        assert value in text  # shown, as text
    if texts is HTML_HOSTILE:
        assert "window.pwned=1</script>" not in page and "&lt;/script&gt;&lt;script&gt;window.pwned=1" in page


def test_bad_capture_is_one_line(tmp_path):
    r = run_cli("report", str(tmp_path / "nowhere"), "-o", str(tmp_path / "r.html"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "nowhere" in r.stderr
    assert not (tmp_path / "r.html").exists()


def test_unwritable_output_is_one_line(tui_small_capture, tmp_path):
    r = run_cli("report", str(tui_small_capture), "-o", str(tmp_path / "no" / "such" / "r.html"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "cannot write the report" in r.stderr


def test_excerpts_are_bounded():
    long_diff = ["--- a", "+++ b"] + [l for i in range(500) for l in (f"@@ -{i} +{i} @@", f"-x{i} = 1", f"+x{i} = 2")]
    lines, skipped = excerpts.elide_diff(long_diff)
    assert len(lines) <= 2 + 3 * excerpts.MAX_HUNKS and skipped == 500 - excerpts.MAX_HUNKS
    lines, skipped = excerpts.elide_diff(long_diff, ["x250"])
    assert lines == ["--- a", "+++ b", "@@ -250 +250 @@", "-x250 = 1", "+x250 = 2"] and skipped == 499
    code = [f"y{i} = f(y{i - 1})" + "#" * 1000 for i in range(10_000)]
    got, first = excerpts.window(code, ["y5000"])
    assert first == 5000 - excerpts.AROUND + 1 and len(got) == 2 * excerpts.AROUND + 1
    assert max(map(len, got)) == excerpts.MAX_WIDTH


def test_each_diff_names_the_command_that_shows_it_whole(bundled_capture, tmp_path):
    import shlex

    page = write_report(bundled_capture("h200x2-rank-divergent"), tmp_path / "r.html").read_text()
    section = re.search(
        r'<section class="diff" id="rd-\d+-0-1">\s*<h3>tag_activation_checkpointing .*?</section>', page, re.S
    ).group(0)
    command = html.unescape(re.search(r"in a terminal: <code>([^<]*)</code>", section).group(1))
    args = shlex.split(command)
    assert args[:2] == ["graphtrain-inspect", "diff"]
    r = run_cli(*args[1:], "--color", "never")
    assert r.returncode == 0 and "~ mul_3: recompute" in r.stdout


def test_output_dir_holds_the_whole_graphs(bundled_capture, tmp_path):
    out = tmp_path / "shared"
    r = run_cli("report", str(bundled_capture("h200x2-rank-divergent")), "-o", f"{out}/", "-j", "1")
    assert r.returncode == 0 and (out / "report.html").is_file(), r.stderr
    page = (out / "report.html").read_text()
    files = [a["href"] for t, a in tags_of(page) if t == "a" and not a.get("href", "#").startswith("#")]
    assert files and all(f.startswith("graphs/r") and (out / f).is_file() for f in files)
    # the rank diff of the planted pass links both ranks' whole graphs; rank 1's recomputes mul_3
    section = re.search(
        r'<section class="diff" id="rd-\d+-0-1">\s*<h3>tag_activation_checkpointing .*?</section>', page, re.S
    ).group(0)
    rank1 = [a["href"] for t, a in tags_of(section) if t == "a" and a["href"].startswith("graphs/r1-")]
    assert rank1 and "mul_3_recomputed" in (out / rank1[0]).read_text()


def test_torch_trace_logs_with_their_compile_events(compile_events_trace, tmp_path):
    page = write_report(compile_events_trace, tmp_path / "r.html").read_text()
    head, more = check_lines(compile_events_trace)
    assert headlines(page)[("per-rank", False)][0] == head
    events = re.search(r'<h2 id="events">.*?</table>', page, re.S).group(0)
    rows = re.findall(r"<tr><td>(\d+)</td><td>([^<]*)</td><td>(\w+)</td>", events)
    kinds = [k for _, _, k in rows]
    # the program's two breaks, two restarts, two recompiles and one failure, on its one rank
    assert {r for r, _, _ in rows} == {"0"} and all(
        kinds.count(k) >= n for k, n in (("break", 2), ("restart", 2), ("recompile", 2), ("failure", 1))
    )
    assert ("0", "[4/0]", "failure") in rows


def test_compile_picture_is_bounded_and_keeps_every_pass():
    """30,000 passes on a rank draw as a few hundred spans (those closer than a pixel as one, its
    tooltip counting them); a raised pass stays a span of its own; a capture with no times has
    no picture."""
    from types import SimpleNamespace

    from graphtrain_inspect.inspector.cli.html_report import timeline
    from graphtrain_inspect.inspector.read.capture_records import PassRecord

    def rec(seq, t, wall, status="ok"):
        return PassRecord(0, seq, f"p{seq}", None, {}, time=t, wall_s=wall, status=status, compile_id="0/0")

    passes = [rec(i, 1000.0 + i * 1e-4, 5e-5) for i in range(30_000)] + [rec(30_000, 1003.5, 0.01, "raised")]
    cap = SimpleNamespace(ranks=[0], passes=lambda r: passes)
    got = timeline.lanes(cap)
    spans = got["lanes"][0]["spans"]
    assert len(spans) < 1000 and sum(s["n"] for s in spans) == len(passes)
    assert [s["raised"] for s in spans].count(True) == 1 and "(raised)" in spans[-1]["title"]
    assert got["passes"] == len(passes) and len(got["lanes"][0]["bands"]) == 1
    assert all(0 <= s["x"] <= timeline.LEFT + timeline.WIDTH + 1 for s in spans)
    assert timeline.lanes(SimpleNamespace(ranks=[0], passes=lambda r: [rec(0, None, None)])) is None
