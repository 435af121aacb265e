"""What the writer and the reader of a capture share: the floor under capture's in-worker code
and under the inspector.

The log format (`logformat`, the one definition), the rank normalization whose table hashes the
writer records and the reader takes (`rank_tokens`), the symbol rules (`symbol_usage`,
`symbol_rows`), the row digests (`row_digests`), the signature the launcher writes and replay
verifies (`signing`), rank lists (`rank_ranges`), which ranks record and which node hosts each
(`node_ranks`), and the one escaping of capture text for terminals (`terminal_text`).

Rules and file formats only: nothing here hooks, patches or starts anything inside training (the
writer calls these functions as the reader does; the hooks and the session are capture's own). Its
modules import the standard library, orjson and each other only (tests/test_layering.py), so the
inspector reads captures without importing the writer, and the writer records what the reader
checks by the same code.

Why a subpackage of capture/: the worker's bootstrap puts capture/ alone on a training process's
path (capture/bootstrap/sitecustomize.py), so what the writer imports must live under it; and the
reader already depends on capture/ for the format. A floor inside it, with its own row in the
import table, keeps the four top-level folders as they are.
"""
