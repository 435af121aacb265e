"""`ls` ends in its output or one line, never a traceback: every bundled capture under every
`--source`, and a capture where a rank wrote its log but ran no pass (an empty rank once made
`max(5, *gids)` raise)."""

from __future__ import annotations

import re

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from graphtrain_inspect.inspector.cli.main import main
from graphtrain_inspect.inspector.read import bundled
from tests.small_captures import CaptureWriter

SOURCES = ("auto", "capture", "torch")


def _ls(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["ls", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_or_listing(code: int, out: str, err: str, what: str) -> None:
    assert code in (0, 2), (what, code, err)
    if code == 0:
        assert out.strip(), what
    else:  # a source the capture does not have: one line naming it, nothing else
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (what, err)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("name", bundled.names())
def test_every_bundled_capture_every_source(capsys, name, source):
    path = str(bundled.path_of(name))
    for extra in ((), ("--json",)):
        code, out, err = _ls(capsys, path, "--source", source, *extra)
        _one_line_or_listing(code, out, err, f"{name} --source {source} {extra}")


def test_rank_that_ran_no_pass(tmp_path, capsys):
    gm = make_fx(lambda x: (x * 2).relu().sum())(torch.randn(4))
    w = CaptureWriter(tmp_path / "cap", world_size=2)
    r0 = w.rank(0)
    r0.apply("drop_relu", gm, gm)
    r0.end()
    w.rank(1).end()  # a log with its header and end record, and no pass between
    w.finish()
    for source in SOURCES:
        code, out, err = _ls(capsys, str(tmp_path / "cap"), "--source", source)
        _one_line_or_listing(code, out, err, source)
    code, out, _ = _ls(capsys, str(tmp_path / "cap"))
    assert code == 0
    assert "rank 1: 0 passes" in out and "#0 drop_relu" in out


@pytest.mark.parametrize("name", bundled.names())
def test_a_log_format_is_named_only_when_it_is_the_captures(capsys, name):
    """`ls` names log format 1 only for a capture in it, not for any whose ranks it cannot compare."""
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    path = str(bundled.path_of(name))
    with open_capture(path) as cap:
        version = (cap.header(cap.ranks[0]) or {}).get("format_version")
    _, out, _ = _ls(capsys, path)
    for said in re.findall(r"log format (\d+)", out):
        assert int(said) == version, (name, said, version)
