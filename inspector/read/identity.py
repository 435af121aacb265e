"""What ran where, from evidence: a rank's passes cut into pipelines by lineage, and pipelines
named so that the same pipeline has the same key on every rank (never paired by position alone).

A pipeline is a run of passes over one lineage: each pass received the graph the one before it
returned. Format 4 logs say so per pass (`input_from`, the very graph object, `capture/lineage.py`);
older logs are chained by graph id within a compile, as before.

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


def shared_graphs(passes_by_rank: dict[int, list[PassRecord]]) -> dict[str, list[int]]:
    """Graphs some rank ran without making them while another rank's pass made them: gid -> the
    ranks whose passes produced it. (A graph that only one rank ever saw is nobody's to share.)"""
    produced: dict[str, set[int]] = {}
    for r, passes in passes_by_rank.items():
        for p in passes:
            if p.status == "ok":
                for g in p.after.values():
                    produced.setdefault(g, set()).add(r)
    out: dict[str, set[int]] = {}
    for r, passes in passes_by_rank.items():
        mine = {g for p in passes if p.status == "ok" for g in p.after.values()}
        for p in passes:
            g = p.before
            if g is None or not p.traced or g in mine:
                continue
            others = produced.get(g, set()) - {r}
            if others:
                out.setdefault(g, set()).update(others)
    return {g: sorted(rs) for g, rs in out.items()}


def split_at_shared(passes: list[PassRecord], shared: dict[str, list[int]]) -> None:
    """Cut a rank's pipelines where a pass receives a shared graph that its pipeline did not start
    from: what follows are load-time passes (run by every rank on the loaded graph)."""
    if not shared:
        return
    parents = {p.parent for p in passes if p.parent is not None}
    start: dict[int, str | None] = {}  # pipeline -> the gid it starts from
    remap: dict[int, int] = {}
    nxt = max((p.pipeline for p in passes), default=-1) + 1
    for p in passes:
        if p.seq in parents:
            continue
        pl = remap.get(p.pipeline, p.pipeline)
        if pl not in start:
            start[pl] = p.before
        elif p.before in shared and start[pl] != p.before:
            remap[p.pipeline] = pl = nxt
            start[pl] = p.before
            nxt += 1
            p.traced = True
        p.pipeline = pl
    # renumber in order of first appearance, so pipeline indices stay in seq order
    order: dict[int, int] = {}
    for p in passes:
        if p.seq not in parents:
            order.setdefault(p.pipeline, len(order))
    for p in passes:
        if p.seq not in parents:
            p.pipeline = order[p.pipeline]
    first_child: dict[int, int] = {}
    for p in passes:
        if p.seq not in parents and p.parent is not None:
            first_child.setdefault(p.parent, p.pipeline)
    for p in passes:
        if p.seq in parents and p.seq in first_child:
            p.pipeline = first_child[p.seq]


def pipeline_key(cid: str, origin: str, ordinal: int, module: str | None) -> str:
    return f"{cid}#{'L' if origin == LOADED else ''}{ordinal}" + (f"@{module}" if module else "")


def parse_key(key: str) -> tuple[str, bool, str, str | None]:
    """(compile id, loaded, ordinal, module) of a pipeline key."""
    cid, _, rest = key.rpartition("#")
    k, _, module = rest.partition("@")
    loaded = k.startswith("L")
    return cid, loaded, k[1:] if loaded else k, module or None
