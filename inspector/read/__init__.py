"""read: log bytes to records, graphs and tables. The first stage of the inspector.

Owns the line scanner (logscan), the capture index (capture_index.open_capture), the progressive
and live readers, the FX-text parser (fxtext), the node model (graphmodel), graph states (stages),
the outline of a capture, device rows, the bounded caches (weighted_cache), the bundled-capture
lookup and locating nodes in graph code.

May import: the standard library, orjson, and from outside this package only
`graphtrain_inspect.capture.logformat` and `graphtrain_inspect.capture.symbol_usage` (the format
and the symbol rules that writer and reader share). Never diff, checks, replay, cli or tui; never
torch, textual or rich.
"""
