"""Shortened pass names stay told apart: the part that differs from the most alike sibling is kept
(cutting every middle alike made decompose_map_to_while_loop and decompose_scan_to_while_loop
both `decompo…le_loop` at 120 columns)."""

from __future__ import annotations

import pytest
from rich.text import Text

from graphtrain_inspect.tui.widgets.capture_tree import ELIDE, fit_label
from graphtrain_inspect.tui.widgets.name_abbrev import kept_spans, render

# the Inductor passes of the bundled FSDP2 + torch.compile capture that share starts and ends
SIBLINGS = [
    "decompose_triton_kernel_wrapper_functional",
    "decompose_auto_functionalized",
    "decompose_scan_to_while_loop",
    "decompose_map_to_while_loop",
    "remove_noop_ops",
    "remove_profiler_ops",
    "remove_assert_ops",
    "eliminate_dead_code_pass",
    "efficient_conv_bn_eval_pass",
    "pass_pattern_0",
    "pass_pattern_1",
]


@pytest.mark.parametrize("width", [8, 10, 12, 14, 16, 20, 24])
def test_rows_stay_distinct_and_fit(width):
    shown = [render(n, kept_spans(n, width, SIBLINGS)) for n in SIBLINGS]
    assert all(len(s) <= width for s in shown), shown
    assert len(set(shown)) == len(shown), shown


def test_the_differing_word_is_kept_whole_where_it_fits():
    assert "scan" in render("decompose_scan_to_while_loop", kept_spans("decompose_scan_to_while_loop", 14, SIBLINGS))
    assert "map" in render("decompose_map_to_while_loop", kept_spans("decompose_map_to_while_loop", 14, SIBLINGS))
    assert "assert" in render("remove_assert_ops", kept_spans("remove_assert_ops", 12, SIBLINGS))


def test_a_shared_letter_is_not_a_shared_word():
    # eliminate_ and efficient_ share an `e`, not a word: the name keeps its own start
    assert render("eliminate_dead_code_pass", kept_spans("eliminate_dead_code_pass", 14, SIBLINGS)).startswith("elim")


def test_without_siblings_the_middle_goes():
    assert render("tag_activation_checkpointing", kept_spans("tag_activation_checkpointing", 11)) == "tag_a…nting"


def test_the_tree_label_uses_its_siblings():
    t = Text("#20 ")
    start = len(t)
    t.append("decompose_scan_to_while_loop")
    t.stylize(ELIDE, start, len(t))
    t.append("  74 ±0")
    assert "scan" in fit_label(t.copy(), 26, SIBLINGS).plain
    assert fit_label(t.copy(), 26).plain == "#20 decompo…le_loop  74 ±0"  # alone: the middle goes
