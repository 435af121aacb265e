"""What ran where, from evidence: a rank's passes cut into pipelines by lineage, and pipelines
named so that the same pipeline has the same key on every rank (never paired by position alone).

A pipeline is a run of passes over one lineage: each pass received the graph the one before it
returned, that very object, unchanged in between. Format 4 logs say so per pass (`input_from`:
`capture/lineage.py` follows graph objects); older logs are chained by graph id within a compile.

A graph is *loaded* where a rank runs it without having made it: the capture saw it come out of
`GraphPickler.loads` (`input == "loaded"`), or it starts a pipeline on one rank and was produced
by a pass on another (rank 0 compiled and broadcast it; its id is the same on every rank that
loaded it). On the rank that produced it, the passes after it are cut into a pipeline of their
own as well: they are the load-time passes every rank runs, and pair with theirs.

Keys: `<compile id>#<L?><ordinal>[@<module>]`, the ordinal counted among the rank's pipelines of
the same compile id, origin (`L`: loaded) and module path. A capture of format 1-3 with no loaded
graph keeps the keys it always had (`0/1#0`, `#2`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.read.capture_records import PassRecord

LOADED = "loaded"
TRACED = "traced"


def chain_pipelines(passes: list[PassRecord]) -> None:
    """Set `traced` and `pipeline` of one rank's passes (seq order). Passes that contain other
    recorded passes take the pipeline of their first child."""
    parents = {p.parent for p in passes if p.parent is not None}
    if any(p.input is not None for p in passes):
        _chain_by_lineage(passes, parents)
    else:
        _chain_by_graph_id(passes, parents)
    _place_containers(passes, parents)


def _place_containers(passes: list[PassRecord], parents: set[int]) -> None:
    """A pass that contains others takes its first child's pipeline (the last one, with no
    child finished); it never starts a pipeline of its own."""
    first_child: dict[int, int] = {}
    for p in passes:
        if p.seq not in parents and p.parent is not None:
            first_child.setdefault(p.parent, p.pipeline)
    last = max((p.pipeline for p in passes if p.seq not in parents), default=0)
    for p in passes:
        if p.seq in parents:
            p.pipeline = first_child.get(p.seq, last)
            p.traced = False


def _chain_by_lineage(passes: list[PassRecord], parents: set[int]) -> None:
    by_seq = {p.seq: p for p in passes}
    latest_leaf: dict[int, int] = {}  # container seq -> its latest non-container descendant's seq
    pipeline = -1
    for p in passes:
        if p.seq in parents:
            continue
        src = p.input_from if p.input == "pass" else None
        if src is not None and src in parents:
            src = latest_leaf.get(src)
        q = by_seq.get(src) if src is not None else None
        # the same object but another graph than the pass returned: a step no pass records changed
        # it in between (AOT's lowering of the partitioner's output): a pipeline of its own, as by id
        if q is not None and p.before is not None and p.before not in q.after.values():
            q = None
        if q is None or q.seq in parents:
            pipeline += 1
            p.traced = True
            p.pipeline = pipeline
        else:
            p.traced = False
            p.pipeline = q.pipeline
        anc = p.parent
        while anc is not None and anc in by_seq:
            latest_leaf[anc] = p.seq
            anc = by_seq[anc].parent


def _chain_by_graph_id(passes: list[PassRecord], parents: set[int]) -> None:
    """Logs before format 4: a pass starts a pipeline when no earlier pass of its compile produced
    the graph it receives, or when it belongs to another compile than the pass before it. A
    recompile often starts from the very graph its first compile did (the guard that failed
    changed nothing in the graph): its passes are still its own."""
    produced: dict[str | None, set[str]] = {}
    pipeline = -1
    last_cid: str | None = None
    for p in passes:
        if p.seq in parents:
            continue
        mine = produced.setdefault(p.compile_id, set())
        p.traced = p.before is not None and p.before not in mine
        if p.traced or pipeline < 0 or p.compile_id != last_cid:
            pipeline += 1
        last_cid = p.compile_id
        p.pipeline = pipeline
        mine.update(p.after.values())


@dataclass
class Shared:
    """A graph some rank ran without making it, made by another rank's pass."""

    producers: list[int]  # ranks whose pass made it (from another graph)
    loaders: list[int]  # ranks whose pipeline starts from it
    runs: set[tuple[str, ...]] = field(default_factory=set)  # pass names of those pipelines


def _made(p: PassRecord) -> list[str]:
    """Graphs a finished pass made: outputs other than the graph it received (a pass that
    returns its input unchanged made nothing, though its record names the graph)."""
    return [g for g in p.after.values() if g != p.before] if p.status == "ok" else []


def shared_graphs(passes_by_rank: dict[int, list[PassRecord]]) -> dict[str, Shared]:
    """Graphs a rank ran from the start of a pipeline without making them, while another rank's
    pass made them: rank 0 compiled and broadcast it, the others loaded it. By graph id, so it
    holds for any way of loading (GraphPickler, torch.load, a file)."""
    made: dict[str, set[int]] = {}
    for r, passes in passes_by_rank.items():
        for p in passes:
            for g in _made(p):
                made.setdefault(g, set()).add(r)
    out: dict[str, Shared] = {}
    for r, passes in passes_by_rank.items():
        mine: set[str] = set()  # graphs this rank made so far
        pipelines: dict[int, list[PassRecord]] = {}
        for p in passes:
            pipelines.setdefault(p.pipeline, []).append(p)
        for pl in pipelines.values():
            first = next((p for p in pl if p.traced), pl[0])
            start = first.before
            if start is None or start in mine:
                continue
            others = made.get(start, set()) - {r}
            if others:
                sh = out.setdefault(start, Shared(sorted(others), []))
                sh.producers = sorted(set(sh.producers) | others)
                sh.loaders = sorted(set(sh.loaders) | {r})
                sh.runs.add(tuple(p.name for p in pl if p.parent is None))
            for p in pl:
                mine.update(_made(p))
    return out


def split_at_shared(passes: list[PassRecord], shared: dict[str, Shared]) -> None:
    """Cut a rank's pipeline where it goes on with a shared graph it made: the passes from there
    are the load-time passes the loading ranks run on that graph, recognised by their names (the
    same passes, in order, as a loading rank's pipeline). Without such a match nothing is cut:
    a graph id alone does not say where compile time ended."""
    if not shared:
        return
    parents = {p.parent for p in passes if p.parent is not None}
    pipelines: dict[int, list[PassRecord]] = {}
    for p in passes:
        if p.seq not in parents:
            pipelines.setdefault(p.pipeline, []).append(p)
    nxt = max(pipelines, default=-1) + 1
    for pl in list(pipelines.values()):
        start = next((p for p in pl if p.traced), pl[0]).before
        names = [p.name for p in pl]
        for i, p in enumerate(pl):
            sh = shared.get(p.before) if p.before is not None else None
            if i == 0 or sh is None or p.before == start:
                continue
            if not any(tuple(names[i : i + len(run)]) == run for run in sh.runs if run):
                continue
            for q in pl[i:]:
                q.pipeline = nxt
            p.traced = True
            nxt += 1
            break
    # renumber in order of first appearance, so pipeline indices stay in seq order
    order: dict[int, int] = {}
    for p in passes:
        if p.seq not in parents:
            order.setdefault(p.pipeline, len(order))
    for p in passes:
        if p.seq not in parents:
            p.pipeline = order[p.pipeline]
    _place_containers(passes, parents)


def pipeline_key(cid: str, origin: str, ordinal: int, module: str | None) -> str:
    return f"{cid}#{'L' if origin == LOADED else ''}{ordinal}" + (f"@{module}" if module else "")


def parse_key(key: str) -> tuple[str, bool, str, str | None]:
    """(compile id, loaded, ordinal, module) of a pipeline key."""
    cid, _, rest = key.rpartition("#")
    k, _, module = rest.partition("@")
    loaded = k.startswith("L")
    return cid, loaded, k[1:] if loaded else k, module or None
