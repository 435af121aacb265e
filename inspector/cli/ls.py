"""`graphtrain-inspect ls DIR`: ranks, graphs and passes in order, node counts and deltas, sizes,
capture errors. DIR is a capture directory, a TORCH_TRACE directory, or one log file.

Ranks whose passes produced the very same graphs as an earlier rank are folded into one line.
`--json` prints the same listing as one JSON document. Exit 0, or 2 when DIR cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

import orjson

from graphtrain_inspect.capture.shared.rank_ranges import format_ranks
from graphtrain_inspect.capture.shared.terminal_text import Style, fmt_bytes, want_color
from graphtrain_inspect.inspector.checks.rank_agreement import rank_agreement
from graphtrain_inspect.inspector.cli import ls_compile, ls_output_code
from graphtrain_inspect.inspector.cli.common import add_capture_argument, add_common_arguments, open_or_fail
from graphtrain_inspect.inspector.read.capture_files import integrity_notes
from graphtrain_inspect.inspector.read.node_parts import absence
from graphtrain_inspect.inspector.read.simulated import simulated_line


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_capture_argument(p, nodes=True)
    p.add_argument("--rank", type=int, action="append", help="only this rank (repeatable)")
    p.add_argument("--all", action="store_true", help="list every rank in full (no folding of identical ranks)")
    p.add_argument("--verify", action="store_true", help="decode every payload and check its md5")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.add_argument(
        "--classes",
        action="store_true",
        help="compare every rank's graphs after rank normalization (which ranks agree) whatever the node tables weigh",
    )
    add_common_arguments(p)


def listing(cap, ranks: list[int] | None = None, *, classes: bool | None = None) -> dict[str, Any]:
    """The data `ls` shows, as JSON-able dicts (also what `--json` prints)."""
    out: dict[str, Any] = {
        "path": cap.path,
        "kind": cap.kind,
        "manifest": _manifest_summary(cap.manifest),
        "world_size": cap.world_size,
        "torch_trace": cap.torch_trace_dir,
        # ranks of the world with no log at all (under --coor: the ranks that loaded rank 0's graph)
        "absent_ranks": cap.absent_ranks,
        # why: not recorded (--ranks), on a node not given, or ran no pass (node_parts)
        "absent_lines": absence(cap).lines(cap.world_size) if cap.kind == "capture" else [],
        "nodes": [{k: v for k, v in n.items() if k != "problems"} for n in cap.nodes],
        "ranks": [],
    }
    for r in ranks if ranks is not None else cap.ranks:
        out["ranks"].append(_rank_entry(cap, r))
    if cap.kind == "capture":
        from graphtrain_inspect.inspector.checks.training_failed import findings_of

        # how the training ended, first: the check's own words (a failed run is still a capture)
        out["training_failed"] = [f.message for f in findings_of(cap)]
        out["passes_captured"] = sum(len(cap.passes(r)) for r in cap.ranks)
    out["compile_note"] = ls_compile.note(cap)
    out["rank_classes"] = rank_agreement(cap, [e["rank"] for e in out["ranks"]], force=classes)
    out["read_errors"] = [str(e) for e in cap.all_errors()]
    out["unsigned_files"] = integrity_notes(cap)
    return out


def _rank_entry(cap, r: int) -> dict[str, Any]:
    """One rank of the listing: its log, its passes in order, how it ended."""
    log = cap.log_file(r)
    header = cap.header(r) or {}
    end = cap.end(r)
    pipeline_of = {p.seq: pl for pl in cap.pipelines(r) for p in pl.passes}
    return {
        "rank": r,
        "log": log.path if log else None,
        "bytes": log.size if log else None,
        "records": len(log.records) if log else 0,
        "pid": header.get("pid"),
        "host": header.get("host"),
        "local_rank": header.get("local_rank"),
        "torch_version": header.get("torch_version"),
        "graphs": len(cap.graphs(r)),
        "passes": [_pass_entry(cap, r, p, pipeline_of.get(p.seq)) for p in cap.passes(r)],
        "capture_errors": [
            {
                "where": e.get("where"),
                "pass": e.get("pass"),
                "seq": e.get("seq"),
                "type": e.get("type"),
                "message": str(e.get("message", "")).splitlines()[0][:200] if e.get("message") else "",
            }
            for e in cap.capture_errors(r)
        ],
        "complete": end is not None if cap.kind == "capture" else None,
        "output_code": ls_output_code.entries(cap, r),
        "stopped": cap.stopped(r) if cap.kind == "capture" else None,
        "exit": cap.rank_exit(r) if cap.kind == "capture" else None,
        "failure": _failure(cap, r),
        "compile": ls_compile.entry(cap, r),
    }


def _pass_entry(cap, r: int, p: Any, pl: Any) -> dict[str, Any]:
    """One pass of a rank: its graphs before and after (node counts, sizes), its pipeline, its time."""
    before_n = cap.node_count(r, p.before) if p.before else None
    after = {}
    for role, gid in p.after.items():
        ref = cap.graph(r, gid)
        n = cap.node_count(r, gid)
        after[role] = {
            "gid": gid,
            "nodes": n,
            "delta": (n - before_n) if n is not None and before_n is not None else None,
            "bytes": ref.bytes if ref else None,
        }
    blob_bytes = sum((b or {}).get("bytes") or 0 for b in (p.blobs or {}).values())
    return {
        "seq": p.seq,
        "name": p.name,
        "qualname": p.qualname,
        "source": p.source,
        "subsystem": p.subsystem,
        "pipeline": p.pipeline,
        # what identifies the pipeline across ranks (identity.pipeline_key), and where
        # its first graph came from ("loaded": made by `loaded_from`'s passes, or unpickled)
        "pipeline_key": pl.key if pl is not None else None,
        "origin": pl.origin if pl is not None else None,
        "loaded_from": pl.loaded_from if pl is not None else [],
        "module": pl.module if pl is not None else None,
        "compile_id": p.compile_id,
        "traced": p.traced,
        "status": p.status,
        "parent": p.parent,
        "before": {"gid": p.before, "nodes": before_n},
        "after": after,
        "wall_s": p.wall_s,
        "capture_errors": p.capture_errors,
        "blob_bytes": blob_bytes or None,
        "exception": (p.exception or {}).get("type")
        and f"{p.exception.get('type')}: "
        f"{str(p.exception.get('message', '')).splitlines()[0] if p.exception.get('message') else ''}",
    }


def _failure(cap: Any, r: int) -> str | None:
    """The exception that ended the rank's program (`gti_failure`), in one line; None if none."""
    fails = cap.failures(r) if cap.kind == "capture" else []
    if not fails:
        return None
    typ = str(fails[-1].get("type") or "Exception").rsplit(".", 1)[-1]
    msg = str(fails[-1].get("message") or "").strip().splitlines()
    return f"{typ}: {msg[0][:120]}" if msg else typ


def _manifest_summary(m: dict | None) -> dict | None:
    if not m:
        return None
    return {
        k: m.get(k)
        for k in (
            "status",
            "exit_code",
            "signal",
            "command_line",
            "torch_version",
            "host",
            "started",
            "ended",
            "format_version",
            "simulated",
            "problems",
        )
        if k in m
    }


def _rank_signature(rank_entry: dict) -> tuple:
    return (
        ls_compile.signature(rank_entry.get("compile"))
        + tuple(o["oid"] for o in rank_entry.get("output_code") or [])
        + tuple(
            (
                p["seq"],
                p["name"],
                p["status"],
                p["before"]["gid"],
                tuple(sorted((k, v["gid"]) for k, v in p["after"].items())),
            )
            for p in rank_entry["passes"]
        )
    )


def render(data: dict[str, Any], st: Style, fold: bool = True) -> list[str]:
    lines = _head_lines(data, st)
    seen: dict[tuple, int] = {}
    for entry in data["ranks"]:
        r = entry["rank"]
        sig = _rank_signature(entry)
        info = (
            f"{len(entry['passes'])} passes, {entry['graphs']} graphs, {entry['records']} records, "
            f"{fmt_bytes(entry['bytes'])}"
        )
        errs = entry["capture_errors"]
        extra = _rank_state(entry, st)
        where = f"  pid {entry['pid']} on {entry['host']}" if entry.get("pid") else ""
        lines.append("")
        if fold and sig in seen and sig:
            lines.append(
                st(f"rank {r}", "bold", "cyan")
                + f": {info}{where}; same passes and graphs as rank {seen[sig]}"
                + (f"  [{', '.join(extra)}]" if extra else "")
            )
            lines.extend(_error_lines(errs, st))
            continue
        seen.setdefault(sig, r)
        lines.append(
            st(f"rank {r}", "bold", "cyan") + f": {info}{where}" + (f"  [{', '.join(extra)}]" if extra else "")
        )
        lines.extend(_pipeline_lines(entry, st))
        lines.extend(ls_compile.rows(entry.get("compile"), st))
        lines.extend(_error_lines(errs, st))
    return lines + _tail_lines(data, st)


def _head_lines(data: dict[str, Any], st: Style) -> list[str]:
    """The capture's line (path, kind, status, torch, ranks) and what is said of it as a whole."""
    lines: list[str] = []
    m = data.get("manifest") or {}
    head = f"{data['path']}  {data['kind']}"
    if m:
        status = m.get("status") or "status unknown"  # left out where not a string (a reading problem)
        head += f"  {st(status, 'green' if status == 'finished' else 'red')}"
        if m.get("exit_code") is not None:
            head += f" (exit {m['exit_code']}{', ' + m['signal'] if m.get('signal') else ''})"
        if m.get("torch_version"):
            head += f"  torch {m['torch_version']}"
    head += f"  {len(data['ranks'])} rank(s), world size {data['world_size']}"
    lines.append(st(head, "bold"))
    if m.get("command_line"):
        lines.append(f"command: {m['command_line']}")
    problems = (
        [str(p) for p in m.get("problems") or [] if isinstance(p, str)] if isinstance(m.get("problems"), list) else []
    )
    for failed in data.get("training_failed") or []:  # the training's own failure, before the capture's
        lines.append(st(f"training failed: {failed}", "red"))
    if data.get("passes_captured") == 0 and data.get("kind") == "capture":
        lines.append(st("no pass was captured", "yellow"))
    if problems:  # what the launcher found at the capture's end: failed writes, ranks killed, a full disk
        lines.append(st(f"at the capture's end: {'; '.join(problems)}", "red"))
    sim_line = simulated_line(m)
    if sim_line:
        lines.append(st(sim_line, "yellow"))
    hosts: dict[str, tuple[set, list[int], set]] = {}  # node -> (hosts, ranks, exit codes): its parts merged
    for node in data.get("nodes") or []:
        where = f"node {node.get('node_rank')}" if node.get("node_rank") is not None else str(node.get("part"))
        h = hosts.setdefault(where, (set(), [], set()))
        h[0].add(node.get("host") or "?")
        h[1].extend(node.get("ranks") or [])
        if node.get("exit_code") is not None:
            h[2].add(node["exit_code"])
    if len(hosts) > 1:  # a job of several nodes: which ranks each hosted
        for where, (names, ranks, codes) in hosts.items():
            ended = f", exit {','.join(map(str, sorted(codes)))}" if codes else ""
            lines.append(f"{where} ({','.join(sorted(names))}{ended}): ranks {format_ranks(ranks)}")
    if data.get("absent_ranks") and not sim_line and data.get("kind") == "capture":
        for line in data.get("absent_lines") or []:
            lines.append(st(line, "yellow"))
    agreement = data.get("rank_classes") or {}
    if agreement.get("line") or agreement.get("skipped"):
        lines.append(f"graphs: {agreement.get('line') or agreement.get('skipped')}")
    if data.get("torch_trace"):
        lines.append(f"torch's own TORCH_TRACE logs: {data['torch_trace']} (ls --source torch)")
    return lines


def _rank_state(entry: dict[str, Any], st: Style) -> list[str]:
    """What went wrong on the rank, for its line: capture errors, raised and unfinished passes, how it ended."""
    errs = entry["capture_errors"]
    raised = sum(1 for p in entry["passes"] if p["status"] == "raised")
    incomplete = sum(1 for p in entry["passes"] if p["status"] == "incomplete")
    extra = []
    if entry.get("failure"):
        extra.append(st(f"raised {entry['failure']}", "red"))
    if errs:
        extra.append(st(f"{len(errs)} capture errors", "yellow"))
    if raised:
        extra.append(st(f"{raised} passes raised", "red"))
    if incomplete:
        extra.append(st(f"{incomplete} unfinished", "red"))
    if entry.get("stopped"):
        extra.append(st(f"capture stopped writing: {entry['stopped']}", "red"))
    elif entry["complete"] is False and entry.get("exit"):
        ex, n = entry["exit"], sum(1 for p in entry["passes"] if p["status"] != "incomplete")
        how = f"killed by {ex['signal']}" if ex.get("signal") else f"exited with code {ex['exit_code']}"
        extra.append(st(f"rank {entry['rank']} {how} after {n} passes (no end record)", "red"))
    elif entry["complete"] is False:
        extra.append(st("no end record (killed or still running)", "red"))
    return extra


def _pipeline_lines(entry: dict[str, Any], st: Style) -> list[str]:
    """The rank's pipelines, each a table of its passes then its generated code; code no listed
    pipeline made last."""
    lines: list[str] = []
    cols = Columns.measure(entry)
    pipeline = None
    for p in entry["passes"]:
        if p["pipeline"] != pipeline:
            if pipeline is not None:
                lines.extend(ls_output_code.rows(entry, pipeline, st, cols.row, fmt_bytes))
            pipeline = p["pipeline"]
            cid = f" (compile {p['compile_id']})" if p.get("compile_id") else ""
            if p.get("origin") == "loaded":
                made = p.get("loaded_from") or []
                cid += f" on a loaded graph ({'made by rank ' + format_ranks(made) if made else 'unpickled'})"
            if p.get("module"):
                cid += f" in {p['module']}"
            lines.append(st(f"  pipeline {pipeline}{cid}", "bold"))
            lines.append(cols.header(st))
            b = p["before"]
            if b["gid"] and p["traced"]:
                lines.append(cols.row("trace", "", b["gid"], "", _n(b["nodes"]), "", "", "", st))
        lines.extend(_pass_lines(p, st, cols))
    if pipeline is not None:
        lines.extend(ls_output_code.rows(entry, pipeline, st, cols.row, fmt_bytes))
    loose = ls_output_code.rows(entry, None, st, cols.row, fmt_bytes)
    if loose:
        lines.append(st("  generated code of graphs no listed pipeline made", "bold"))
        lines.extend(loose)
    return lines


def _tail_lines(data: dict[str, Any], st: Style) -> list[str]:
    """After the ranks: the nodes note, torch's compile note, unsigned files, reading problems."""
    lines: list[str] = []
    if any(e["passes"] for e in data["ranks"]):
        lines.append("")
        lines.append(
            st(
                "nodes: each graph's nodes and those of its nested subgraphs (higher-order ops' bodies), "
                "counted together",
                "dim",
            )
        )
    if data.get("compile_note"):
        lines.extend(["", st(data["compile_note"], "dim")])
    if data.get("unsigned_files"):
        lines.append("")
        lines.append(st("not signed (replay needs --trust to read these):", "yellow", "bold"))
        lines.extend(f"  {n}" for n in data["unsigned_files"])
    if data.get("read_errors"):
        lines.append("")
        lines.append(st("reading problems:", "red", "bold"))
        lines.extend(f"  {e}" for e in data["read_errors"])
    return lines


def _n(n: Any) -> str:
    return "?" if n is None else str(n)


def _pad(text: str, width: int, styled: str | None = None) -> str:
    """Left-justify `text` to `width`, printing `styled` (same text with colour codes) instead."""
    return (styled if styled is not None else text) + " " * max(0, width - len(text))


NAME_MAX = 44  # a longer pass name loses its middle: its number and its end stay readable


def elide_middle(text: str, width: int) -> str:
    """`text` in at most `width` characters, its middle replaced by one '…'."""
    if len(text) <= width:
        return text
    head = (width - 1 + 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


@dataclass
class Columns:
    """The widths of one rank's pass table, measured from what it shows (the role column only
    when a pass has an output other than `out`)."""

    name: int = 32
    role: int = 0
    gid: int = 18
    nodes: int = 5

    @classmethod
    def measure(cls, entry: dict) -> "Columns":
        names, roles, gids, counts = ["pass", "trace", "inductor codegen"], [], [], []
        for p in entry["passes"]:
            names.append(f"#{p['seq']} {p['name']}")
            gids.append(p["before"]["gid"] or "")
            counts.append(_n(p["before"]["nodes"]))
            for role, a in p["after"].items():
                roles.extend([role] if role != "out" else [])
                gids.append(a["gid"] or "")
                counts.append(_n(a["nodes"]))
        gids.extend(oc["oid"] or "" for oc in entry.get("output_code") or [])
        # max over lists, never max(5, *xs): a rank that ran no pass has no gids or counts at all
        return cls(
            name=min(NAME_MAX, max(map(len, names))),
            role=max(map(len, roles), default=0) and max([4, *map(len, roles)]),
            gid=max([5, *map(len, gids)]),
            nodes=max([4, *map(len, counts)]),
        )

    def row(
        self,
        name: str,
        role: str,
        gid: str,
        before: str,
        after: str,
        delta: str,
        size: str,
        tail: str,
        st: Style,
        delta_style: tuple = (),
        name_style: tuple = (),
    ) -> str:
        name = elide_middle(name, self.name)
        n = self.nodes
        return (
            "    "
            + _pad(name, self.name, st(name, *name_style))
            + ("  " + _pad(role, self.role) if self.role else "")
            + "  "
            + _pad(gid, self.gid)
            + f"  {before:>{n}} {'->' if before.strip() else '  '} {after:<{n}}  "
            + _pad(delta, 7, st(delta, *delta_style))
            + f" {size:>9}"
            + (f"  {tail}" if tail else "")
        ).rstrip()

    def header(self, st: Style) -> str:
        nodes = "nodes".rjust(self.nodes) if self.nodes >= 5 else "nodes"
        return st(
            self.row("pass", "role", "graph", nodes, "", "delta", "size", "time / source", Style(False)).replace(
                "->", "  "
            ),
            "dim",
        )


def _pass_lines(p: dict, st: Style, cols: Columns) -> list[str]:
    out = []
    name = elide_middle(f"#{p['seq']} {p['name']}", cols.name)
    tail = []
    if p.get("wall_s") is not None:
        tail.append(f"{p['wall_s'] * 1000:.1f} ms")
    if p.get("source"):
        tail.append(p["source"])
    if p.get("blob_bytes"):
        tail.append(f"blobs {fmt_bytes(p['blob_bytes'])}")
    if p.get("capture_errors"):
        tail.append(st(f"{p['capture_errors']} capture errors", "yellow"))
    if p["status"] == "raised":
        out.append(
            "    "
            + _pad(name, cols.name, st(name, "red"))
            + " "
            + st(f"raised {p.get('exception') or ''}", "red")
            + ("  " + "  ".join(tail) if tail else "")
        )
        return out
    if p["status"] == "incomplete":
        out.append("    " + _pad(name, cols.name, st(name, "red")) + " " + st("started, never finished", "red"))
        return out
    if p["before"]["gid"] is None:
        # a graph torch logged on its own (traced)
        for role, a in p["after"].items():
            r = "" if role == "out" else role
            out.append(
                cols.row(name, r, a["gid"], "", _n(a["nodes"]), "", fmt_bytes(a["bytes"]), p.get("source") or "", st)
            )
        return out
    first = True
    for role, a in p["after"].items():
        delta = a["delta"]
        ds: tuple = ()
        if delta is None:
            d = ""
        elif delta == 0:
            d = "+0" if a["gid"] != p["before"]["gid"] else "same"
            ds = ("dim",)
        else:
            d = f"{delta:+d}"
            ds = ("green",) if delta > 0 else ("yellow",)
        out.append(
            cols.row(
                name if first else "",
                "" if role == "out" else role,
                a["gid"],
                _n(p["before"]["nodes"]),
                _n(a["nodes"]),
                d,
                fmt_bytes(a["bytes"]),
                "  ".join(tail) if first else "",
                st,
                ds,
            )
        )
        first = False
    if not p["after"]:
        out.append("    " + name + " (no output graph)")
    return out


def _error_lines(errs: list[dict], st: Style) -> list[str]:
    out = []
    for e in errs[:10]:
        where = f" in pass #{e['seq']} {e['pass']}" if e.get("pass") else ""
        out.append(st(f"  capture error{where} ({e.get('where')}): {e.get('type')}: {e.get('message')}", "yellow"))
    if len(errs) > 10:
        out.append(st(f"  ... {len(errs) - 10} more capture errors", "yellow"))
    return out


def run(args: argparse.Namespace) -> int:
    cap = open_or_fail(args.dir, args.source)
    with cap:
        ranks = cap.ranks
        if args.rank:
            missing = [r for r in args.rank if r not in ranks]
            if missing:
                print(f"graphtrain-inspect ls: no rank {missing[0]} in {args.dir} (ranks: {ranks})", file=sys.stderr)
                return 2
            ranks = sorted(args.rank)
        if args.verify:
            for r in ranks:
                log = cap.log_file(r)
                if log is not None:
                    log.verify()
        data = listing(cap, ranks, classes=True if args.classes else None)
        if args.json:
            sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n")
        else:
            st = Style(want_color(args.color))
            sys.stdout.write("\n".join(render(data, st, fold=not args.all)) + "\n")
    return 0
