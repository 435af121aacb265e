"""diff: what differs between two graphs, a pass's before and after or one graph across ranks.

Owns the one ordered list of ways to diff a graph on two ranks (rank_diffs), structural node
alignment (align, row_parts, sequence_match), the node-table diff (graph_diff.diff_tables, text_diff),
rank normalisation (normalize: group names, own device), rows of a text diff for interactive views
(text_rows) and terminal rendering helpers (render).

May import (of ours): `capture.shared`, `inspector.errors`, `inspector.read`. Never checks, replay,
cli or tui; never torch, textual or rich.
"""
