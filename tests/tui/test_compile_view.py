"""The TUI on torch's own log of the four-event program (tests/programs/compile_events.py): the
compile view lists every compile and event `ls` lists, Enter on one shows its source lines and
selects the compile's graph in the tree; the failed compile is in the tree with its reason; a
compile finding opens its row; graphs show node counts (no `trace  ?`)."""

from __future__ import annotations

from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.compile_events import compile_story
from graphtrain_inspect.tui.widgets.capture_tree import CompileData
from graphtrain_inspect.tui.widgets.compile_view import CompileView
from tests.tui_support import opened, settle


def _plain(t) -> str:
    return getattr(t, "plain", str(t))


async def test_compile_view_lists_every_event_with_reason_and_line(compile_events_trace):
    with open_capture(str(compile_events_trace)) as cap:
        story = compile_story(cap)
        # a failure is its compile's own row (status failed), the other events rows of their own
        want = {(e.label, e.kind) for e in story.events(0) if e.kind not in ("cache", "failure")} | {
            (c.label, c.status) for c in story.compiles(0)
        }
        assert ("[4/0]", "failed") in want
    async with opened(compile_events_trace) as (app, pilot):
        await pilot.press("9")
        await settle(pilot)
        view = app.query_one(CompileView)
        assert {(r.label, r.what) for r in view.rows} == want
        failed = next(r for r in view.rows if r.what == "failed")
        # the failed compile's row: the line that failed, and that it raised (fullgraph=True)
        assert failed.label == "[4/0]" and failed.text.startswith("raised · Unsupported: Data-dependent branching")
        assert failed.where.endswith("compile_events.py:33") and failed.frame["code"] == "if y.sum() > 0:"
        # Enter on the print() break: its source lines, and its compile's graph selected in the tree
        i = next(i for i, r in enumerate(view.rows) if r.what == "break" and r.label == "[2/0]")
        view.table.focus()
        view.table.move_cursor(row=i)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.pause()
        await settle(pilot)
        detail = _plain(view.query_one("#compile-detail").render())
        assert ">25     if x.sum() > 0:" in detail and "graphs of compile 2/0 on rank 0: graph 2" in detail
        assert app.place is not None and (app.place.pipeline, app.place.seq) == (2, None)
        assert app.active_view == "compile"  # the view stays; 1 shows the selected graph's code


async def test_failed_compile_in_tree_and_node_counts(compile_events_trace):
    async with opened(compile_events_trace) as (app, pilot):
        tree = app.tree
        labels = {k: _plain(n.label) for k, n in tree.nodes_by_key.items()}
        failed = [v for k, v in labels.items() if k[0] == "compile"]
        assert failed == [next(v for v in failed)] and failed[0].startswith(
            "compile 4/0 failed  Unsupported: Data-dependent branching"
        )
        assert not [v for v in labels.values() if v.startswith("trace  ?")]
        assert all(" nodes" in v for k, v in labels.items() if k[0] == "pipeline")
        # Enter on the failed compile: its row in the compile view
        node = next(n for k, n in tree.nodes_by_key.items() if k[0] == "compile")
        assert isinstance(node.data, CompileData)
        tree.move_cursor(node)
        tree.focus()
        await pilot.press("enter")
        await settle(pilot)
        view = app.query_one(CompileView)
        assert app.active_view == "compile" and view.current is not None and view.current.label == "[4/0]"


async def test_compile_finding_opens_its_row(compile_events_trace):
    async with opened(compile_events_trace) as (app, pilot):
        f = next(f for f in app.findings if f.kind == "graph-break" and f.evidence["label"] == "[2/0]")
        assert app.jump_to_finding(f)
        await settle(pilot)
        view = app.query_one(CompileView)
        assert app.active_view == "compile" and view.current is not None
        assert (view.current.label, view.current.what) == ("[2/0]", "break") and "if x.sum() > 0:" in _plain(
            view.query_one("#compile-detail").render()
        )
