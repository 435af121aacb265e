"""Write small capture directories from FX GraphModules, exactly as a capture stores them.

For tests (here and in tui/): build GraphModules by hand or with make_fx, then

    w = CaptureWriter(tmp_path, world_size=2)
    for r in (0, 1):
        rw = w.rank(r, rank_table=..., own_device="cuda:%d" % r)
        rw.apply("my_pass", before_gm, after_gm)           # or {"fw": gm1, "bw": gm2}
        rw.end()
    w.finish()

Records are made with `graphtrain_inspect.capture.shared.logformat.encode_record` and the tables with
`graphtrain_inspect.capture.graph_tables` (`node_tables`, `symbol_map`, `device_table`, `readable_code`), so what the
inspector reads is what a real capture writes. This module imports torch (its purpose needs it);
nothing else in inspector/ does.
"""

from __future__ import annotations

import os
import time
from typing import Any

import orjson

from graphtrain_inspect.capture import graph_tables
from graphtrain_inspect.capture.shared import logformat, rank_tokens


class RankWriter:
    def __init__(
        self,
        parent: "CaptureWriter",
        rank: int,
        *,
        local_rank: int | None = None,
        own_device: str | None = None,
        rank_table: dict | None = None,
        digests: bool = True,
    ):
        """`digests`: write each node table's normalized digest in its envelope, as the capture
        does since format 4's `norm` (off: as older captures were written)."""
        self.parent = parent
        self.rank_table = rank_table
        self.digests = digests
        self.rank = rank
        self.local_rank = rank if local_rank is None else local_rank
        self.own_device = own_device
        self.path = os.path.join(parent.directory, logformat.log_file_name(rank))
        self.f = open(self.path, "ab")
        self.seq = 0
        self.pipeline = -1
        self.graphs: dict[str, int] = {}
        self.produced: set[str] = set()
        self.records = 0
        self.passes = 0
        self._write(
            logformat.HEADER,
            {
                "format": logformat.FORMAT_NAME,
                "format_version": logformat.FORMAT_VERSION,
                "rank": rank,
                "local_rank": self.local_rank,
                "world_size": parent.world_size,
                "group_rank": 0,
                "pid": 1000 + rank,
                "host": "testhost",
                "user": "test",
                "argv": ["test"],
                "torch_version": _torch_version(),
                "python": "3",
                "cuda_visible_devices": None,
                "time": time.time(),
                "sources": ["named"],
                "blobs": False,
            },
        )
        if rank_table is not None:
            self._write(logformat.RANKS, rank_table)

    def _write(self, kind: str, payload: Any, meta: dict | None = None) -> None:
        self.f.write(logformat.encode_record(kind, payload, rank=self.rank, meta=meta, pid=1000 + self.rank))
        self.records += 1

    def graph(self, gm: Any) -> str:
        """Write the graph's four records once; return its gid."""
        code = graph_tables.readable_code(gm)
        tables = graph_tables.node_tables(gm)
        body = logformat.encode_node_table(tables)  # as the capture writes it
        gid = logformat.graph_id(code, body)
        if gid in self.graphs:
            return gid
        n = graph_tables.count_nodes(tables)
        self.graphs[gid] = n
        meta = {"gid": gid, "nodes": n}
        self._write(logformat.GRAPH_CODE, code, meta)
        payload = logformat.node_table_payload(gid, body)
        own = self.own_device or graph_tables.own_device()  # what the device table below says
        norm = rank_tokens.table_norm(payload, self.rank_table, own) if self.digests else None
        self._write(logformat.NODES, payload, {**meta, rank_tokens.NORM: norm} if norm is not None else meta)
        self._write(logformat.SYMBOLS, {"gid": gid, **graph_tables.symbol_map(gm, tables)}, {"gid": gid})
        dev = graph_tables.device_table(gm)
        if self.own_device is not None:
            dev["own_device"] = self.own_device
        dev["local_rank"] = self.local_rank
        self._write(logformat.DEVICES, {"gid": gid, **dev}, {"gid": gid})
        return gid

    def apply(
        self,
        name: str,
        before: Any,
        after: Any = None,
        *,
        exception: BaseException | None = None,
        qualname: str | None = None,
        compile_id: str | None = None,
        blobs: dict | None = None,
        **identity: Any,
    ) -> int:
        """Record one pass application: `after` is a GraphModule, {role: GraphModule}, or None when it
        raised. `blobs`: the record's blob references by gid (capture.blobs.dump's); `identity`:
        format 4's `input`, `input_from`, `module`, as the capture writes them."""
        seq = self.seq
        self.seq += 1
        b = self.graph(before)
        self._write(logformat.PASS_START, {"seq": seq, "name": name, "before": b, "time": time.time()}, {"seq": seq})
        outs = {} if after is None else (after if isinstance(after, dict) else {"out": after})
        after_ids = {role: self.graph(g) for role, g in outs.items()}
        self.produced.update(after_ids.values())
        traced = b not in self.produced
        if traced:
            self.pipeline += 1
        status = "raised" if exception is not None else "ok"
        rec = {
            "seq": seq,
            "name": name,
            "qualname": qualname or f"tests:{name}",
            "source": "named",
            "target": None,
            "subsystem": None,
            "parent": None,
            "rank": self.rank,
            "local_rank": self.local_rank,
            "world_size": self.parent.world_size,
            "compile_id": compile_id,
            "pipeline": max(self.pipeline, 0),
            "traced": traced,
            "time": time.time(),
            "wall_s": 0.001,
            "status": status,
            "exception": {"type": type(exception).__name__, "message": str(exception), "traceback": ""}
            if exception
            else None,
            "before": b,
            **identity,
            "after": after_ids,
            "nodes": {"before": self.graphs[b], "after": {r: self.graphs[g] for r, g in after_ids.items()}},
            "blobs": blobs or {},
            "capture_errors": 0,
        }
        self._write(logformat.PASS, rec, {"seq": seq, "status": status})
        self.passes += 1
        return seq

    def error(self, where: str, message: str) -> None:
        self._write(
            logformat.ERROR,
            {"where": where, "seq": None, "pass": None, "type": "RuntimeError", "message": message, "traceback": ""},
        )

    def end(self) -> None:
        self._write(
            logformat.END,
            {
                "records": self.records + 1,
                "bytes": self.f.tell(),
                "passes": self.passes,
                "graphs": len(self.graphs),
                "blobs": 0,
                "capture_errors": 0,
                "time": time.time(),
            },
        )

    def close(self) -> None:
        if not self.f.closed:
            self.f.close()


class CaptureWriter:
    def __init__(self, directory: Any, world_size: int, *, env: dict | None = None):
        self.directory = str(directory)
        os.makedirs(self.directory, exist_ok=True)
        self.world_size = world_size
        self.env = env or {}
        self.writers: dict[int, RankWriter] = {}

    def rank(self, rank: int, **kw: Any) -> RankWriter:
        w = self.writers[rank] = RankWriter(self, rank, **kw)
        return w

    def finish(self, status: str = "finished") -> str:
        for w in self.writers.values():
            w.close()
        ranks = {
            str(r): {"log": logformat.log_file_name(r), "bytes": os.path.getsize(w.path)}
            for r, w in self.writers.items()
        }
        manifest = {
            "format": logformat.FORMAT_NAME,
            "format_version": logformat.FORMAT_VERSION,
            "command": ["test"],
            "command_line": "test",
            "cwd": self.directory,
            "env": self.env,
            "torch_version": _torch_version(),
            "host": "testhost",
            "user": "test",
            "uid": 0,
            "started": time.time(),
            "ended": time.time(),
            "exit_code": 0,
            "signal": None,
            "status": status,
            "options": {"passes": [], "inductor": False, "blobs": False},
            "ranks": ranks,
        }
        with open(os.path.join(self.directory, logformat.MANIFEST_NAME), "wb") as f:
            f.write(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
        return self.directory


def mesh_rank_table(
    rank: int, shape: tuple[int, ...], dim_names: tuple[str, ...], *, group_base: int = 1, world_group: str = "0"
) -> dict[str, Any]:
    """A `gti_ranks` table for a row-major device mesh over range(prod(shape)). Group names are
    numbered as torch numbers them: per dimension, one name per group, so the same dimension's
    group has a different name on ranks in different groups (rank 0's dp group "1", rank 1's "2")."""
    import itertools

    coords = list(itertools.product(*(range(s) for s in shape)))  # rank -> coordinate (row-major)
    world = len(coords)
    coord = list(coords[rank])
    groups: dict[str, Any] = {world_group: {"ranks": list(range(world)), "desc": "default_pg"}}
    group_names: dict[str, str] = {}
    n = group_base
    for d, name in enumerate(dim_names):
        # the groups of dimension d: ranks equal on every other dimension, in order of first rank
        keys: list[tuple] = []
        for c in coords:
            k = tuple(x for i, x in enumerate(c) if i != d)
            if k not in keys:
                keys.append(k)
        mine = tuple(x for i, x in enumerate(coord) if i != d)
        gname = str(n + keys.index(mine))
        n += len(keys)
        members = [r for r, c in enumerate(coords) if tuple(x for i, x in enumerate(c) if i != d) == mine]
        groups[gname] = {"ranks": members, "desc": f"mesh_{name}"}
        group_names[name] = gname
    return {
        "rank": rank,
        "world_size": world,
        "backend": "gloo",
        "groups": groups,
        "meshes": [
            {
                "dim_names": list(dim_names),
                "shape": list(shape),
                "mesh": _nest(list(range(world)), shape),
                "device_type": "cpu",
                "coordinate": coord,
                "group_names": group_names,
            }
        ],
    }


def _torch_version() -> str | None:
    import sys

    t = sys.modules.get("torch")
    return getattr(t, "__version__", None)


def _nest(flat: list[int], shape: tuple[int, ...]) -> Any:
    if len(shape) == 1:
        return list(flat)
    step = len(flat) // shape[0]
    return [_nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


def kinds(findings, severity=("error", "warning")):
    """(kind, introduced_by) of the findings of these severities, sorted: what a check test compares."""
    return sorted((f.kind, f.introduced_by) for f in findings if f.severity in severity)


def identity_pass(gm):
    return gm
