"""What the report holds, gathered from the core as plain dicts for the template: the checks'
findings under both gradings (per-rank graphs and `--shared-graph`), the summary lines `check`
prints for each, the rank x stage grid of graph agreement, the diffs the findings and the grid
link to, compile events per rank, and the capture's metadata.

Both gradings are computed here, so the page only shows or hides what is already in it (no
network, nothing computed in the browser). Findings are the same objects `check` prints
(inspector.checks.check_report) and are counted by the same rule (inspector.checks.severity_filter).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from graphtrain_inspect.capture.shared.rank_ranges import format_ranks, values_by_rank
from graphtrain_inspect.inspector.cli.html_report import excerpts, timeline
from graphtrain_inspect.inspector.read.bundled import capture_words, describe, sample_of

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.checks import Report
    from graphtrain_inspect.inspector.read.capture_reader import Capture
    from graphtrain_inspect.inspector.read.stages import Stage, StageIndex, StageKey

GRADINGS = ("per-rank", "shared")
HOW_INFO = "the info switch shows them"
MAX_GRID_DIFFS = 80  # rank diffs made for differing grid cells without a finding (the rest: no link)


@dataclass
class Diffs:
    """The diff sections of the page, each made once and linked by its id."""

    cap: "Capture"
    index: "StageIndex"
    focus: dict[str, list[str]] = field(default_factory=dict)  # id -> nodes to centre on
    wanted: dict[str, tuple] = field(default_factory=dict)  # id -> how to make it

    def rank_diff(self, key: "StageKey", a: int, b: int, nodes: Sequence[str] = ()) -> str:
        did = f"rd-{self.index.keys.index(key)}-{a}-{b}"
        self.wanted.setdefault(did, ("rank", key, a, b))
        self.focus.setdefault(did, []).extend(n for n in nodes if n not in self.focus[did])
        return did

    def pass_diff(self, key: "StageKey", rank: int, nodes: Sequence[str] = ()) -> str:
        did = f"pd-{self.index.keys.index(key)}-{rank}"
        self.wanted.setdefault(did, ("pass", key, rank))
        self.focus.setdefault(did, []).extend(n for n in nodes if n not in self.focus[did])
        return did

    def graph(self, key: "StageKey", rank: int, nodes: Sequence[str] = ()) -> str:
        did = f"gr-{self.index.keys.index(key)}-{rank}"
        self.wanted.setdefault(did, ("graph", key, rank))
        self.focus.setdefault(did, []).extend(n for n in nodes if n not in self.focus[did])
        return did

    def made(self) -> list[dict[str, Any]]:
        out = []
        rank_pairs: dict = {}  # the rank diffs made, by graph pair: stages that share graphs share them
        for did, how in self.wanted.items():
            across = self.index.across(how[1])
            command = self._command(how)
            graphs = self._graphs(how)
            if how[0] == "rank":
                got = excerpts.rank_excerpt(self.cap, across[how[2]], across[how[3]], self.focus[did], rank_pairs)
            elif how[0] == "graph":
                got = excerpts.graph_excerpt(self.cap, across[how[2]], self.focus[did])
            else:
                got = excerpts.pass_excerpt(self.cap, how[2], across[how[2]], self.focus[did])
            if got is not None:
                out.append({"id": did, "focus": self.focus[did], "command": command, "graphs": graphs, **got})
        return out

    def _command(self, how: tuple) -> str | None:
        """The `graphtrain-inspect diff` command that shows the whole diff in a terminal."""
        kind, key, rank = how[0], how[1], how[2]
        st = self.index.across(key)[rank]
        if st.pass_rec is not None:
            which = ["--pass", f"#{st.seq}"]
        else:  # a traced graph: named by its pipeline
            which = ["--pass", "trace"] + (["--pipeline", key.pipeline] if len(self.cap.pipelines(rank)) > 1 else [])
        if kind == "rank":
            return shell_line(["diff", *capture_words(self.cap.path), *which, "--ranks", f"{rank},{how[3]}"])
        if kind == "pass":
            return shell_line(["diff", *capture_words(self.cap.path), *which, "--rank", str(rank)])
        return None  # a window of one graph: nothing to diff

    def _graphs(self, how: tuple) -> list[tuple[int, str]]:
        """(rank, gid) of the whole graphs behind a section (written next to the page by `-o DIR`)."""
        across = self.index.across(how[1])
        st = across[how[2]]
        if how[0] == "rank":
            return [(st.rank, st.gid), (how[3], across[how[3]].gid)]
        if how[0] == "pass" and st.pass_rec is not None and st.pass_rec.before:
            return [(st.rank, st.pass_rec.before), (st.rank, st.gid)]
        return [(st.rank, st.gid)]


def shell_line(args: list[str]) -> str:
    import shlex

    return "graphtrain-inspect " + " ".join(shlex.quote(a) for a in args)


def _stage_of(index: "StageIndex", f, rank: int) -> "Stage | None":
    """The stage where the finding appears on `rank`: its introducing pass's output (by seq on
    the lowest rank), or its pipeline's traced graph."""
    stages = [st for st in index.by_rank.get(rank, []) if not f.pipeline or st.key.pipeline == f.pipeline]
    if f.introduced_by == "trace":
        return next((st for st in stages if st.pass_rec is None), None)
    if f.introduced_seq is not None:
        return next((st for st in stages if st.seq == f.introduced_seq), None)
    return None


def _described(f, cap) -> dict[str, Any]:
    """What a card shows of a finding, and of each of its consequences: its own kind, severity,
    message, place, source line and evidence."""
    from graphtrain_inspect.inspector.checks.evidence import evidence_lines
    from graphtrain_inspect.inspector.read.source_lines import source_text
    from graphtrain_inspect.inspector.read.stages import pipeline_label

    ev = f.evidence or {}
    return {
        "kind": f.kind,
        "severity": f.severity,
        "message": f.message,
        "introduced_by": f.introduced_by,
        "pass": f.pass_,
        "pipeline": pipeline_label(f.pipeline) if f.pipeline else "",
        "node": (f"{f.subgraph}:" if f.subgraph else "") + (f.node or "-"),
        "ranks": format_ranks(f.ranks) if f.ranks else "-",
        "layer": f.layer,
        "source": source_text(f.source, (getattr(cap, "manifest", None) or {}).get("cwd") or None),  # as check
        "evidence_lines": evidence_lines(f),
        "per_rank": values_by_rank(ev["values"], str, prefix="rank ", sep=": ")
        if isinstance(ev.get("values"), dict)
        else "",
        "evidence": _evidence_items(ev),
    }


def _finding(f, fid: str, cap, index: "StageIndex", diffs: Diffs) -> dict[str, Any]:
    ev = f.evidence or {}
    out: dict[str, Any] = {
        "id": fid,
        **_described(f, cap),
        "consequences": [_described(c, cap) for c in f.consequences],
        "links": [],
        "code": None,
        "replay": None,
        "repro": None,
    }
    focus = [n for n in {f.node, *((ev.get("nodes") or {}).values() if isinstance(ev.get("nodes"), dict) else ())} if n]
    ref = f.ranks[0] if f.ranks else None
    st = _stage_of(index, f, ref) if ref is not None and f.layer == "graph" else None
    if st is not None and ref is not None:
        if st.pass_rec is not None and st.pass_rec.before is not None:
            out["links"].append(("pass diff on rank %d" % ref, diffs.pass_diff(st.key, ref, focus)))
        others = [r for r in cap.ranks if r != ref and r in index.across(st.key)]
        differing = [r for r in f.ranks[1:] if r in others] or [r for r in others if r not in f.ranks] or others
        if differing:
            out["links"].append(
                (f"rank diff {ref} vs {differing[0]}", diffs.rank_diff(st.key, ref, differing[0], focus))
            )
        if st.pass_rec is not None and st.pass_rec.blobs:  # re-run the pass on its captured input
            out["replay"] = shell_line(
                ["replay", *capture_words(cap.path), "--pass", f"#{st.seq}", "--rank", str(ref), "--batch"]
            )
        if not out["links"]:  # in the traced graph, on one rank: the graph around the node
            out["links"].append((f"graph on rank {ref}", diffs.graph(st.key, ref, focus)))
    if f.layer == "codegen" and isinstance(ev.get("output_code"), dict):
        for r, oid in ev["output_code"].items():
            got = excerpts.generated_code_excerpt(cap, int(r), oid, ev.get("line"))
            if got is not None:
                out["code"] = got
                break
    return out


def reproducible(f) -> bool:
    """Whether `repro` makes a bundle of the finding: one a pass put into a graph, of a kind its
    repro.py judges."""
    from graphtrain_inspect.inspector.cli.repro_bundle import KINDS

    return (
        f.kind in KINDS
        and f.layer == "graph"
        and f.introduced_by not in (None, "trace")
        and f.introduced_seq is not None
    )


def _evidence_items(ev: dict[str, Any]) -> list[tuple[str, str]]:
    """The evidence as (key, one line) pairs: what `check --json` has, readable."""
    import orjson

    out = []
    for k, v in ev.items():
        text = v if isinstance(v, str) else orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS, default=str).decode()
        out.append((str(k), excerpts.clip(text)))
    return out


def _grid(cap, index: "StageIndex", diffs: Diffs, finding_cells: dict[tuple, str], worst: dict[str, dict]) -> dict:
    """Rank x stage: whether the rank's graph at the stage is the reference rank's (the lowest
    rank that has it) after rank normalization (same, differs, or not run), and the worst finding
    in the cell under each grading (`worst`: grading -> (stage, rank) -> severity)."""
    from graphtrain_inspect.inspector.checks.rank_classes import RankClasses
    from graphtrain_inspect.inspector.diff.rank_diffs import rank_diff_gids

    classes = RankClasses(cap, index)
    several = len({k.pipeline for k in index.keys}) > 1  # name the pipeline only where there is a choice
    columns = [{"label": k.label(), "pipeline": k.pipeline_label() if several else ""} for k in index.keys]
    rows = []
    made = 0
    for r in cap.ranks:
        cells: list[dict[str, Any]] = []
        for key in index.keys:
            across = index.across(key)
            if r not in across:
                cells.append(
                    {"state": "not-run", "href": None, "title": f"rank {r}: {key.label()} did not run", "sev": {}}
                )
                continue
            ref = min(across)
            if r == ref:
                state = "same"
            elif classes.hashed(key, r) and classes.hashed(key, ref):
                state = "same" if classes.class_of(key, r) is classes.class_of(key, ref) else "differs"
            else:
                d = rank_diff_gids(cap, ref, across[ref].gid, r, across[r].gid)
                state = "same" if d is not None and d.empty else "differs"
            href = finding_cells.get((key, r))
            if state == "differs" and href is None and made < MAX_GRID_DIFFS:
                href = diffs.rank_diff(key, ref, r)
                made += 1
            title = (
                f"rank {r}: {key.label()} " + ("agrees with" if state == "same" else "differs from") + f" rank {ref}"
            )
            sev = {g: cells_of[(key, r)] for g, cells_of in worst.items() if (key, r) in cells_of}
            cells.append({"state": state, "href": href, "title": title, "sev": sev})
        rows.append({"rank": r, "cells": cells})
    return {"columns": columns, "rows": rows}


def _events(cap) -> dict[str, Any]:
    from graphtrain_inspect.inspector.read.compile_events import compile_story, missing_note

    story = compile_story(cap)
    rows = []
    for r in cap.ranks:
        for e in story.events(r):
            rows.append(
                {
                    "rank": r,
                    "compile": e.label,
                    "kind": e.kind,
                    "reason": excerpts.clip(e.reason),
                    "where": e.frame.where if e.frame else "",
                }
            )
    return {"rows": rows[:2000], "cut": max(0, len(rows) - 2000), "note": missing_note(cap)}


def _meta(cap) -> dict[str, Any]:
    m = cap.manifest or {}
    table = cap.rank_table(cap.ranks[0]) if cap.ranks else None
    meshes = []
    for mesh in (table or {}).get("meshes") or []:
        names = mesh.get("dim_names") or []
        shape = mesh.get("shape") or []
        meshes.append(
            " x ".join(f"{n}={s}" for n, s in zip(names, shape))
            + (f" ({mesh['device_type']})" if mesh.get("device_type") else "")
        )
    return {
        "path": str(cap.path),
        "sample": sample_of(cap.path),  # a bundled capture: named as --sample NAME, not by its place in the cache
        "sample_about": describe(sample_of(cap.path) or ""),
        "kind": cap.kind,
        "command": m.get("command_line"),
        "torch": m.get("torch_version"),
        "status": m.get("status"),
        "host": m.get("host"),
        "started": _when(m.get("started")),
        "world": cap.world_size,
        "ranks": format_ranks(list(cap.ranks)),
        "meshes": meshes,
        "read_errors": [str(e) for e in cap.all_errors()][:50],
    }


def gather(cap: "Capture", jobs: int = 1, reports: "Sequence[Report] | None" = None) -> dict[str, Any]:
    """The page's contents. `reports`: the checks' reports under GRADINGS when already made."""
    from graphtrain_inspect.inspector.checks import SEVERITY_RANK, check_reports
    from graphtrain_inspect.inspector.checks.severity_filter import at_least, hidden_info, summary
    from graphtrain_inspect.inspector.read.outline import finding_stages
    from graphtrain_inspect.inspector.read.simulated import simulated_line
    from graphtrain_inspect.inspector.read.stages import StageIndex

    index = StageIndex(cap)
    diffs = Diffs(cap, index)
    if reports is None:
        reports = check_reports(cap, [g == "shared" for g in GRADINGS], jobs=jobs)
    by_grading = dict(zip(GRADINGS, reports))
    sim = simulated_line(getattr(cap, "manifest", None))
    headlines = []
    cards: list[dict[str, Any]] = []  # one per finding of each grading, numbered as check --json numbers them
    finding_cells: dict[tuple, str] = {}
    worst: dict[str, dict[tuple, str]] = {}
    for g, rep in by_grading.items():
        for info in (False, True):
            shown = at_least(rep.findings, "info" if info else None)
            head, more = summary(shown, 0 if info else hidden_info(rep.findings, None), HOW_INFO)
            headlines.append({"grading": g, "info": int(info), "head": head, "more": more, "shown": len(shown),
                              "errors": sum(1 for f in shown if f.severity == "error")})  # fmt: skip
        cells_of = worst[g] = {}
        for number, f in enumerate(rep.findings, 1):
            card = _finding(f, f"{g[0]}{number}", cap, index, diffs)
            card.update(grading=g, number=number)
            if reproducible(f):
                flags = ["--shared-graph"] if g == "shared" else []
                card["repro"] = shell_line(
                    ["repro", *capture_words(cap.path), *flags, "--finding", str(number), "-o", f"repro-{number}"]
                )
            cards.append(card)
            for _label, did in card["links"]:  # the grid cell of the finding's stage and rank
                if did.startswith(("rd-", "gr-")):
                    i, r = did.split("-")[1], did.split("-")[-1]
                    finding_cells.setdefault((index.keys[int(i)], int(r)), did)
            for r, st in finding_stages(f, index).items():  # where the TUI's tree badges it
                cell = (st.key, r)
                if SEVERITY_RANK.get(f.severity, 9) < SEVERITY_RANK.get(cells_of.get(cell, ""), 9):
                    cells_of[cell] = f.severity
    grid = _grid(cap, index, diffs, finding_cells, worst)
    return {
        "meta": _meta(cap),
        "headlines": headlines,
        "findings": cards,
        "not_run": _reasons(by_grading["per-rank"]),
        "notes": [*by_grading["per-rank"].notes, *([sim] if sim else [])],
        "grid": grid,
        "timeline": timeline.lanes(cap),
        "events": _events(cap),
        "diffs": diffs.made(),
        "check_counts": {g: {"all": rep.counts()} for g, rep in by_grading.items()},
    }


def _reasons(rep) -> list[tuple[str, str]]:
    """The checks that did not run, those skipped for one reason on one line (as `check`)."""
    reasons: dict[str, list[str]] = {}
    for n in rep.not_run:
        reasons.setdefault(n.reason, []).append(n.check)
    return [(", ".join(checks), reason) for reason, checks in reasons.items()]


def _when(t: Any) -> str | None:
    """The manifest's start time (seconds since the epoch) in UTC."""
    import datetime

    if not isinstance(t, (int, float)):
        return None
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
