"""Open a capture directory or torch's own TORCH_TRACE logs: ranks, passes, graphs, errors.

    cap = open_capture("captures/run1")          # or a TORCH_TRACE dir, or one log file
    cap.ranks                                    # [0, 1]
    for p in cap.passes(0): print(p.seq, p.name, p.before, p.after)
    tables = cap.node_table(0, gid)              # GraphTables (parsed on demand, LRU-cached)
    cap.graph_code(0, gid); cap.symbols(0, gid); cap.devices(0, gid); cap.rank_table(0)
    cap.errors                                   # ReadError: file, line, message

Opening scans each log once for record offsets (envelopes only) and decodes the small pass
records; graph payloads are decoded when asked. Two sources are understood:

* a capture (`kind == "capture"`): our `gti_*` records, passes as the capture recorded them.
* torch's TORCH_TRACE logs (`kind == "torch_trace"`): graph records (`dynamo_output_graph`,
  `aot_*_graph`, `before/after_*_grad_graph`, `inductor_*_graph`, `graph_dump` ...) become the
  graph states of one pipeline per compile id, linked by synthetic passes: `inductor_entry`,
  `pre_grad_passes`, `aot_autograd`, `partition` (roles fw, bw), `post_grad_passes`. Their graph
  ids are `t` + the record's payload md5, and their node tables are parsed from the text.

Nothing here imports torch; nothing is ever unpickled.

The index is in several modules, imported from here: `capture_dirs` opens (directories, manifest,
status files, stray logs), `capture_reader` holds `Capture` and its caches, `capture_records` the
records it is made of, `torch_trace` the passes synthesized from torch's logs, `validators` the
payload checks.
"""

from __future__ import annotations

from graphtrain_inspect.inspector.errors import CaptureUnreadable
from graphtrain_inspect.inspector.read.capture_dirs import (
    MANIFEST_LIMIT,
    leave_out_strays,
    open_capture,
    read_manifest,
    read_statuses,
)
from graphtrain_inspect.inspector.read.capture_reader import Capture
from graphtrain_inspect.inspector.read.capture_records import GraphRef, PassRecord, Pipeline
from graphtrain_inspect.inspector.read.torch_trace import TORCH_GRAPH_ARTIFACTS, TORCH_GRAPH_KINDS

__all__ = [
    "MANIFEST_LIMIT",
    "TORCH_GRAPH_ARTIFACTS",
    "TORCH_GRAPH_KINDS",
    "Capture",
    "CaptureUnreadable",
    "GraphRef",
    "PassRecord",
    "Pipeline",
    "leave_out_strays",
    "open_capture",
    "read_manifest",
    "read_statuses",
]
