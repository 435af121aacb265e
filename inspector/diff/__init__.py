"""diff: what differs between two graphs, a pass's before and after or one graph across ranks.

Owns structural node alignment (align), the node-table diff (graph_diff.diff_tables, text_diff),
rank normalisation (normalize: group names, own device) and rows of a text diff for interactive
views (text_rows).

May import (of ours): `capture.shared`, `inspector.errors`, `inspector.read`. Never checks, replay,
cli or tui; never torch, textual or rich.
"""
