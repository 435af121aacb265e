"""One story: the TUI's first screen on each bundled capture counts what `check` counts on it (the
Findings tab, the status line, the tree's badges and its root), info left out unless asked, with
the same "N info findings not shown" line. Two captures in the quick suite (info hidden; errors in
FX graphs and generated code), one of each kind and of each hardware in the slow suite."""

from __future__ import annotations

import re

import pytest
from textual.widgets import Label, TabbedContent

from graphtrain_inspect.inspector.read import bundled
from graphtrain_inspect.tui.app import InspectApp
from tests.capture_utils import run_cli
from tests.tui_support import settle

QUICK = ("h200x2-rank-baked", "h200x2-fsdp2-compile-rank-literal")


def one_of_each_kind(names: list[str]) -> list[str]:
    """One capture of each kind (the name less its `hNxM-` hardware) and of each hardware, the
    rank-baked one where it has one: every assertion here is about how the first screen counts,
    which depends on what the capture holds (its kind) and how many ranks it has, not on both at
    once. Of the bundled ones: every h200x2 capture (all twelve kinds) and h200x4-rank-baked
    (4 ranks); the other five h200x4 captures are kinds the h200x2 ones cover."""
    chosen: dict[str, str] = {}
    for n in names:
        chosen.setdefault(re.sub(r"^h\d+x\d+-", "", n), n)
    for hw in sorted({n.split("-", 1)[0] for n in names}):
        if not any(c.startswith(f"{hw}-") for c in chosen.values()):
            chosen[hw] = (
                f"{hw}-rank-baked" if f"{hw}-rank-baked" in names else next(n for n in names if n.startswith(f"{hw}-"))
            )
    return sorted(chosen.values())


NAMES = [pytest.param(n, marks=() if n in QUICK else pytest.mark.slow) for n in one_of_each_kind(bundled.names())]


def check_summary(path) -> tuple[int, str, str | None]:
    """(findings shown, the headline, the hidden-info line's count phrase) of `check`'s table."""
    r = run_cli("check", str(path), "-j", "1")
    assert r.returncode in (0, 1), r.stderr
    lines = r.stdout.rstrip("\n").splitlines()
    hidden = re.match(r"(\d+ info findings? not shown)", lines[-1])
    head = lines[-2] if hidden else lines[-1]
    m = re.match(r"(\d+) findings?:", head)
    return (int(m.group(1)) if m else 0), head, (hidden.group(1) if hidden else None)


@pytest.mark.parametrize("name", NAMES)
async def test_first_screen_counts_what_check_counts(bundled_capture, name):
    path = bundled_capture(name)
    n, head, hidden = check_summary(path)
    app = InspectApp(str(path))
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        label = str(app.query_one(TabbedContent).get_tab("findings").label)
        assert label == (f"Findings ({n})" if n else "Findings")
        status = str(app.findings_view.query_one("#findings-status", Label).render())
        assert status.startswith(head)
        assert (hidden in status) if hidden else "not shown" not in status
        badged = {id(f) for v in app.tree.badges.values() for f in v}
        # a finding about the run itself (training-failed: no pipeline, no graph) has no pass to
        # badge: the root line counts it
        of_the_run = [f for f in app.findings if f.graph is None and f.pipeline is None]
        assert len(badged) == n - len(of_the_run)
        root = str(app.tree.root.label)
        assert (f"{n} finding" in root) if n else "finding" not in root
