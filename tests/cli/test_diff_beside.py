"""`diff` of a large graph makes its text diff in a forked child beside the node changes
(inspector/cli/forked_work.py): what it prints is what one process prints, and a child that fails
costs nothing but time."""

from __future__ import annotations

import io
import os
from contextlib import redirect_stdout

import orjson
import pytest

from graphtrain_inspect.inspector.cli import diff as diff_command
from graphtrain_inspect.inspector.cli import forked_work
from graphtrain_inspect.inspector.cli.main import main as cli_main
from graphtrain_inspect.inspector.read import row_digests as read_digests
from graphtrain_inspect.samples.bugs import ALL as ALL_BUGS


def _printed(*argv: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        rc = cli_main(["diff", *argv, "--color", "never"])
    assert rc in (0, None)
    return out.getvalue()


def test_beside_gives_the_childs_value_and_makes_it_here_when_the_child_fails():
    parent = os.getpid()
    assert forked_work.Beside(lambda: ["a", "b", os.getpid() != parent]).result() == ["a", "b", True]

    def only_here() -> list[str]:
        if os.getpid() != parent:
            raise RuntimeError("the child cannot")
        return ["made here"]

    assert forked_work.Beside(only_here).result() == ["made here"]
    # a value JSON cannot carry: made here as well
    assert forked_work.Beside(lambda: {1, 2}).result() == {1, 2}
    assert forked_work.Beside(list, fork=False).result() == []


@pytest.mark.parametrize(
    "mode",
    [
        ("--pass", "tag_activation_checkpointing"),
        ("--pass", "tag_activation_checkpointing", "--text"),
        ("--pass", "resolve_coordinates", "--ranks", "0,1"),
        ("--pass", "tag_activation_checkpointing", "--ranks", "0,1"),
    ],
)
def test_forked_text_diff_prints_what_one_process_prints(sample_capture, monkeypatch, mode):
    cap = str(sample_capture(*ALL_BUGS))
    forked = []
    real_init = forked_work.Beside.__init__

    def counting(self, fn, *args, fork=True):
        forked.append(fork)
        real_init(self, fn, *args, fork=fork)

    monkeypatch.setattr(forked_work.Beside, "__init__", counting)
    alone = _printed(cap, *mode, "-j", "1")
    assert not any(forked)
    monkeypatch.setattr(diff_command, "BESIDE_NODES", 0)  # every graph taken as a large one
    assert _printed(cap, *mode, "-j", "2") == alone
    assert any(forked)
    assert "@@" in alone or "agree" in alone  # a text diff was printed, or the ranks agree


def test_text_alone_is_the_text_of_the_whole_diff(sample_capture):
    cap = str(sample_capture(*ALL_BUGS))
    whole = _printed(cap, "--pass", "tag_activation_checkpointing", "-j", "1")
    text = _printed(cap, "--pass", "tag_activation_checkpointing", "--text", "-j", "1")
    assert "nodes:" in whole and "nodes:" not in text
    start = whole.index("--- before")
    assert text.endswith(whole[start:]) and text.index("--- before") > 0


@pytest.mark.parametrize(
    "name, target",
    [
        ("plain", "aten.add.Tensor"),
        ('quo"te', "c10d.all_reduce"),
        ("back\\slash", 'a"b\\c'),
        ("uni\u00e9\u2603", "x\ty"),
        ("", ""),
    ],
)
def test_row_target_scan_reads_escaped_strings(name, target):
    """`RowDigests.rows_by_target` reads a row's target from the start of its stored line: names
    and targets with escapes (quotes, backslashes, control characters) read as orjson writes them."""
    line = orjson.dumps({"name": name, "op": "call_function", "target": target, "args": []})
    found = read_digests._ROW_TARGET.findall(b"\n\t" + line + b"\n\t" + line + b"\n")
    assert [orjson.loads(b'"' + raw + b'"') for raw in found] == [target, target]


def test_a_beside_dropped_unread_ends_its_child():
    """A command that fails before it asks for the child's value (the child blocked writing a
    value larger than the pipe holds) leaves no child behind."""
    b = forked_work.Beside(lambda: ["x" * 1000] * 1000)
    pid = b._pid
    assert pid is not None
    del b
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped: no such child any more


def test_cancel_ends_a_child_still_at_work():
    """A value no longer wanted (the ranks agree: no text is shown) does not keep the command
    waiting for the child that makes it."""
    import time

    b = forked_work.Beside(lambda: time.sleep(120) or [])
    pid = b._pid
    started = time.monotonic()
    b.cancel()
    assert time.monotonic() - started < 60 and not b.forked
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
