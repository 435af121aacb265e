"""The graphtrain-inspect log format: the one definition the writer and every reader use.

A capture directory holds one log per rank in PyTorch's TORCH_TRACE structured-log format, so
tlparse reads it too, plus a manifest and content-addressed sidecar blobs:

    DIR/manifest.json
    DIR/dedicated_log_torch_trace_rank_<R>_gti.log
    DIR/blobs/<sha256>.gpkl

A record is one glog-style line, a space, a JSON envelope, then its payload lines, each starting
with a tab (an empty payload line is a lone tab). The envelope names exactly one record kind;
ours are all tlparse `artifact`s whose `name` is one of KINDS below, and extra keys inside the
`artifact` object (tlparse ignores them) carry what an index needs without reading the payload.
`has_payload` is the md5 of the payload lines joined with "\\n". docs/log-format.md describes
every record kind and field. This module must stay importable without torch: the inspector
imports it to read logs.
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import Any, Iterator, TypedDict

import orjson

FORMAT_NAME = "graphtrain-inspect"
# Bump on any change a reader must know about; readers accept versions <= their own.
# 2: node tables are written one row per payload line (`encode_node_table`); version 1's
#    one-line tables still decode the same way (the lines join to the same JSON). Every artifact
#    names its payload's byte length (PAYLOAD_BYTES), so indexing reads envelope lines only.
# 3: a graph's blob (one per distinct graph, as before) is made by a forked child where it can:
#    the reference may come after the pass record, in a `gti_blob` record (BLOB); a pass record's
#    `blobs` lists only those known when it was written. Readers take a graph's blob from either
#    (`blob_ref`); version 1 and 2 logs have no BLOB records.
# 4: identity. A pass record says where the graph it received came from (`input`: "traced",
#    "pass" with `input_from` = the seq of the pass that returned that very graph object, or
#    "loaded" from GraphPickler bytes) and, at a pipeline's start, the module path its nodes share
#    (`module`); every header and the manifest carry the launcher's `run_id`. Pipelines are the
#    chains of `input_from`; a version 1-3 log has none of these and is chained by graph id as
#    before. New record kinds that later versions add (a table's row digests) are skipped
#    by this reader as unknown kinds, which is why they need no bump of their own.
FORMAT_VERSION = 4
PAYLOAD_BYTES = "payload_bytes"
# The longest payload line a reader reads (64 MB). A writer here writes one line per node, graph
# code line or table row, far below it; a longer line (garbage, a damaged copy, someone hostile)
# is skipped as a reading problem naming the file, its byte offset and size, and the record it
# falls in ends before it: reading it would cost memory in proportion to its length (a few
# copies while it is split, md5-checked and parsed). docs/log-format.md, "Limits".
PAYLOAD_LINE_LIMIT = 64 << 20

MANIFEST_NAME = "manifest.json"
BLOB_DIR = "blobs"
BLOB_SUFFIX = ".gpkl"
LOG_PREFIX = "dedicated_log_torch_trace_rank_"
LOG_SUFFIX = "_gti.log"
# One small status file per writing process, made when it writes its first record and rewritten
# in place (same size, same blocks) when its log stops or ends: it can still be updated on a full
# disk, where appending to the log cannot. DIR/status/rank_<R>.<pid>.json
STATUS_DIR = "status"
STATUS_BYTES = 1024
# Made exclusively (O_EXCL) by the launcher before anything else is written: the directory is this
# capture's; a second capture on the same --out cannot make it and is refused. Holds the pid.
CLAIM_NAME = "capture.claim"
# The user's HMAC of what replay loads (capture.signature): the manifest and every log, by sha256.
SIGNATURE_NAME = "signature.json"

# Record kinds, each a tlparse artifact name, with the payload encoding tlparse accepts.
HEADER = "gti_header"  # json: who wrote this log (rank, host, torch, device), once per process
PASS_START = "gti_pass_start"  # json: a pass began (seq, name, before graph id)
PASS = "gti_pass"  # json: a pass application finished or raised
GRAPH_CODE = "gti_graph"  # string: readable code of one distinct graph (print_readable)
NODES = "gti_nodes"  # json: structured node table of a graph and every nested subgraph
SYMBOLS = "gti_symbols"  # json: unbacked-symbol map of a graph
DEVICES = "gti_devices"  # json: device table of a graph on this rank
RANKS = "gti_ranks"  # json: process groups, meshes and coordinates of this rank
ERROR = "gti_error"  # json: an error inside the instrumentation (training went on)
END = "gti_end"  # json: the process finished cleanly; totals
OUTPUT_CODE = "gti_output_code"  # string: Inductor's generated wrapper and kernels, once per distinct code
# json: one Inductor compile: its code (oid), post-grad graph (gid), compile id, kernels' FX nodes,
# and the FX graph cache key it would be filed under (`cache_key`, optional)
CODEGEN = "gti_codegen"
BLOB = "gti_blob"  # json: the blob of one graph, written when its child process finished (format 3)
# json: the rows of a graph's node table that the stale-symbol check reads, trimmed to what it
# reads (capture/shared/symbol_rows.py); optional: a table without one is read whole (format 4)
SYMBOL_ROWS = "gti_symbol_rows"
# where the rows of `gti_symbol_rows` first use and bind each unbacked symbol and hand on scopes
# (capture/shared/symbol_rows.py): the stale-symbol check of a graph with no stale symbol reads this
# instead of the rows; optional, like the record it summarizes
SYMBOL_SCOPES = "gti_symbol_scopes"
# json: each row's digest of a large node table, its rows per subgraph and its lines' byte lengths
# (capture/shared/row_digests.py); optional: a table without one is read whole to compare its rows
ROW_DIGESTS = "gti_row_digests"
# json: the exception that ended the rank's training (capture/failure.py): its type, message,
# traceback and frames, the frames in generated code tied to what the capture recorded of it;
# optional, once per process whose program raised (a reader without it names an unknown kind)
FAILURE = "gti_failure"

KINDS: dict[str, str] = {
    HEADER: "json",
    PASS_START: "json",
    PASS: "json",
    GRAPH_CODE: "string",
    NODES: "json",
    SYMBOLS: "json",
    DEVICES: "json",
    RANKS: "json",
    ERROR: "json",
    END: "json",
    OUTPUT_CODE: "string",
    CODEGEN: "json",
    BLOB: "json",
    SYMBOL_ROWS: "json",
    SYMBOL_SCOPES: "json",
    ROW_DIGESTS: "json",
    FAILURE: "json",
}
GRAPH_KINDS = (GRAPH_CODE, NODES, SYMBOLS, DEVICES, SYMBOL_ROWS, ROW_DIGESTS, SYMBOL_SCOPES)

# Keys of a TORCH_TRACE envelope that are not the record kind.
ENVELOPE_COMMON_KEYS = frozenset(
    {"rank", "frame_id", "frame_compile_id", "attempt", "compiled_autograd_id", "has_payload", "stack"}
)
COMPILE_ID_KEYS = ("compiled_autograd_id", "frame_id", "frame_compile_id", "attempt")

# The glog prefix tlparse parses (exactly six fraction digits). torch may put "[rankN]:" before it.
GLOG_RE = re.compile(
    rb"(?:\[rank\d+\]:)?([VIWEC])(\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{6}) (\d+) ([^:\n]*):(\d+)\] "
)


class FormatError(ValueError):
    """A line or record that does not follow the format; the message says what is wrong."""


def log_file_name(rank: int) -> str:
    return f"{LOG_PREFIX}{rank}{LOG_SUFFIX}"


def rank_of_log_name(name: str) -> int | None:
    """The rank in a per-rank log file name (ours or torch's own), or None if it is not one."""
    if not name.startswith(LOG_PREFIX) or not name.endswith(".log"):
        return None
    head = name[len(LOG_PREFIX) : -len(".log")].split("_", 1)[0]
    return int(head) if head.isdigit() else None


def status_file_name(rank: int, pid: int) -> str:
    return f"rank_{rank}.{pid}.json"


def status_of_file_name(name: str) -> tuple[int, int] | None:
    """(rank, pid) of a status file name, or None if it is not one."""
    m = re.fullmatch(r"rank_(\d{1,9})\.(\d{1,12})\.json", name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def encode_status(status: dict[str, Any]) -> bytes:
    """A status document as exactly STATUS_BYTES bytes (JSON, space-padded, newline-terminated),
    so rewriting it never grows the file. Long strings are shortened to fit."""
    doc = dict(status)
    for _ in range(8):
        data = orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS)
        if len(data) < STATUS_BYTES:
            return data + b" " * (STATUS_BYTES - 1 - len(data)) + b"\n"
        longest = max((k for k, v in doc.items() if isinstance(v, str)), key=lambda k: len(doc[k]), default=None)
        if longest is None:
            break
        doc[longest] = doc[longest][: max(0, len(doc[longest]) - (len(data) - STATUS_BYTES) - 16)] + "..."
    return orjson.dumps({k: doc[k] for k in ("rank", "pid", "state") if k in doc}).ljust(STATUS_BYTES - 1) + b"\n"


def decode_status(data: bytes) -> dict[str, Any]:
    """A status document read back; FormatError when it is not one."""
    try:
        doc = orjson.loads(data[: STATUS_BYTES * 4].strip() or b"null")
    except orjson.JSONDecodeError as e:
        raise FormatError(f"status file is not JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rank"), int) or not isinstance(doc.get("state"), str):
        raise FormatError("status file has no rank and state")
    return doc


def blob_relpath(sha256: str) -> str:
    return f"{BLOB_DIR}/{sha256}{BLOB_SUFFIX}"


def is_valid_sha256(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def blob_ref(value: Any) -> dict[str, Any] | None:
    """A blob reference as the reader keeps it, `{"sha256", "path", "bytes"}` with each value of
    its type or None, from a pass record's `blobs` entry or a `gti_blob` payload (None: not one).
    Whether it may be opened (the path, the sha256) is replay's and check's to decide."""
    if not isinstance(value, dict):
        return None
    sha, path, size = value.get("sha256"), value.get("path"), value.get("bytes")
    return {
        "sha256": sha if isinstance(sha, str) else None,
        "path": path if isinstance(path, str) else None,
        "bytes": size if type(size) is int else None,
    }


def graph_id(code: str, node_table_json: bytes = b"") -> str:
    """Content id of a graph: its code and its node table (so a pass that changes only node
    meta, such as activation-checkpoint tags or symbols in meta['val'], yields a new graph)."""
    h = hashlib.sha256(code.encode("utf-8", "surrogatepass"))
    h.update(b"\n")
    h.update(node_table_json)
    return "g" + h.hexdigest()[:16]


class _NodeRowKeys(TypedDict):
    name: str
    op: str


class NodeRow(_NodeRowKeys, total=False):
    """One row of a `gti_nodes` table (docs/log-format.md, "A row"): `name` and `op` always, the
    rest where the node has them. A reader keeps only rows whose keys have these types
    (inspector.read.graphmodel drops a key of another type)."""

    target: str | None  # aten.add.Tensor, operator.getitem, or the placeholder/attribute name
    args: list[Any]  # literals, and one-key objects for the rest: {"n": name} a node, {"dev": ...}
    kwargs: dict[str, Any]
    val: Any  # meta['val']: {"t": "tensor", "dtype", "shape", "stride", "device"}, a sym, a scalar, a list
    syms: list[str]  # sorted free symbols of val
    unbacked_bindings: dict[str, str]  # symbol -> keypath, of the symbols this node binds
    stack: str  # `File "...", line N, in fn | code`: the user's innermost frame
    created: str  # same form: the pass line that made a node without a stack
    bwd: bool  # a backward node
    recompute: str  # activation-checkpoint tag
    subgraph: bool  # a get_attr of a nested GraphModule
    attr: dict[str, Any]  # a get_attr of a tensor: its desc, `param`, and a small tensor's `value`


# ---------------------------------------------------------------------------------------------
# Node tables, one row per line
#
# A `gti_nodes` payload is one JSON object, {"gid", "graphs": [{"path", "parent_node", "nodes":
# [row, ...]}, ...]}, laid out so that every row is a payload line of its own:
#
#     {"gid":"g…","graphs":[
#     {"path":"","parent_node":null,"nodes":[
#     {row},
#     {row}
#     ]},
#     {"path":"true_graph_0","parent_node":"true_graph_0","nodes":[
#     …
#     ]}
#     ]}
#
# The lines join to the same JSON a one-line table is, so decoding is unchanged; a reader that
# wants to compare or filter rows without parsing them (two ranks' tables that differ in a few
# rows, rows that mention an unbacked symbol) splits the lines with `node_table_rows`.

# how a table's first line and each subgraph's head line end: readers that find the lines without
# splitting the payload (rank_tokens, inspector/read/row_digests.py) check them by these
TABLE_HEAD = b'"graphs":['
SUB_TAIL = b',"nodes":['


def encode_node_table(tables: dict[str, Any]) -> bytes:
    """The table's JSON without a gid, one row per line: `{"graphs":[` … `]}`."""
    dumps = orjson.dumps
    opt = orjson.OPT_NON_STR_KEYS
    parts = [b"{" + TABLE_HEAD]
    graphs = tables["graphs"]
    for gi, g in enumerate(graphs):
        head = dumps({"path": g["path"], "parent_node": g["parent_node"]}, option=opt)
        parts.append(head[:-1] + SUB_TAIL)
        rows = [dumps(r, option=opt) for r in g["nodes"]]
        if rows:
            parts.append(b",\n".join(rows))
        parts.append(b"]}," if gi < len(graphs) - 1 else b"]}")
    parts.append(b"]}")
    return b"\n".join(parts)


def node_table_payload(gid: str, body: bytes) -> bytes:
    """The `gti_nodes` payload: the gid spliced into `encode_node_table`'s output."""
    return b'{"gid":"' + gid.encode() + b'",' + body[1:]


def node_table_rows(lines: list[bytes], joined: bytes | None = None) -> list[tuple[bytes, list[bytes]]] | None:
    """A node table's payload lines (tabs off) as [(subgraph head, [row line, ...])]; a row line
    is the row's JSON and, but for the last of its subgraph, a separating comma (`decode_row`
    reads one); None when the table is not laid out one row per line (format
    version 1, or damage): then decode the payload as a whole. `joined`: the lines joined with
    newlines, where the caller has them."""
    if len(lines) < 3 or not lines[0].endswith(TABLE_HEAD) or lines[-1] != b"]}":
        return None
    # the subgraph heads' line numbers, found in the joined lines at C speed (a loop over the
    # lines in Python costs more than the rest of reading a large table)
    if joined is None:
        joined = b"\n".join(lines)
    heads: list[int] = []
    line_no, prev = 0, 0
    at = joined.find(b'\n{"path":')
    while at >= 0:
        line_no += joined.count(b"\n", prev, at + 1)
        prev = at + 1
        heads.append(line_no)
        at = joined.find(b'\n{"path":', at + 1)
    if not heads or heads[0] != 1:
        return None
    out: list[tuple[bytes, list[bytes]]] = []
    for k, h in enumerate(heads):
        end = heads[k + 1] - 1 if k + 1 < len(heads) else len(lines) - 2  # the subgraph's "]}" line
        close = lines[end] if end > h else b""
        head = lines[h]
        if not head.endswith(SUB_TAIL) or close != (b"]}," if k + 1 < len(heads) else b"]}"):
            return None
        out.append((head, lines[h + 1 : end]))
    return out


def decode_sub_head(head: bytes) -> dict[str, Any]:
    """A subgraph head of `node_table_rows`: {"path", "parent_node"}."""
    return orjson.loads(head[: -len(SUB_TAIL)] + b"}")


def sub_head_path(head: bytes) -> str | None:
    """The subgraph path a head of `node_table_rows` names ("" for the root); None where the head
    does not read as an object (damage)."""
    try:
        return str(decode_sub_head(head).get("path") or "")
    except (orjson.JSONDecodeError, AttributeError):  # AttributeError: a head that is no object
        return None


def row_json(line: bytes) -> bytes:
    """One row line of `node_table_rows` as the row's JSON: the line without its separating comma
    (what a row's digest is of, and what `decode_row` parses)."""
    return line[:-1] if line[-1:] == b"," else line


def decode_row(line: bytes) -> Any:
    """One row of `node_table_rows`: its JSON, without the separating comma."""
    return orjson.loads(row_json(line))


# ---------------------------------------------------------------------------------------------
# Writing


def _payload_lines(text: str) -> list[str]:
    # tlparse splits payload lines on "\n" and strips a trailing "\r": normalise so md5s agree.
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def payload_md5(lines: list[str]) -> str:
    return hashlib.md5("\n".join(lines).encode("utf-8", "surrogatepass")).hexdigest()


def encode_record(
    kind: str,
    payload: Any,
    *,
    rank: int,
    meta: dict[str, Any] | None = None,
    compile_id: dict[str, int] | None = None,
    pid: int = 0,
    pathname: str = "graphtrain_inspect/capture.py",
    lineno: int = 1,
    when: float | None = None,
) -> bytes:
    """One complete record as bytes, ready for a single write.

    `payload` is a JSON-able object for json kinds and a str for string kinds. `meta` goes into the
    artifact object for cheap indexing; `compile_id` (frame_id, frame_compile_id, attempt, ...) is
    set only where torch had a real compile id, so tlparse files the record under that compile.
    """
    encoding = KINDS[kind]
    if encoding == "json" and isinstance(payload, bytes):
        text = payload.decode()  # already-encoded JSON, one line
    elif encoding == "json":
        text = orjson.dumps(payload, option=orjson.OPT_NON_STR_KEYS).decode()
    else:
        text = payload
    lines = _payload_lines(text)
    body = "\n\t".join(lines).encode("utf-8", "surrogatepass")
    artifact: dict[str, Any] = {"name": kind, "encoding": encoding}
    if meta:
        artifact.update(meta)
    # the payload's length in bytes (its lines with their tabs and newlines): a reader jumps to the
    # next record instead of looking at every payload line (format 2)
    artifact[PAYLOAD_BYTES] = len(body) + 2
    envelope: dict[str, Any] = {"artifact": artifact, "rank": rank}
    if compile_id:
        envelope.update({k: v for k, v in compile_id.items() if k in COMPILE_ID_KEYS and v is not None})
    envelope["has_payload"] = payload_md5(lines)
    when = time.time() if when is None else when
    tm = time.localtime(when)
    micros = int((when % 1) * 1_000_000)
    prefix = (
        f"V{tm.tm_mon:02d}{tm.tm_mday:02d} {tm.tm_hour:02d}:{tm.tm_min:02d}:{tm.tm_sec:02d}.{micros:06d} {pid} "
        f"{pathname}:{lineno}] "
    )
    return prefix.encode() + orjson.dumps(envelope) + b"\n\t" + body + b"\n"


# ---------------------------------------------------------------------------------------------
# Reading


def parse_envelope_line(line: bytes) -> dict[str, Any]:
    """The JSON envelope of a record's first line; FormatError says why it is not one."""
    m = GLOG_RE.match(line)
    if m is None:
        raise FormatError("not a structured-log line (no glog prefix)")
    return _envelope(line[m.end() :])


def _envelope(text: bytes) -> dict[str, Any]:
    try:
        env = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise FormatError(f"envelope is not valid JSON ({e})") from None
    if not isinstance(env, dict):
        raise FormatError("envelope is not a JSON object")
    return env


# torch's record kinds that every reader here lists by kind and reads no further: the bulk of a
# torch log (each envelope holds the stack of the call that logged it; 6,420 of the 6,445 records
# of a 30k-node trace's log). A scan takes their kind
# from the envelope's first key, which is where torch writes it (`torch._logging.trace_structured`),
# and leaves the envelope's JSON text to be decoded when it is first read (`decode_skimmed`):
# reading torch's logs beside a capture then costs no JSON decoding of lines nobody reads. Only
# the line's form is checked at the scan (its first key and closing brace); the rest of such a
# line is checked when it is read.
SKIMMED_KINDS = frozenset(
    {
        "chromium_event",
        "create_symbol",
        "create_unbacked_symbol",
        "describe_source",
        "describe_storage",
        "describe_tensor",
        "expression_created",
        "guard_added",
        "guard_added_fast",
        "propagate_real_tensors",
        "symbolic_shape_specialization",
    }
)
_FIRST_KEY_RE = re.compile(rb'\{"([a-z_]+)": [{\[]')


def scan_envelope(line: bytes, glog: re.Match[bytes]) -> tuple[str, dict[str, Any] | bytes]:
    """A record's first line as a scan reads it, its glog prefix matched (`GLOG_RE`): (its kind,
    its envelope), the envelope decoded, or for a kind of SKIMMED_KINDS its JSON text
    (`decode_skimmed` decodes it). FormatError says why the line is no record's first line."""
    text = line[glog.end() :]
    first = _FIRST_KEY_RE.match(text)
    if first is not None and text.endswith(b"}"):
        kind = first.group(1).decode()
        if kind in SKIMMED_KINDS:
            return kind, text
    env = _envelope(text)
    return record_kind(env), env


def decode_skimmed(text: bytes) -> dict[str, Any]:
    """The envelope of a skimmed record (`scan_envelope`), decoded when it is first read; {} where
    its JSON does not decode to an object of one kind (its kind and place stand: the scan read
    them)."""
    try:
        env = _envelope(text)
        record_kind(env)
    except FormatError:
        return {}
    return env


def record_kind(env: dict[str, Any]) -> str:
    """The kind an envelope names: our artifact name for our records, else torch's key."""
    kinds = [k for k in env if k not in ENVELOPE_COMMON_KEYS]
    if len(kinds) != 1:
        raise FormatError(f"envelope names {len(kinds)} record kinds, expected 1: {sorted(kinds)}")
    kind = kinds[0]
    if kind == "artifact":
        art = env["artifact"]
        if not isinstance(art, dict) or not isinstance(art.get("name"), str):
            raise FormatError("artifact envelope without a name")
        return art["name"]
    return kind


# How tlparse (0.4.3, src/lib.rs) reads a log, and so how every reader here reads one: lines end
# at "\n" and a "\r" right before it is dropped (Rust's BufRead::lines: a CRLF copy of a log reads
# the same); the last line may lack its newline (it is read all the same: a record there is whole
# when its envelope parses and its payload's md5 matches); empty lines are dropped wherever they
# are, between records and inside a payload alike ("a blank line in payload will still be \t").
# A record is an envelope line and the lines starting with a tab that follow it, empty lines
# skipped; its payload is those lines without their tabs joined with "\n".


def envelope_line(line: bytes) -> bytes:
    """A record's first line as tlparse reads it: without the "\r" of a CRLF line end (the "\n"
    already off)."""
    return line[:-1] if line[-1:] == b"\r" else line


def payload_region(raw: bytes, *, ended: bool = True) -> bytes:
    """The payload lines of a record as tlparse reads them (tabs on, joined with "\n"), from its
    bytes as stored: everything after the envelope line's newline up to the newline of its last
    payload line, that newline left out (`ended`: there was one; a file may end without it). CRLF
    line ends become LF, empty lines are dropped; a log written here has neither, and costs two
    scans at memchr speed and no copy."""
    if b"\r" in raw:
        raw = raw.replace(b"\r\n", b"\n")
        if ended and raw[-1:] == b"\r":
            raw = raw[:-1]
    if b"\n\n" in raw or raw[:1] == b"\n" or raw[-1:] == b"\n":
        raw = b"\n".join(line for line in raw.split(b"\n") if line)
    return raw


def split_records(data: bytes) -> Iterator[tuple[int, bytes, list[bytes]]]:
    """(line number of the envelope, envelope line, payload lines) of each record, in order, read
    as tlparse reads them (above).

    A simple whole-file walk for small logs (the launcher's summary, tests); inspector/ indexes
    large logs by offset without splitting them.
    """
    lines = data.split(b"\n")
    # every line but the last was followed by a newline: a "\r" before it is a CRLF line end
    lines[:-1] = [envelope_line(line) for line in lines[:-1]]
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line or line.startswith(b"\t"):
            continue
        start = i
        while i < len(lines) and (lines[i].startswith(b"\t") or not lines[i]):
            i += 1
        yield start, line, [p for p in lines[start:i] if p]


def compile_id_of(env: dict[str, Any]) -> str | None:
    """torch's printed form of a compile id ("0/1", "!2/0/1_1"), or None without one."""
    if env.get("frame_id") is None and env.get("frame_compile_id") is None:
        return None
    s = f"{env.get('frame_id', '-')}/{env.get('frame_compile_id', '-')}"
    if env.get("attempt"):
        s += f"_{env['attempt']}"
    if env.get("compiled_autograd_id") is not None:
        s = f"!{env['compiled_autograd_id']}/" + s
    return s


def decode_payload(raw_lines: list[bytes], env: dict[str, Any], *, verify: bool = True) -> Any:
    """Payload of a record from its tab-prefixed lines (tabs still on): str or parsed JSON."""
    return decode_payload_text(b"\n".join(l[1:] if l.startswith(b"\t") else l for l in raw_lines), env, verify=verify)


def decode_payload_text(text: bytes, env: dict[str, Any], *, verify: bool = True) -> Any:
    """`decode_payload` of the payload's text: its lines, tabs off, joined with newlines."""
    expected = env.get("has_payload")
    if verify and isinstance(expected, str) and len(expected) == 32:
        if hashlib.md5(text).hexdigest() != expected:
            raise FormatError("payload md5 does not match has_payload (damaged or truncated record)")
    art = env.get("artifact")
    encoding = art.get("encoding") if isinstance(art, dict) else None
    if encoding == "json":
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError as e:
            raise FormatError(f"json payload does not parse ({e})") from None
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError:
        return text.decode("utf-8", "replace")
