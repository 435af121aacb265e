"""Node-table digests written by the capture (`capture.shared.rank_tokens`, the `norm` field of a
`gti_nodes` envelope): the reader takes them for its rank classes only where they are what it
would compute, and the findings are the same with or without them."""

from __future__ import annotations

import re

import orjson
import pytest

from graphtrain_inspect.capture.shared import logformat, rank_tokens
from graphtrain_inspect.inspector.checks import check_report
from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.diff import rank_diffs
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.logscan import LogFile
from tests.checks.test_rank_classes import MESH, _graph
from tests.small_captures import CaptureWriter, mesh_rank_table


def _world(tmp_path, *, ranks: int = 8, digests: bool = True, baked: int | None = None, extra: int | None = None):
    """`ranks` ranks of a dp x tp mesh, each with its own group names and own device; `baked`
    copies to cuda:0 (a baked device), `extra`'s pass adds a node."""
    w = CaptureWriter(tmp_path, world_size=ranks)
    mesh = MESH if ranks == 8 else (1, ranks)
    for r in range(ranks):
        table = mesh_rank_table(r, mesh, ("dp", "tp"))
        tp = table["meshes"][0]["coordinate"][1]
        group = table["meshes"][0]["group_names"]["tp"]
        own = f"cuda:{r % 4}"
        rw = w.rank(r, local_rank=r % 4, own_device=own, rank_table=table, digests=digests)
        dev = "cuda:0" if r == baked else own
        rw.apply("rewrite", _graph(0, group, own), _graph(tp, group, dev, extra=r == extra))
        rw.end()
    return w.finish()


def _tables_read(monkeypatch) -> list[int]:
    """Counts the node tables read (as bytes to hash them, as text to compare their rows)."""
    reads: list[int] = []

    def counting(real):
        def counted(self, rec, *args, **kw):
            if rec.kind == logformat.NODES:
                reads.append(rec.index)
            return real(self, rec, *args, **kw)

        return counted

    monkeypatch.setattr(LogFile, "payload_bytes", counting(LogFile.payload_bytes))
    monkeypatch.setattr(LogFile, "payload_text", counting(LogFile.payload_text))
    return reads


def test_the_recorded_digest_is_the_readers_hash(tmp_path):
    """Every table's digest as the capture wrote it equals the hash of its bytes as the reader
    rewrites them for that rank (group names of its own, its own device)."""
    cap = open_capture(_world(tmp_path, baked=5))
    ctx = CheckContext(cap)
    classes = ctx.rank_classes
    checked = 0
    for r in cap.ranks:
        for gid, ref in cap.graphs(r).items():
            rec = ref.records[logformat.NODES]
            rw = classes.rewrites(r, gid)
            recorded = classes.recorded(rec, rw)
            assert recorded is not None and recorded == rank_tokens.table_digest(
                cap.log_file(r).payload_bytes(rec), rw.pair
            )
            checked += 1
    assert checked == 12  # ranks of tp 0 return the graph they got: one graph each, two for the rest


def test_classes_read_no_table_when_the_capture_wrote_digests(tmp_path, monkeypatch):
    path = _world(tmp_path, baked=5)
    reads = _tables_read(monkeypatch)
    ctx = CheckContext(open_capture(path))
    classes = {k.label(): [c.ranks for c in ctx.rank_classes.at(k)] for k in ctx.index.keys}
    assert classes == {"trace": [tuple(range(8))], "rewrite": [(0, 2, 4, 6), (1, 3, 7), (5,)]}
    assert reads == []


def test_a_digest_hashed_with_other_names_is_not_taken(tmp_path, monkeypatch):
    """A rank table that the reader reads otherwise than the capture did (here: one written after
    the graphs, with other group names) makes the recorded digests not the reader's: it hashes
    that rank's tables itself."""
    _world(tmp_path)
    log = tmp_path / logformat.log_file_name(3)
    table = mesh_rank_table(3, MESH, ("dp", "tp"))
    table["groups"] = {f"{name}x": g for name, g in table["groups"].items()}
    table["meshes"][0]["group_names"] = {d: f"{n}x" for d, n in table["meshes"][0]["group_names"].items()}
    data = log.read_bytes()
    end = data.rfind(b"\nV")  # before the gti_end record
    log.write_bytes(data[: end + 1] + logformat.encode_record(logformat.RANKS, table, rank=3) + data[end + 1 :])
    reads = _tables_read(monkeypatch)
    ctx = CheckContext(open_capture(str(tmp_path)))
    key = ctx.index.keys[-1]
    assert not ctx.rank_classes.free(3, ctx.index.across(key)[3].gid)
    assert ctx.rank_classes.free(1, ctx.index.across(key)[1].gid)
    # hashed here: rank 3's rows name groups its last rank table does not know (not rewritten),
    # so it is a class of its own, as the normalizer reads it
    assert [c.ranks for c in ctx.rank_classes.at(key)] == [(0, 2, 4, 6), (1, 5, 7), (3,)]
    assert len(reads) == 1


@pytest.mark.parametrize("kw", [{"baked": 5}, {"extra": 3}, {}])
def test_report_is_the_same_with_and_without_digests(tmp_path, kw):
    a = check_report(open_capture(_world(tmp_path / "with", **kw))).to_json()
    b = check_report(open_capture(_world(tmp_path / "without", digests=False, **kw))).to_json()
    c = check_report(open_capture(_world(tmp_path / "with", **kw)), classes=False).to_json()

    def strip(rep: dict) -> dict:  # the capture's own path, which differs
        text = orjson.dumps(rep)
        return orjson.loads(
            text.replace(str(tmp_path / "without").encode(), b"X").replace(str(tmp_path / "with").encode(), b"X")
        )

    assert strip(a) == strip(b) == strip(c)


def _two_ranks(tmp_path, digests: bool) -> str:
    """Two ranks of a job without a mesh (its one group is the world's), each on its own device."""
    w = CaptureWriter(tmp_path, world_size=2)
    for r in range(2):
        table = {
            "rank": r,
            "world_size": 2,
            "backend": "nccl",
            "groups": {"0": {"ranks": [0, 1], "desc": "default_pg"}},
        }
        rw = w.rank(r, local_rank=r, own_device=f"cuda:{r}", rank_table={**table, "meshes": []}, digests=digests)
        rw.apply("rewrite", _graph(0, "0", f"cuda:{r}"), _graph(0, "0", f"cuda:{r}", extra=True))
        rw.end()
    return w.finish()


def test_two_ranks_that_agree_need_no_rank_diff(tmp_path, monkeypatch):
    """With two ranks the classes answer only from recorded digests: two ranks whose tables
    differ only in their own device have an empty rank diff, read from the envelopes; without
    digests the two tables are compared (and say the same)."""
    reads = _tables_read(monkeypatch)
    ctx = CheckContext(open_capture(_two_ranks(tmp_path / "with", True)))
    plain = CheckContext(open_capture(_two_ranks(tmp_path / "without", False)))
    for key in ctx.index.keys:
        d = ctx.rank_diff(key, 0, 1)
        assert d is not None and not list(d.changes())
    assert reads == []
    for key in plain.index.keys:
        p = plain.rank_diff(key, 0, 1)
        assert p is not None and not list(p.changes())
    assert len(reads) == 4  # both ranks' two tables, compared row by row


GPU_WITH_DIGESTS = ["h200x2-clean", "h200x2-rank-baked", "h200x2-rank-divergent", "h200x2-coor-rank-baked"]


@pytest.mark.parametrize("name", GPU_WITH_DIGESTS)
def test_digests_recorded_on_gpus_are_the_readers(bundled_capture, name):
    """Captures recorded on 2 GPUs (NCCL, each rank on its own cuda device, torch 2.11): every
    node table carries a digest, and each is the reader's own hash of that table for its rank."""
    cap = open_capture(str(bundled_capture(name)))
    classes = CheckContext(cap).rank_classes
    tables = 0
    for r in cap.ranks:
        assert classes.rewrites(r, next(iter(cap.graphs(r)))).own == f'"cuda:{r}"'.encode()
        for gid, ref in cap.graphs(r).items():
            rec = ref.records[logformat.NODES]
            rw = classes.rewrites(r, gid)
            got = classes.recorded(rec, rw)
            assert got is not None and got == rank_tokens.table_digest(cap.log_file(r).payload_bytes(rec), rw.pair)
            tables += 1
    assert tables >= 7


def test_the_tuis_rank_diff_says_who_agrees_from_the_digests(tmp_path, monkeypatch):
    """The rank-diff view's line per rank ("agrees" / "differs (...)"): the same with and without
    the capture's digests; with them, the ranks that agree with the base are not diffed, nor those
    whose graph is that of a rank already diffed."""
    from graphtrain_inspect.tui import session as session_module
    from graphtrain_inspect.tui.session import CaptureSession, Place

    def statuses(path: str) -> list[str]:
        session = CaptureSession(open_capture(path))
        return session.rank_diff(Place(1, 0, 0, "out"), 0)[1]

    plain = statuses(_world(tmp_path / "without", digests=False, baked=5))
    calls: list[tuple] = []
    real = rank_diffs.rank_diff_gids

    def counted(cap, ra, ga, rb, gb, **kw):
        calls.append((ra, rb))
        return real(cap, ra, ga, rb, gb, **kw)

    monkeypatch.setattr(session_module, "rank_diff_gids", counted)
    assert statuses(_world(tmp_path / "with", baked=5)) == plain
    assert "rank 2: agrees" in plain and "rank 5: differs" in " ".join(plain)
    # ranks 2, 4, 6 agree with rank 0 (tp 0): not diffed; 3 and 7 have rank 1's graph (tp 1): only
    # rank 1 of them is; rank 5's (tp 1, a baked device) is its own
    assert sorted(rb for _, rb in calls) == [1, 5]


def test_a_malformed_digest_is_ignored(tmp_path):
    """Envelopes whose `norm` is edited into nonsense (a digest that is not hex, groups that are
    not pairs, a field that is no object) are read as if they had none: the table is hashed, the
    report is the one without digests, and nothing is said to be unreadable."""
    path = _world(tmp_path / "with", baked=5)
    edits = {
        1: (rb'"sha256":"[0-9a-f]{64}"', b'"sha256":"' + b"z" * 64 + b'"'),  # not hex
        3: (rb'"groups":\[\[[^]]*\]', rb'"groups":[["1"]'),  # a pair of one
        5: (rb'"norm":\{', rb'"norm":"x","x":{'),  # no object
    }
    for rank, (pattern, bad) in edits.items():
        log = tmp_path / "with" / logformat.log_file_name(rank)
        data, n = re.subn(pattern, bad, log.read_bytes(), count=1)  # the rank's first table
        assert n == 1
        log.write_bytes(data)
    cap = open_capture(path)
    assert not cap.all_errors()
    classes = CheckContext(cap).rank_classes
    for rank in edits:
        first, *rest = cap.graphs(rank)
        assert not classes.free(rank, first) and all(classes.free(rank, gid) for gid in rest)
    plain = _world(tmp_path / "without", digests=False, baked=5)
    a, b = check_report(open_capture(path)).to_json(), check_report(open_capture(plain)).to_json()

    def strip(rep: dict, where) -> dict:  # the capture's own path, which differs
        return orjson.loads(orjson.dumps(rep).replace(str(where).encode(), b"X"))

    assert strip(a, tmp_path / "with") == strip(b, tmp_path / "without")
