"""Source lines of a capture recorded elsewhere are shown relative to the directory the program
ran in (the manifest's cwd), not as the recording machine's absolute paths."""

from __future__ import annotations

from graphtrain_inspect.inspector.cli.main import main
from graphtrain_inspect.inspector.read.source_lines import source_text

SRC = {"file": "/work/main/tests/programs/fsdp2_compile.py", "line": 45, "code": "y = y * 2"}


def test_source_text_is_relative_under_the_root_only():
    assert source_text(SRC, "/work/main") == "tests/programs/fsdp2_compile.py:45  y = y * 2"
    assert source_text(SRC, "/work/main/") == "tests/programs/fsdp2_compile.py:45  y = y * 2"
    assert source_text(SRC, "/work/mai") == "/work/main/tests/programs/fsdp2_compile.py:45  y = y * 2"
    assert source_text(SRC) == "/work/main/tests/programs/fsdp2_compile.py:45  y = y * 2"


def test_check_on_a_bundled_gpu_capture(bundled_capture, capsys):
    main(["check", str(bundled_capture("h200x2-fsdp2-compile-rank-literal")), "--shared-graph"])
    out = capsys.readouterr().out
    # "at backward of ...": a backward node's line is the forward op's it differentiates
    at = [l.strip().replace("at backward of ", "at ", 1) for l in out.splitlines() if l.strip().startswith("at ")]
    assert at and all(l.startswith("at tests/programs/fsdp2_compile.py:") for l in at), at
    assert any(l.startswith("at tests/programs/fsdp2_compile.py:45  ") for l in at), at  # the planted line
    assert "/work/main" not in out
