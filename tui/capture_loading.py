"""Loading a capture into the app: indexing in steps, following a capture still being written,
reading problems, and the checks (in a child process). A mixin of `graphtrain_inspect.tui.app.InspectApp`: the
methods use the app's widgets and state; message handlers go by name (`on_capture_loaded`)."""

from __future__ import annotations

import time

from textual import work
from textual.widgets import Label, TabbedContent
from textual.worker import get_current_worker

from graphtrain_inspect.inspector.checks.rank_agreement import rank_agreement
from graphtrain_inspect.inspector.errors import CaptureUnreadable
from graphtrain_inspect.inspector.read import collector
from graphtrain_inspect.inspector.read.bundled import sample_of
from graphtrain_inspect.inspector.read.live import files_signature
from graphtrain_inspect.inspector.read.progressive import ProgressiveLoader
from graphtrain_inspect.inspector.read.simulated import simulated_line
from graphtrain_inspect.tui.escaping import plain
from graphtrain_inspect.tui.messages import CaptureFailed, CaptureLoaded, FindingsReady, Progress
from graphtrain_inspect.tui.session import CaptureSession, Place
from graphtrain_inspect.tui.widgets.findings_view import checks_note
from graphtrain_inspect.tui.widgets.table_views import ProblemsView


def mb(n: int) -> str:
    return f"{n / 1e6:.0f} MB" if n >= 10e6 else f"{n / 1e6:.1f} MB"


class CaptureLoading:
    """Mixin: everything between the capture's files and the app's tree, problems and findings."""

    # -- loading the capture ----------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="load")
    def load_capture(self) -> None:
        """Index the capture a chunk at a time; post a snapshot after the first chunk (the tree
        paints at once) and then after SNAPSHOT_SECONDS, twice that, ..., so a large capture fills in
        as it is read."""
        t0 = time.perf_counter()
        worker = get_current_worker()
        self.post_message(Progress("load", f"indexing {self.path}…"))
        try:
            loader = ProgressiveLoader(self.path, source=self.source)
            self.loader = loader
            last = None
            interval = self.SNAPSHOT_SECONDS
            while True:
                with self.capture_lock:
                    # a small first step: the tree paints from the first passes of each log
                    loader.step(self.FIRST_STEP_BYTES if last is None else self.STEP_BYTES)
                    done = loader.done
                    now = time.perf_counter()
                    if done or last is None or now - last >= interval:
                        session = CaptureSession(loader.snapshot(), self.capture_lock, complete=done)
                        loader.release()  # what the outline read is kept as objects, not pages
                        if last is not None:
                            interval *= 2  # each snapshot costs more than the last: fewer of them
                        last = now
                    else:
                        session = None
                if worker.is_cancelled:
                    return
                if session is not None:
                    self.post_message(CaptureLoaded(session, time.perf_counter() - t0, final=done))
                    if not self.tree_shown.is_set():
                        # let the interface paint the first tree before indexing on: the scan
                        # would otherwise share the interpreter with it
                        self.tree_shown.wait(timeout=2.0)
                total = loader.total_bytes or 1
                self.post_message(
                    Progress(
                        "load",
                        f"indexing {mb(loader.scanned_bytes)} of {mb(total)}",
                        fraction=loader.scanned_bytes / total,
                        done=done,
                    )
                )
                if done:
                    break
        except CaptureUnreadable as e:
            self.post_message(Progress("load", "", done=True))
            self.post_message(CaptureFailed(self.path, str(e)))
        except Exception as e:  # noqa: BLE001 - a reader bug must not take the app down: say what happened
            self.post_message(Progress("load", "", done=True))
            self.post_message(CaptureFailed(self.path, f"{type(e).__name__}: {e}"))

    @work(thread=True, exclusive=True, group="load")
    def follow_capture(self) -> None:
        """New records in a capture still being written: index only the new bytes."""
        loader = self.loader
        if loader is None:
            return
        t0 = time.perf_counter()
        try:
            with self.capture_lock:
                if not loader.grow():
                    return
            self.post_message(Progress("load", "reading new records…"))
            while True:
                with self.capture_lock:
                    loader.step(self.STEP_BYTES)
                    if loader.done:
                        session = CaptureSession(loader.snapshot(), self.capture_lock)
                        loader.release()
                        break
            self.post_message(CaptureLoaded(session, time.perf_counter() - t0, reload=True, final=True))
        except Exception as e:  # noqa: BLE001 - a reader bug while following must not take the app down
            self.post_message(CaptureFailed(self.path, f"while following the capture: {type(e).__name__}: {e}"))
        finally:
            self.post_message(Progress("load", "", done=True))

    def on_capture_failed(self, m: CaptureFailed) -> None:
        collector.resume()
        if self.closing():
            return
        self.tree.loading = False
        if self.session is not None:  # a failure while following: keep what is shown
            self.notify(m.error, title="reading the capture failed", severity="error")
            return
        self.tree.root.set_label(plain(f"cannot read {m.path}"))
        self.code_view.clear(m.error)
        self.query_one(ProblemsView).set_rows([(m.path, "", m.error)])
        self.notify(m.error, title="cannot read the capture", severity="error", timeout=10)

    def on_capture_loaded(self, m: CaptureLoaded) -> None:
        if self.closing():
            return
        first = self.session is None
        self.session = m.session
        tree = self.tree
        tree.loading = False
        if first:
            sim = simulated_line(getattr(m.session.cap, "manifest", None))
            if sim:  # capture --simulate-world: say so where the capture is named
                self.sub_title = f"{self.label}  ·  {sim.split(', fake process group')[0]}"
            tree.load(m.session.outline, self.visible_badges())
            self.call_after_refresh(self._tree_painted)
            place = self._first_place()
            if place is not None:
                tree.reveal(place)
            elif not m.session.outline.ranks:
                self.code_view.clear(
                    "no records yet: the capture has just started; they appear here as they are written"
                )
        else:
            added = tree.sync(m.session.outline)
            if m.reload and added:
                self.notify(f"{added} new entries", title="capture grew", timeout=3)
            if m.reload:
                self.stale = {v.id for v in self.VIEWS} - {"findings"}
                self.refresh_view()
            if self.place is None:  # nothing to show until now (a capture that just started)
                place = self._first_place()
                if place is not None:
                    tree.reveal(place)
        if not m.final:
            return
        # the views with a job that read the whole capture: again, once it is all indexed
        self.stale |= {v.id for v in self.VIEWS if v.whole_capture and v.job is not None}
        self.refresh_view()
        self.count_torch_nodes()
        self.load_seconds = m.seconds
        self.fill_problems()
        self.run_checks()
        if first or m.reload:
            self._compare_ranks(m.session)
        if m.session.outline.live:
            if self._poll_timer is None:
                self.signature = files_signature(self.path)
                self._poll_timer = self.set_interval(self.poll_seconds, self.poll_live)
        elif self._poll_timer is not None:
            self._poll_timer.stop()
            self._poll_timer = None

    @work(thread=True, exclusive=True, group="rank-classes")
    def _compare_ranks(self, session: CaptureSession) -> None:
        """Which ranks agree (checks.rank_classes), in the sub-title: "ranks 0-31,33-63 agree; rank
        32 differs". As `ls` does: by itself only while the node tables are small enough."""
        with session.lock:
            got = rank_agreement(session.cap, list(session.cap.ranks))
        line = (got or {}).get("line")
        if line and len(line) > 64:
            # long rank lists would push the rest off the title: the groups' sizes (ls has them)
            sizes = [len(g["ranks"]) for g in got["groups"]]
            line = f"{len(sizes)} groups of ranks that agree ({', '.join(map(str, sizes))} ranks; ls lists them)"
        if line:
            self.call_from_thread(self._show_rank_agreement, line)

    def _show_rank_agreement(self, line: str) -> None:
        if self.closing():
            return
        base = self.sub_title.split("  ·  graphs: ")[0]
        self.sub_title = f"{base}  ·  graphs: {line}"

    def _tree_painted(self) -> None:
        if self.first_tree_painted is None:
            self.first_tree_painted = time.perf_counter() - self.started
            collector.resume()  # off since the command started (inspector/cli/tui.py)
        self.tree_shown.set()

    def _first_place(self) -> Place | None:
        o = self.session.outline if self.session else None
        if not o or not o.ranks:
            return None
        for r in o.ranks:
            for pl in r.pipelines:
                if pl.passes:
                    p = pl.passes[0]
                    return Place(r.rank, pl.index, p.seq, p.first_role())
                return Place(r.rank, pl.index)
        return None

    def fill_problems(self) -> None:
        """The Problems view, its tab's count and the status bar's: no toast, which at the start
        covered the finding's details in the bottom right (a capture missing a rank had one at
        every start)."""
        if self.session is None:
            return
        rows = self.session.problems()
        self.query_one(ProblemsView).set_rows(rows)
        tab = self.query_one(TabbedContent).get_tab("problems")
        tab.label = f"Problems ({len(rows)})" if rows else "Problems"
        self.problem_count = len(rows)
        if not self.jobs:
            self.query_one("#status", Label).update(self.idle_status())

    def poll_live(self) -> None:
        if self.session is None or "load" in self.jobs:
            return
        sig = files_signature(self.path)
        if sig != self.signature:
            self.signature = sig
            self.follow_capture()

    def action_reload(self) -> None:
        if self.loader is not None and self.loader.fallback is None:
            self.follow_capture()
        else:
            self.notify("this input is read in one go: restart to read it again", timeout=3)

    # -- checks ------------------------------------------------------------------------------------

    def run_checks(self, *, asked: bool = False) -> None:
        """Run the checks in the background (a child process); on a large capture only when asked."""
        if self.session is None:
            return
        size = self.loader.total_bytes if self.loader is not None else 0
        if not asked and size > self.AUTO_CHECK_BYTES and not self.findings:
            self.findings_view.set_status(
                f"the capture is {mb(size)}: the checks read every graph (minutes, GBs of memory); press c to run them"
            )
            return
        if "checks" in self.jobs:
            self.checks_dirty = True
            return
        self.checks_dirty = False
        self.findings_view.set_status("running checks…")
        self._checks_worker(self.path, self.source)

    def action_run_checks(self) -> None:
        self.run_checks(asked=True)

    @work(thread=True, exclusive=True, group="checks")
    def _checks_worker(self, path: str, source: str) -> None:
        from graphtrain_inspect.inspector.read.outline import finding_badges
        from graphtrain_inspect.tui.checks_runner import run_checks

        self.post_message(Progress("checks", "running checks…"))
        t0 = time.perf_counter()
        result = run_checks(
            path, source, shared_graph=self.shared_graph, started=lambda proc: setattr(self, "checks_process", proc)
        )
        self.checks_process = None
        badges: dict = {}
        session = self.session
        if result.error is None and session is not None:
            with session.lock:
                badges = finding_badges(result.findings, session.index)
        self.post_message(
            FindingsReady(
                result.findings, badges, result.notes, result.not_run, time.perf_counter() - t0, error=result.error
            )
        )
        self.post_message(Progress("checks", "", done=True))

    def show_finding_counts(self) -> None:
        """The Findings tab's count and the tree's badges: the findings the severity filter lets
        through, the same as `check` counts (info only when asked)."""
        n = len(self.findings_view.visible(self.findings))
        self.tree.set_badges(self.visible_badges(), total=n)
        self.query_one(TabbedContent).get_tab("findings").label = f"Findings ({n})" if n else "Findings"
        if not self.jobs:  # the status bar counts as the tab does
            self.query_one("#status", Label).update(plain(self.idle_status()))

    def visible_badges(self) -> dict:
        fv = self.findings_view
        return {k: v2 for k, v in self.badges.items() if (v2 := fv.visible(v))}

    def on_findings_view_severity_changed(self, m) -> None:
        self.show_finding_counts()

    def on_findings_view_shared_graph_toggled(self, m) -> None:
        self.toggle_shared_graph()

    def toggle_shared_graph(self) -> None:
        """Run the checks again graded the other way: as a graph compiled once and loaded by every
        rank (check --shared-graph), or as graphs each rank traced for itself."""
        self.shared_graph = not self.shared_graph
        how = "as a shared graph (check --shared-graph)" if self.shared_graph else "per rank (each rank traced its own)"
        self.notify(f"findings graded {how}: running the checks again", timeout=4)
        self.run_checks(asked=True)

    def on_findings_ready(self, m: FindingsReady) -> None:
        if self.closing():
            return
        self.jobs.pop("checks", None)
        if m.error:
            self.findings_view.set_status(f"checks failed: {m.error}")
            self.notify(m.error, title="checks failed", severity="error")
            return
        self.findings = m.findings
        self.badges = m.badges
        fv = self.findings_view
        fv.checks_note = checks_note(m.not_run, m.notes)
        fv.shared_graph = self.shared_graph
        fv.source_root = (getattr(self.session.cap, "manifest", None) or {}).get("cwd") if self.session else None
        fv.sample = sample_of(self.path)
        fv.set_findings(m.findings, ranks=self.session.cap.ranks if self.session else None)
        self.show_finding_counts()
        if self.checks_dirty:
            self.run_checks()
