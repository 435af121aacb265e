"""read: log bytes to records, graphs and tables. The first stage of the inspector.

Owns the line scanner (logscan), opening and indexing a capture (capture_index.open_capture),
the progressive and live readers, the FX-text parser (fxtext), the node model (graphmodel), graph
states (stages), the outline of a capture, device rows, the bounded caches (weighted_cache), the
bundled-capture lookup and locating nodes in graph code.

May import (of ours): `capture.shared`, `inspector.errors`. Besides: the standard library and
orjson. Never diff, checks, replay, cli or tui; never torch, textual or rich.
"""
