"""Row digests of a node table: what a reader compares two ranks' rows by without reading them.

Two ranks' tables of one stage usually differ in a few rows. Comparing them row by row means
reading both payloads whole (md5 check, split into lines) for the sake of those few. The capture
knows each row's line as it writes the table, so it writes, right after `gti_nodes`, a
`gti_row_digests` record: each row's 8-byte BLAKE2b digest (of the row's JSON, without the comma
that separates it from the next), the number of rows of each subgraph, and the byte length of
every payload line. A reader compares the digest arrays (one C comparison), finds every line in
the stored payload by the lengths, and reads only the rows whose digests differ, each checked
against its digest as it is read.

With the digests goes each row's `refs`: the row numbers (in its subgraph) of the nodes its
arguments name, in the order a reader walks them (inspector/diff/row_parts.py), -1 for a name that is
no row. A reader that pairs two ranks' byte-equal rows by their digests finds, from these alone,
which of the rows it has not read use one it has to compare (their inputs may have been paired
otherwise). Left out where a subgraph has a name twice (a name is then no single row).

Where the table's envelope has its normalized hash (`rank_tokens.table_norm`), the record also
holds each row's digest after the same rewrites (`norm_digests`: group names in collectives' rows,
the rank's own device): two ranks' rows that differ only in what the rank normalizer rewrites
(every row of a GPU rank names its own device) have equal normalized digests.

Only tables of at least `GTI_CAPTURE_DIGEST_ROWS` rows (default 1,000; 0: every table) get one:
a smaller table is read whole at no cost worth saving, and the record would cost the training
process (which makes small graphs' records itself) for nothing. docs/log-format.md,
"gti_row_digests".
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from graphtrain_inspect.capture.shared.logformat import row_json
from graphtrain_inspect.capture.shared.rank_tokens import normalized_row

# the digest's name in the record: a reader takes a record of a hash it knows only
HASH = "blake2b-8"
DIGEST_BYTES = 8
ENV_ROWS = "GTI_CAPTURE_DIGEST_ROWS"
MIN_ROWS = 1000


def min_rows() -> int:
    """The fewest rows a table has for its digests to be written (ENV_ROWS; a bad value: MIN_ROWS)."""
    try:
        return max(0, int(os.environ.get(ENV_ROWS, MIN_ROWS)))
    except ValueError:
        return MIN_ROWS


def row_digest(line: bytes) -> bytes:
    """The digest of one row line of `logformat.node_table_rows` (its separating comma off)."""
    return _digest(row_json(line))


def _digest(row: bytes) -> bytes:
    return hashlib.blake2b(row, digest_size=DIGEST_BYTES).digest()


def _ref_names(v: Any, out: list[str]) -> None:
    """The node names an encoded argument refers to, in the order `align._walk` meets them: a
    ref is `{"n": NAME}`; a dict literal `{"dict": [[k, v], ...]}` is walked through its values;
    every other object is a leaf."""
    t = type(v)
    if t is list or t is tuple:
        for x in v:
            _ref_names(x, out)
    elif t is dict and len(v) == 1:
        n = v.get("n")
        if type(n) is str:
            out.append(n)
        elif type(v.get("dict")) is list:
            for kv in v["dict"]:
                if type(kv) is list and len(kv) == 2:
                    _ref_names(kv[1], out)


def row_refs(graphs: list[dict[str, Any]]) -> list[list[int]] | None:
    """Each row's refs as row numbers of its subgraph (-1: no row), the rows of every subgraph in
    order; None where a subgraph has a name twice."""
    out: list[list[int]] = []
    for g in graphs:
        rows = g["nodes"]
        index = {r["name"]: i for i, r in enumerate(rows)}
        if len(index) != len(rows):
            return None
        get = index.get
        for r in rows:
            names: list[str] = []
            args = r.get("args")
            if args:
                _ref_names(args, names)
            kw = r.get("kwargs")
            if kw:
                for v in kw.values():
                    _ref_names(v, names)
            out.append([get(n, -1) for n in names] if names else [])
    return out


def row_digests_payload(
    gid: str,
    lines: list[bytes],
    subs: list[tuple[bytes, list[bytes]]] | None,
    least: int | None = None,
    graphs: list[dict[str, Any]] | None = None,
    rewrites: Any = None,
) -> dict[str, Any] | None:
    """The `gti_row_digests` payload of a `gti_nodes` payload, given as its lines (`split(b"\\n")`)
    and their `logformat.node_table_rows` (the caller has them for the symbol rows too): {"gid",
    "hash", "rows" (per subgraph), "lines" (every payload line's byte length), "digests" (hex,
    DIGEST_BYTES per row, the rows of every subgraph in order), "refs" (`row_refs` of `graphs`,
    the table's decoded subgraphs, where given and it has one), "norm_digests" (hex, each row's
    digest after `rewrites`, the `rank_tokens.Rewrites` its table's normalized hash was made
    with, where given)}; None when the table is not laid
    out one row per line (`subs` None) or has fewer than `least` rows (default `min_rows()`)."""
    if subs is None:
        return None
    counts = [len(rows) for _, rows in subs]
    if sum(counts) < (min_rows() if least is None else least):
        return None
    digests = b"".join([row_digest(ln) for _, rows in subs for ln in rows])
    out: dict[str, Any] = {
        "gid": gid,
        "hash": HASH,
        "rows": counts,
        "lines": list(map(len, lines)),
        "digests": digests.hex(),
    }
    if graphs is not None and [len(g["nodes"]) for g in graphs] == counts:
        refs = row_refs(graphs)
        if refs is not None:
            out["refs"] = refs
    if rewrites is not None:
        out["norm_digests"] = b"".join(
            [_digest(normalized_row(row_json(ln), rewrites)) for _, rows in subs for ln in rows]
        ).hex()
    return out
