"""`Capture`: an opened capture's ranks, passes and graphs, read on demand and cached.

`capture_index.open_capture` makes one (and the progressive reader, by the same indexing). Graph
payloads are decoded when asked (node tables LRU-cached by node count, undecoded rows by bytes).
"""

from __future__ import annotations

from functools import partial
from itertools import compress, repeat
from operator import is_
from typing import Any, Callable, Literal, Sequence

import orjson

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.capture.shared.logformat import NodeRow
from graphtrain_inspect.inspector.read import pipelines, torch_trace
from graphtrain_inspect.inspector.read.capture_records import (
    GraphRef,
    PassRecord,
    Pipeline,
    RankRecords,
    float_or_none,
    int_or,
    str_or_none,
)
from graphtrain_inspect.inspector.read.fxtext import parse_graph_code
from graphtrain_inspect.inspector.read.graphmodel import GraphTables, SubGraph, derive_devices, derive_symbols, row_ok
from graphtrain_inspect.inspector.read.logscan import LogFile, ReadError, Record
from graphtrain_inspect.inspector.read.row_digests import RowDigests, laid_over
from graphtrain_inspect.inspector.read.validators import clean_devices, clean_rank_table, clean_symbols
from graphtrain_inspect.inspector.read.weighted_cache import WeightedLRU

_TABLE_CACHE_SIZE = 256
# parsed node tables cost ~1 KB a node: keep at most this many nodes (a few of the largest graphs)
_TABLE_CACHE_NODES = 600_000
# node-table rows as undecoded lines (`node_rows`), by payload bytes
_ROWS_CACHE_BYTES = 96 << 20
# decoded rows kept by their line (bytes) so that a row the next pass or another rank left as it
# was is decoded and validated once: the pool is emptied when it holds this many rows, which
# bounds it whatever the capture's size
_ROW_POOL_ROWS = 300_000
# what `nearest_source` reads of a row line without a stack: `nearest_from` reads only the stack
_NO_STACK: NodeRow = {"name": "", "op": ""}
# lookups of a row by name in one table made by searching its stored lines (`_searched_named`),
# before its lines are indexed instead
_SEARCHES = 4

# torch's own record kinds that hold FX graph code (top-level envelope keys)


def _pooled_rows(
    pool: dict, keys: Sequence[Any], rows: Sequence[int], line_of: Callable[[int], bytes | None]
) -> list[NodeRow | Literal[False]] | None:
    """Rows `rows` (by each row's pool key in `keys`) from `pool`, those not there decoded into it
    (False: not a valid row); None where a line is not there (a row that is not what its digest
    says) or a line holds more than one value. Raises orjson.JSONDecodeError."""
    got: list[Any] = list(map(pool.get, map(keys.__getitem__, rows)))  # None: not in the pool yet
    todo = list(compress(range(len(got)), map(is_, got, repeat(None))))
    if todo:
        read = [line_of(rows[t]) for t in todo]
        if None in read:
            return None
        lines: list[bytes] = read  # type: ignore[assignment]  # no None among them
        # the rows not in the pool, decoded in one call: a JSON array of their lines, each
        # without its separating comma (as logformat.decode_row reads one)
        body = b",".join(map(logformat.row_json, lines))
        decoded = orjson.loads(b"[" + body + b"]")
        if len(decoded) != len(todo):
            return None  # a line holding more than one value: not a row per line
        for t, line, row in zip(todo, lines, decoded):
            got[t] = pool[keys[rows[t]]] = row if row_ok(row, line) else False
    return got


def _sub_at(heads: Sequence[bytes], path: str) -> int | None:
    """The subgraph of `path` among a table's subgraph heads; None where none has it or a head
    before it does not parse (the table is then read whole)."""
    for k, h in enumerate(heads):
        at = logformat.sub_head_path(h)
        if at is None:
            return None
        if at == path:
            return k
    return None


# The largest world whose ranks without a log are listed (2**20: far past any real job's size).
WORLD_LIMIT = 1 << 20


class Capture:
    """A capture directory or a set of TORCH_TRACE logs, indexed. See the module docstring."""

    # off: no `gti_row_digests` record is laid over its table (tables are read whole, as without
    # records); tests and benchmarks compare both ways on one capture
    reads_row_digests = True

    def __init__(self, path: str, kind: str):
        self.path = path
        self.kind = kind  # "capture" | "torch_trace"
        self.manifest: dict[str, Any] | None = None
        self.errors: list[ReadError] = []
        self.torch_trace_dir: str | None = None
        # the signature verdict replay checked (inspector.replay.plan.check_origin); None until then
        self.signature: Any = None
        # the files it was read from, each read once (inspector.read.read_once.Snapshot); None when
        # read by path, as browsing does
        self.snapshot: Any = None
        # each writer process's status file (status/rank_<R>.<pid>.json), by rank: how its log ended
        self.statuses: dict[int, list[dict[str, Any]]] = {}
        self._ranks: dict[int, RankRecords] = {}
        # logs not read as the rank their name says (capture_index.leave_out_strays): rank -> (path, problem, why)
        self.left_out: dict[int, tuple[str, str, str]] = {}
        self._tables = WeightedLRU(_TABLE_CACHE_NODES, _TABLE_CACHE_SIZE)
        self._rows = WeightedLRU(_ROWS_CACHE_BYTES, _TABLE_CACHE_SIZE)
        self._derived: dict[tuple[str, int, str | None], Any] = {}
        self._row_pool: dict[bytes, NodeRow | Literal[False]] = {}  # row line -> its row, or False (not a row)
        self._digest_pool: dict[int, NodeRow | Literal[False]] = {}  # the same by row digest (gti_row_digests)
        # graphs ranks ran without making them, made by other ranks' passes: gid -> producing ranks
        self.shared: dict[str, pipelines.Shared] = {}
        # the job's nodes (node_parts): their records, and the folder of each rank read from several
        self.nodes: list[dict[str, Any]] = []
        self.folders: list[str] = []
        self.rank_dirs: dict[int, str] = {}

    # -- ranks, as opening files them (inspector.read.capture_index) ------------------------------

    def add_rank(self, rank: int, log: LogFile) -> RankRecords:
        """File `log` as rank `rank`'s; its records are indexed by kind into what this returns."""
        rd = self._ranks[rank] = RankRecords(rank)
        rd.log = log
        return rd

    def rank_records(self, rank: int) -> RankRecords | None:
        return self._ranks.get(rank)

    def leave_out(self, rank: int, problem: str, why: str) -> None:
        """Take a rank's log out of the capture's ranks, saying why (`left_out`, a read error)."""
        rd = self._ranks.pop(rank)
        path = rd.log.path if rd.log is not None else self.path
        self.left_out[rank] = (path, problem, why)
        self.errors.append(ReadError(path, None, why, rank))

    def adopt_rank(self, other: Capture, rank: int) -> None:
        """Take `other`'s rank as this capture's (the folders of one job's nodes read as one world)."""
        self._ranks[rank] = other._ranks[rank]

    # -- ranks, headers --------------------------------------------------------------------------

    @property
    def ranks(self) -> list[int]:
        return sorted(self._ranks)

    @property
    def world_size(self) -> int:
        sizes = [s for r in self._ranks.values() if r.header and isinstance(s := r.header.get("world_size"), int)]
        return max(sizes) if sizes else (max(self._ranks) + 1 if self._ranks else 0)

    @property
    def absent_ranks(self) -> list[int]:
        """Ranks of the world with no log (a rank that ran no captured pass writes none: under
        compile-on-one-rank, those that loaded its graph). A world size past WORLD_LIMIT (a
        damaged or hostile header) is not expanded: every list of ranks is bounded by it, so a
        header's claim never sizes a loop or a set beyond the logs at hand."""
        world = self.world_size
        return [r for r in range(world) if r not in self._ranks] if world <= WORLD_LIMIT else []

    def dir_of(self, rank: int) -> str | None:
        """The folder a rank's log was read from, when the capture is several folders (else None)."""
        return self.rank_dirs.get(rank)

    def all_errors(self) -> list[ReadError]:
        """Read errors of the capture and of every log, in file order (decode errors included)."""
        out = list(self.errors)
        for r in self.ranks:
            log = self._ranks[r].log
            if log is not None:
                out.extend(log.errors)
        return out

    def log_file(self, rank: int) -> LogFile | None:
        return self._ranks[rank].log if rank in self._ranks else None

    def header(self, rank: int) -> dict[str, Any] | None:
        return self._ranks[rank].header if rank in self._ranks else None

    def end(self, rank: int) -> dict[str, Any] | None:
        r = self._ranks.get(rank)
        if r is None or r.end_rec is None or r.log is None:
            return None
        v = r.log.payload(r.end_rec)
        return v if isinstance(v, dict) else None

    def rank_exit(self, rank: int) -> dict[str, Any] | None:
        """How the rank's process ended, as its parent recorded it and the launcher wrote it into
        the manifest (capture.child_exits): {"exit_code": int, "signal": name or None}; None when
        not recorded."""
        m = self.manifest if isinstance(self.manifest, dict) else {}
        ranks = m.get("ranks")
        entry = ranks.get(str(rank)) if isinstance(ranks, dict) else None
        ex = entry.get("exit") if isinstance(entry, dict) else None
        if not isinstance(ex, dict) or type(ex.get("exit_code")) is not int:
            return None
        sig = ex.get("signal")
        return {"exit_code": ex["exit_code"], "signal": sig if isinstance(sig, str) else None}

    def stopped(self, rank: int) -> str | None:
        """Why the rank's capture stopped writing before its process ended (a failed write, its log
        deleted), from the writers' status files or the manifest; None if it did not stop."""
        for st in self.statuses.get(rank, ()):
            if st.get("state") == "stopped":
                return str(st.get("reason") or "stopped writing")
        m = self.manifest or {}
        stopped = m.get("stopped_ranks")
        if isinstance(stopped, dict) and stopped.get(str(rank)):
            return str(stopped[str(rank)])
        return None

    def records(self, rank: int) -> list[Record]:
        r = self._ranks.get(rank)
        return r.log.records if r is not None and r.log is not None else []

    def payload(self, rank: int, record: Record) -> Any:
        log = self.log_file(rank)
        return None if log is None else log.payload(record)

    def rank_table(self, rank: int) -> dict[str, Any] | None:
        """The last `gti_ranks` record of the rank (process groups, meshes, coordinates)."""
        r = self._ranks.get(rank)
        if r is None or r.log is None:
            return None
        for rec in reversed(r.rank_recs):
            v = r.log.payload(rec)
            if isinstance(v, dict):
                return clean_rank_table(v)
        return None

    def local_rank(self, rank: int) -> int | None:
        h = self.header(rank)
        if h and isinstance(h.get("local_rank"), int):
            return h["local_rank"]
        return None

    def capture_errors(self, rank: int) -> list[dict[str, Any]]:
        """`gti_error` payloads of the rank: instrumentation failures (training went on)."""
        r = self._ranks.get(rank)
        if r is None or r.log is None:
            return []
        out = []
        for rec in r.error_recs:
            v = r.log.payload(rec)
            if isinstance(v, dict):
                out.append(v)
        return out

    def failures(self, rank: int) -> list[dict[str, Any]]:
        """`gti_failure` payloads of the rank: the exception that ended its program (capture.failure),
        one per process whose program raised; [] for a rank that did not raise (or an older capture)."""
        log = self.log_file(rank)
        if log is None:
            return []
        out = []
        for rec in log.records:
            if rec.kind == logformat.FAILURE:
                v = log.payload(rec)
                if isinstance(v, dict):
                    out.append(v)
        return out

    # -- passes ------------------------------------------------------------------------------------

    def passes(self, rank: int) -> list[PassRecord]:
        """Pass applications of the rank in order (seq), raised and unfinished ones included."""
        r = self._ranks.get(rank)
        if r is None:
            return []
        if r.passes is None:
            self._identify()
        return r.passes if r.passes is not None else []

    def _identify(self) -> None:
        """Every rank's passes, cut into pipelines by identity (`identity`): a graph one rank runs
        and another rank's pass produced is shared, and the passes after it are load-time passes."""
        for rd in self._ranks.values():
            if rd.passes is None:
                rd.passes = torch_trace.torch_passes(rd) if self.kind == "torch_trace" else self._capture_passes(rd)
        if self.kind != "capture" or len(self._ranks) < 2:
            return
        by_rank = {r: rd.passes for r, rd in self._ranks.items() if rd.passes}
        self.shared = pipelines.shared_graphs(by_rank)
        for passes in by_rank.values():
            pipelines.split_at_shared(passes, self.shared)

    def pass_by_seq(self, rank: int, seq: int) -> PassRecord | None:
        for p in self.passes(rank):
            if p.seq == seq:
                return p
        return None

    def find_passes(self, name: str, rank: int | None = None) -> list[PassRecord]:
        """Passes whose name (or `module:qualname`, or `#seq`) matches, on one rank or all."""
        out = []
        for r in [rank] if rank is not None else self.ranks:
            for p in self.passes(r):
                if name in (p.name, p.qualname, f"#{p.seq}", str(p.seq)) or (
                    p.qualname and p.qualname.endswith(":" + name)
                ):
                    out.append(p)
        return out

    def pass_names(self) -> list[str]:
        seen: dict[str, None] = {}
        for r in self.ranks:
            for p in self.passes(r):
                seen.setdefault(p.name, None)
        return list(seen)

    def pipelines(self, rank: int) -> list[Pipeline]:
        """The rank's pipelines, keyed by identity (`pipelines.pipeline_key`): compile id, origin
        (traced here or loaded), ordinal among those, module path."""
        groups: dict[int, list[PassRecord]] = {}
        for p in self.passes(rank):
            groups.setdefault(p.pipeline, []).append(p)
        out = []
        ordinal: dict[tuple[str, str, str | None], int] = {}
        for idx in sorted(groups):
            ps = groups[idx]
            cid = next((p.compile_id for p in ps if p.compile_id), None) or ""
            first = next((p for p in ps if p.traced), None) or ps[0]
            traced = first.before
            sh = self.shared.get(traced) if traced is not None else None
            loaded_from = sh.producers if sh is not None else []
            origin = pipelines.LOADED if (first.input == pipelines.LOADED or loaded_from) else pipelines.TRACED
            module = first.module
            k = ordinal.get((cid, origin, module), 0)
            ordinal[(cid, origin, module)] = k + 1
            key = pipelines.pipeline_key(cid, origin, k, module)
            out.append(Pipeline(rank, idx, key, ps, traced, origin, module, list(loaded_from)))
        return out

    def _capture_passes(self, r: RankRecords) -> list[PassRecord]:
        log = r.log
        assert log is not None
        by_seq: dict[int, PassRecord] = {}
        for rec in r.pass_recs:
            v = log.payload(rec)
            if not isinstance(v, dict) or type(v.get("seq")) is not int:
                continue
            # A log may come from anywhere: every field is taken only with the type it must have.
            after = a if isinstance(a := v.get("after"), dict) else {}
            blobs = b if isinstance(b := v.get("blobs"), dict) else {}
            by_seq[v["seq"]] = PassRecord(
                rank=r.rank,
                seq=v["seq"],
                name=str(v.get("name") or "?"),
                before=str_or_none(v.get("before")),
                after={str(k): g for k, g in after.items() if isinstance(g, str) and g},
                pipeline=int_or(v.get("pipeline"), 0),
                traced=bool(v.get("traced")),
                status=str(v.get("status") or "ok"),
                qualname=str_or_none(v.get("qualname")),
                source=str_or_none(v.get("source")),
                subsystem=str_or_none(v.get("subsystem")),
                compile_id=str_or_none(v.get("compile_id")),
                exception=v.get("exception") if isinstance(v.get("exception"), dict) else None,
                nodes=v.get("nodes") if isinstance(v.get("nodes"), dict) else None,
                wall_s=float_or_none(v.get("wall_s")),
                time=float_or_none(v.get("time")),
                capture_errors=int_or(v.get("capture_errors"), 0),
                parent=int_or(v.get("parent"), None),
                input=str_or_none(v.get("input")),
                input_from=int_or(v.get("input_from"), None),
                module=str_or_none(v.get("module")),
                blobs={str(k): ref for k, b in blobs.items() if (ref := logformat.blob_ref(b)) is not None},
                record=rec,
            )
        last_pipeline = max((p.pipeline for p in by_seq.values()), default=0)
        for rec in r.start_recs:
            v = log.payload(rec)
            if not isinstance(v, dict) or type(v.get("seq")) is not int or v["seq"] in by_seq:
                continue
            by_seq[v["seq"]] = PassRecord(
                rank=r.rank,
                seq=v["seq"],
                name=str(v.get("name") or "?"),
                before=str_or_none(v.get("before")),
                after={},
                pipeline=last_pipeline,
                status="incomplete",
                time=float_or_none(v.get("time")),
                record=rec,
            )
        out = [by_seq[k] for k in sorted(by_seq)]
        self._merge_blobs(r, out)
        pipelines.chain_pipelines(out)
        return out

    def _merge_blobs(self, r: RankRecords, passes: list[PassRecord]) -> None:
        """Since format 3 a graph's blob may be named after the pass records of its graph, by a
        `gti_blob` record (written when the child that made it finished): each pass record that
        names the graph without its blob gets it from there, as a pass record of format 2 named the
        blob of each of its graphs. Blob errors reported after their pass's record (`late`) are
        added to its capture errors. A log without these records (format 1 and 2) reads as it did."""
        log = r.log
        assert log is not None
        refs: dict[str, dict[str, Any]] = {}
        for rec in r.blob_recs:
            v = log.payload(rec)
            ref = logformat.blob_ref(v)
            if ref is not None and isinstance(v.get("gid"), str):
                refs.setdefault(v["gid"], ref)
        late: dict[int, int] = {}
        for rec in r.error_recs:
            v = log.payload(rec)
            if isinstance(v, dict) and v.get("late") is True and type(v.get("seq")) is int:
                late[v["seq"]] = late.get(v["seq"], 0) + 1
        if not refs and not late:
            return
        for p in passes:
            for gid in (p.before, *p.after.values()):
                if gid is not None and gid not in p.blobs and gid in refs:
                    p.blobs[gid] = refs[gid]
            p.capture_errors += late.get(p.seq, 0)

    # -- graphs --------------------------------------------------------------------------------

    def graphs(self, rank: int) -> dict[str, GraphRef]:
        r = self._ranks.get(rank)
        return r.graphs if r is not None else {}

    def graph(self, rank: int, gid: str) -> GraphRef | None:
        return self.graphs(rank).get(gid)

    def node_count(self, rank: int, gid: str | None) -> int | None:
        ref = self.graph(rank, gid) if gid else None
        if ref is None or not gid:
            return None
        if ref.nodes is None:
            tables = self.node_table(rank, gid)
            if tables is not None:
                ref.nodes = tables.node_count
        return ref.nodes

    def _payload(self, rank: int, gid: str, kind: str) -> Any:
        ref = self.graph(rank, gid)
        if ref is None:
            return None
        rec = ref.records.get(kind)
        log = self.log_file(rank)
        if rec is None or log is None:
            return None
        v = log.payload(rec)
        for alt in ref.alternates.get(kind, ()) if v is None else ():
            v = log.payload(alt)
            if v is not None:
                break
        return v

    def graph_code(self, rank: int, gid: str) -> str | None:
        v = self._payload(rank, gid, logformat.GRAPH_CODE)
        return v if isinstance(v, str) else None

    def node_table(self, rank: int, gid: str) -> GraphTables | None:
        """Node tables of a graph: the captured table, else parsed from its code; None if neither."""
        key = self.content_key(rank, gid)
        if key in self._tables:
            return self._tables.get(key)
        tables = self._table_from_rows(rank, gid)
        if tables is None:
            v = self._payload(rank, gid, logformat.NODES)
            if isinstance(v, dict) and isinstance(v.get("graphs"), list):
                tables = GraphTables.from_payload(gid, v, source="table")
            else:
                code = self.graph_code(rank, gid)
                if code is not None:
                    parsed, warnings = parse_graph_code(code)
                    tables = GraphTables.from_payload(gid, parsed, source="text", warnings=warnings)
        self._tables.put(key, tables, 1 + (tables.node_count if tables is not None else 0))
        return tables

    def node_row(self, rank: int, gid: str, path: str, name: str) -> tuple[bool, NodeRow | None]:
        """(whether the graph has that subgraph, `node_table(...).subgraph(path).node(name)`)
        without decoding the whole table when it is not decoded yet: the one row line of that
        name, found in the undecoded rows. The whole table where the lines cannot say (no such
        line, several, or one that is not a valid row)."""
        got = self._lines_named(rank, gid, path, name)
        if got is not None and len(got[1]) == 1:
            try:
                row = self.decoded_row(got[0][got[1][0]])
            except ValueError:  # a row not what its digest says, or a line that does not parse
                row = None
            if row is not None:
                return True, row
        tables = self.node_table(rank, gid)
        sub = tables.subgraph(path) if tables is not None else None
        return (True, sub.node(name)) if sub is not None else (False, None)

    def nearest_source(
        self, rank: int, gid: str, path: str, name: str, reach: int
    ) -> tuple[bool, dict[str, Any] | None]:
        """(True, `source_lines.nearest_source` of node `name` in subgraph `path`) from its
        undecoded rows when the table is not decoded yet, each row in reach decoded as the
        search reaches it (the nearest with a stack is a row or two away: a capture with 400
        findings read 20k rows for them when every row in reach was decoded; a row line without
        a stack is not decoded at all, as the search reads nothing else of it); (False, None)
        where the lines cannot say (no such line, several, or a row reached that is not valid,
        which the decoded table would leave out): then read the whole table."""
        from graphtrain_inspect.inspector.read.source_lines import nearest_from

        got = self._lines_named(rank, gid, path, name)
        if got is None or len(got[1]) != 1:
            return False, None
        lines, (at,) = got

        def row_at(i: int) -> NodeRow:
            line = lines[i]
            if b'"stack":' not in line:
                return _NO_STACK  # no stack to parse: not decoded (a GPU graph's rows have none)
            row = self.decoded_row(line)
            if row is None:
                raise ValueError(f"row {i} is not a valid row")
            return row

        try:
            if self.decoded_row(lines[at]) is None:  # the node's own row, checked as `node_row` checks it
                return False, None
            return True, nearest_from(row_at, at, len(lines), reach)
        except ValueError:  # a line that does not parse, no valid row, not what its digest says
            return False, None

    def _lines_named(self, rank: int, gid: str, path: str, name: str) -> tuple[Sequence[bytes], list[int]] | None:
        """The undecoded row lines of subgraph `path` of a table not decoded yet, and the indices
        of those that are the row named `name` (a row line starts with its name); None when the
        lines are not there to read, no subgraph head says `path`, or a head does not parse.
        Indexing the lines may raise ValueError (`SubLines`: a row not what its digest says)."""
        if self.content_key(rank, gid) in self._tables:
            return None
        head = b'{"name":' + orjson.dumps(name) + b","
        searched = self._searched_named(rank, gid, path, head)
        if searched is not None:
            return searched
        subs = self.node_rows(rank, gid)
        k = _sub_at([h for h, _ in subs], path) if subs is not None else None
        if subs is None or k is None:
            return None
        lines = subs[k][1]
        return lines, self._heads_at(rank, gid, k, lines).get(head, [])

    def _searched_named(self, rank: int, gid: str, path: str, head: bytes) -> tuple[Sequence[bytes], list[int]] | None:
        """`_lines_named` by a search of the stored table for the line that starts with `head`,
        where the table has row digests (which say where each line is) and has not been searched
        `_SEARCHES` times yet: a few findings in a large table cost a search each, not the md5
        check and split of its payload and an index of its lines (`check -j 1` of the 30k-node
        benchmark capture whose ranks differ: 1.04-1.07 -> 0.90-0.93 s on the VM);
        many findings in one table (400 on a GPU capture) then go through that index."""
        d = self.row_digests(rank, gid)
        if d is None:
            return None
        key = ("searched", *self.content_key(rank, gid))
        done = self._rows.get(key) or 0
        if done >= _SEARCHES:
            return None
        self._rows.put(key, done + 1, 1)
        k = _sub_at(d.heads, path)
        return (d.sub_lines(k), d.named(k, head)) if k is not None else None

    def _heads_at(self, rank: int, gid: str, sub: int, lines: list[bytes]) -> dict[bytes, list[int]]:
        """The rows of one subgraph's lines by how each line starts, up to the end of its name:
        `{"name":"NAME",` -> the indices of the lines that start so (cached: the checks look up
        hundreds of rows of one graph by name, and a scan of every line each time cost 5 s on a
        GPU capture with 400 findings). A name holding an escaped `",` makes a shorter key, which
        no lookup matches: the caller then reads the table whole."""
        key = ("heads", *self.content_key(rank, gid), sub)
        got = self._rows.get(key)
        if got is None:
            got = {}
            for i, ln in enumerate(lines):
                end = ln.find(b'",', 9)
                got.setdefault(ln[: end + 2] if end >= 0 else ln, []).append(i)
            # weighed as the bytes it holds: each key, and a dict entry and list per line
            self._rows.put(key, got, 1 + sum(map(len, got)) + 120 * len(lines))
        return got

    def decoded_row(self, line: bytes) -> NodeRow | None:
        """One row line of `node_rows`, decoded and validated through the row pool (None: not a
        valid row). Raises orjson.JSONDecodeError when the line does not parse."""
        pool = self._row_pool
        r = pool.get(line)
        if r is None:
            if len(pool) > _ROW_POOL_ROWS:
                pool.clear()
            decoded = logformat.decode_row(line)
            r = pool[line] = decoded if row_ok(decoded, line) else False
        return r or None

    def _table_from_rows(self, rank: int, gid: str) -> GraphTables | None:
        """The node table from its undecoded rows, each distinct row decoded and validated once
        per capture (a row pool): the same tables `GraphTables.from_payload` makes of the whole
        payload, row dicts shared with every table that has the same row. Where the table has row
        digests (`row_digests`), a row whose digest is in the pool is not read, and each row
        read is checked against its digest: a table whose rows are mostly another table's (the
        other rank's, the stage before) costs the few rows it adds, not the md5 check and split of
        its payload; rows are else taken from `node_rows`, keyed by their lines. None when the
        table is not laid out one row per line or a line does not parse alone."""
        d = self.row_digests(rank, gid)
        if d is not None:
            subs = [(head, d.sub_digests(k), partial(d.row, k)) for k, head in enumerate(d.heads)]
            tables = self._table_of(gid, subs, self._digest_pool)
            if tables is not None:
                return tables
        rows = self.node_rows(rank, gid)
        if rows is None:
            return None
        return self._table_of(gid, [(head, lines, lines.__getitem__) for head, lines in rows], self._row_pool)

    def _table_of(
        self, gid: str, subs: Sequence[tuple[bytes, Sequence[Any], Callable[[int], bytes | None]]], pool: dict
    ) -> GraphTables | None:
        """GraphTables of (subgraph head, each row's pool key, row i's line or None) per subgraph,
        rows not in `pool` decoded into it; None where a line is not there or does not parse."""
        if len(pool) > _ROW_POOL_ROWS:
            pool.clear()
        graphs = []
        try:
            for head, keys, line_of in subs:
                h = logformat.decode_sub_head(head)
                if not isinstance(h, dict):
                    return None
                got = _pooled_rows(pool, keys, range(len(keys)), line_of)
                if got is None:
                    return None
                parent = h.get("parent_node")
                nodes: list[NodeRow] = [r for r in got if r]  # drops False
                graphs.append(SubGraph(str(h.get("path") or ""), parent if isinstance(parent, str) else None, nodes))
        except orjson.JSONDecodeError:
            return None
        if not graphs:
            graphs = [SubGraph("", None, [])]
        return GraphTables(gid, graphs, source="table")

    def digest_rows(self, rank: int, gid: str, sub: int, rows: Sequence[int]) -> list[NodeRow] | None:
        """Rows `rows` of subgraph `sub` of a table with row digests, decoded through the digest
        pool (each read checked against its digest); None where there are no digests, a row is
        not what its digest says, does not parse or is no valid row."""
        d = self.row_digests(rank, gid)
        if d is None:
            return None
        if len(self._digest_pool) > _ROW_POOL_ROWS:
            self._digest_pool.clear()
        try:
            got = _pooled_rows(self._digest_pool, d.sub_digests(sub), rows, partial(d.row, sub))
        except orjson.JSONDecodeError:
            return None
        if got is None or False in got:
            return None
        return got  # type: ignore[return-value]  # no False among them (checked above)

    def node_rows(self, rank: int, gid: str, kind: str = logformat.NODES) -> list[tuple[bytes, list[bytes]]] | None:
        """A node table's rows as undecoded JSON lines, per subgraph ([(head, rows)]), for readers
        that compare or filter rows before parsing any (logformat.node_table_rows); None when the
        table is not laid out one row per line or its record does not read back exactly. `kind`:
        another record laid out as a node table (`gti_symbol_rows`)."""
        key = (kind, *self.content_key(rank, gid, kind))
        if key in self._rows:
            return self._rows.get(key)
        rec = self.graph_record(rank, gid, kind)
        log = self.log_file(rank)
        rows = None
        if rec is not None and log is not None:
            got = log.payload_text(rec)
            rows = logformat.node_table_rows(got[1], got[0]) if got is not None else None
        self._rows.put(key, rows, 1 + (rec.end - rec.payload_start if rec is not None else 0))
        return rows

    def row_digests(self, rank: int, gid: str) -> RowDigests | None:
        """The graph's `gti_row_digests` laid over its stored node table (inspector/read/row_digests.py),
        or None where there is none (small tables, older captures) or it does not fit the table."""
        if not self.reads_row_digests:
            return None
        key = ("digests", rank, gid)  # laid over this rank's log
        if key in self._rows:
            return self._rows.get(key)
        rec, nodes = self.graph_record(rank, gid, logformat.ROW_DIGESTS), self.graph_record(rank, gid, logformat.NODES)
        log = self.log_file(rank)
        got = laid_over(log, nodes, rec, gid) if rec is not None and nodes is not None and log is not None else None
        # weighed as the lines it locates: what it holds is two numbers and a digest per line
        self._rows.put(key, got, 1 + (len(got.counts) + sum(got.counts)) * 24 if got is not None else 1)
        return got

    def graph_record(self, rank: int, gid: str, kind: str) -> Record | None:
        """The graph's record of one kind (`gti_nodes`, `gti_symbols` ...) on a rank, or None."""
        ref = self.graph(rank, gid)
        return ref.records.get(kind) if ref is not None else None

    def content_key(self, rank: int, gid: str, kind: str = logformat.NODES) -> tuple:
        """A key equal for the ranks that logged the same record of a graph (same id, same payload
        md5): work on its content is done once for them all; (rank, gid) where it has no md5."""
        rec = self.graph_record(rank, gid, kind)
        md5 = rec.env.get("has_payload") if rec is not None else None
        return (gid, md5) if isinstance(md5, str) and md5 else (rank, gid)

    def symbols(self, rank: int, gid: str) -> dict[str, Any] | None:
        """The graph's symbol map (`gti_symbols`), or one derived from its node rows."""
        v = self._payload(rank, gid, logformat.SYMBOLS)
        if isinstance(v, dict) and isinstance(v.get("symbols"), dict):
            return clean_symbols(v)
        key = ("sym", rank, gid)
        if key not in self._derived:
            t = self.node_table(rank, gid)
            self._derived[key] = derive_symbols(t) if t is not None else None
        return self._derived[key]

    def devices(self, rank: int, gid: str) -> dict[str, Any] | None:
        """The graph's device table (`gti_devices`) on this rank, or one derived from node rows;
        read and validated once (the checks ask for it per rank diff and per stage), and once for
        the ranks that logged the same table (`content_key`: a world's ranks of one local rank)."""
        key = ("dev", rank, gid)
        if key not in self._derived:
            ck = ("dev", *self.content_key(rank, gid, logformat.DEVICES))
            if ck in self._derived:
                self._derived[key] = self._derived[ck]
                return self._derived[key]
            v = self._payload(rank, gid, logformat.DEVICES)
            if isinstance(v, dict) and isinstance(v.get("literals"), list):
                self._derived[key] = self._derived[ck] = clean_devices(v)
            else:
                t = self.node_table(rank, gid)
                self._derived[key] = derive_devices(t) if t is not None else None
        return self._derived[key]

    def own_device(self, rank: int, gid: str | None = None) -> str | None:
        """The device this rank computes on, from a device table (captured or inferred)."""
        # asked for every rank diff of every stage; a device table lists every device literal
        # of its graph, which is a lot to decode again each time
        key = ("own", rank, gid)
        if key not in self._derived:
            self._derived[key] = self._own_device(rank, gid)
        return self._derived[key]

    def _own_device(self, rank: int, gid: str | None) -> str | None:
        if gid is not None:
            d = self.devices(rank, gid)
            if d and d.get("own_device"):
                return d["own_device"]
        for g in self.graphs(rank):
            rec = self.graph(rank, g).records.get(logformat.DEVICES)  # type: ignore[union-attr]  # g is one of graphs(rank), so graph() finds it
            if rec is not None:
                d = self.payload(rank, rec)
                if isinstance(d, dict) and d.get("own_device"):
                    return d["own_device"]
        return None

    def close(self) -> None:
        for r in self._ranks.values():
            if r.log is not None:
                r.log.close()

    def __enter__(self) -> "Capture":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Capture({self.path!r}, {self.kind}, ranks={self.ranks})"
