"""inspector/read/code_locate.py: a lazy index (the diff views') answers what an index made at
once answers, on real graph code with nested subgraphs (the stale-symbol capture's chunked
experts), and reads nothing of the lines until asked."""

from __future__ import annotations

from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.code_locate import CodeIndex


def test_a_lazy_index_answers_as_one_made_at_once(bundled_capture):
    cap = open_capture(str(bundled_capture("h200x2-stale-symbol")))
    checked = 0
    for rank in cap.ranks:
        for gid in cap.graphs(rank):
            code = cap.graph_code(rank, gid)
            if code is None:
                continue
            lines = code.splitlines()
            now, later = CodeIndex(lines), CodeIndex(lines, lazy=True)
            assert not later._indexed
            names = now.names()
            assert later.names() == names and len(later) == len(now)
            for sub, name, line in names:
                assert later.find(name, sub) == now.find(name, sub)
                assert later.node_at(line) == now.node_at(line)
                assert later.subgraph_at(line) == now.subgraph_at(line)
            assert later.find("no_such_node") is None
            checked += any(sub for sub, _, _ in names)
    assert checked  # graphs with nested subgraphs among them
