"""One CLI style, as a new user meets it: argparse's usage naming every option, --version, the
bundled captures by name (--sample, --list-samples), ls's measured columns, one header style for
every diff, diff --pass on torch's own logs, and the capture summary's next command."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest

from graphtrain_inspect.inspector.cli.main import COMMANDS, build_parser, main
from graphtrain_inspect.inspector.read import bundled

DATA = Path(__file__).resolve().parents[1] / "data" / "tlparse_inputs" / "strict_accepted.tar.xz"


@pytest.fixture(scope="module")
def torch_logs(tmp_path_factory) -> Path:
    """tlparse's own multi-rank TORCH_TRACE logs (torch.compile: dynamo, Inductor, generated code)."""
    root = tmp_path_factory.mktemp("tlparse_inputs")
    with tarfile.open(DATA) as tf:
        tf.extractall(root, filter="data")
    return root / "multi_rank_logs"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        rc = main(list(argv))
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_version(capsys):
    rc, out, _ = run(capsys, "--version")
    assert rc == 0 and re.fullmatch(r"graphtrain-inspect \d+\.\d+\.\S+\n", out)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_usage_names_every_option(command):
    parser = build_parser(command)
    sub = next(a for a in parser._subparsers._group_actions[0].choices.values() if a.prog.endswith(" " + command))
    usage = sub.format_usage()
    for action in sub._actions:
        if action.option_strings:
            assert any(o in usage for o in action.option_strings), (command, action.option_strings, usage)
        else:
            assert (action.metavar or action.dest) in usage, (command, action.dest, usage)
    if command == "capture":
        assert "-- COMMAND [ARGS ...]" in usage


@pytest.mark.parametrize("command", ["ls", "diff", "check", "tui"])
def test_list_samples_says_what_each_holds(capsys, command):
    rc, out, _ = run(capsys, command, "--list-samples")
    lines = out.splitlines()
    assert rc == 0 and [line.split()[0] for line in lines] == bundled.names()
    for line in lines:
        name, what = line.split(None, 1)
        assert re.match(r"\d x H200: \S", what), line
    assert len({re.search(r" \d x H200", line).start() for line in lines}) == 1  # one column


def test_every_bundled_capture_is_described():
    for name in bundled.names():
        kind = name.split("-", 1)[1]
        assert kind in bundled.DESCRIPTIONS, f"samples/captures/{name}.tar.xz has no line in bundled.DESCRIPTIONS"


def test_sample_on_ls_diff_check(capsys):
    rc, out, _ = run(capsys, "ls", "--sample", "h200x2-rank-baked", "--color", "never")
    assert rc == 0 and "#0 remove_dead_code" in out
    rc, out, _ = run(
        capsys,
        "diff",
        "--sample",
        "h200x2-rank-baked",
        "--pass",
        "remove_dead_code",
        "--ranks",
        "0,1",
        "--color",
        "never",
    )
    assert rc == 0 and "select.int(view, 0, 1)" in out
    # per-rank traces: the planted rank literal is right for each rank (info, a note says so)
    rc, out, _ = run(capsys, "check", "--sample", "h200x2-rank-baked", "--color", "never", "-j", "1")
    assert rc == 0 and "2 rank-derived literal(s) in graphs each rank traced for itself: info; --shared-graph" in out
    rc, out, _ = run(capsys, "check", "--sample", "h200x2-rank-baked", "--color", "never", "-j", "1", "--shared-graph")
    assert rc == 1 and "rank-baked-constant  (2 errors)" in out
    rc, out, _ = run(capsys, "check", "--sample", "h200x2-coor-rank-baked", "--color", "never", "-j", "1")
    assert rc == 1 and "rank-baked-constant  (2 errors)" in out
    rc, _, err = run(capsys, "ls")
    assert rc == 2 and err.count("\n") == 1 and "--sample NAME" in err
    rc, _, err = run(capsys, "check", "--sample", "nosuch")
    assert rc == 2 and "no bundled capture named 'nosuch'" in err


def _table_rows(out: str) -> list[list[str]]:
    """The pass tables of `ls`, one list of lines per pipeline."""
    tables: list[list[str]] = []
    for line in out.splitlines():
        if line.startswith("    pass "):
            tables.append([line])
        elif tables and line.startswith("    ") and line.strip():
            tables[-1].append(line)
        elif not line.startswith("    "):
            tables.append([]) if tables and tables[-1] else None
    return [t for t in tables if t]


def test_ls_columns_line_up_and_the_role_column_shows_only_when_used(capsys, torch_logs):
    rc, out, _ = run(capsys, "ls", "--sample", "h200x2-rank-baked", "--color", "never")
    assert rc == 0
    for table in _table_rows(out):
        header = table[0]
        assert " role " not in header  # no pass of the sample has an output other than `out`
        starts = {m.start() for line in table for m in [re.search(r" [gt][0-9a-f]{16} ", line)] if m}
        assert len(starts) == 1, table  # the graph column starts at one place in every row
        assert header.index(" graph ") == starts.pop()
    assert "nested subgraphs" in out
    rc, out, _ = run(capsys, "ls", str(torch_logs), "--color", "never")
    assert rc == 0
    roles = [t for t in _table_rows(out) if " role " in t[0]]
    assert roles and any(" inference " in line for t in roles for line in t)
    for table in roles:
        starts = {m.start() for line in table for m in [re.search(r" [gt][0-9a-f]{16} ", line)] if m}
        assert len(starts) == 1, table


def test_ls_elides_the_middle_of_a_long_pass_name():
    from graphtrain_inspect.capture.shared.terminal_text import Style
    from graphtrain_inspect.inspector.cli.ls import NAME_MAX, Columns, elide_middle

    long = "#12 " + "a_very_long_pass_name_from_a_registry_" * 3 + "end"
    short = elide_middle(long, NAME_MAX)
    assert len(short) == NAME_MAX and short.startswith("#12 a_very") and short.endswith("registry_end") and "…" in short
    cols = Columns(name=NAME_MAX, gid=17, nodes=4)
    row = cols.row(long, "", "g" + "0" * 16, "1170", "1114", "-56", "1 KB", "", Style(False))
    assert "1170 -> 1114" in row and row.index("g000") == 4 + NAME_MAX + 2


def test_diff_pass_dynamo_on_torch_logs_and_unknown_pass(capsys, torch_logs):
    rc, out, _ = run(capsys, "diff", str(torch_logs), "--pass", "dynamo", "--color", "never")
    assert rc == 0, out
    assert out.startswith("#0 dynamo on rank 0 (pipeline 0, compile 0/0): nothing vs its graph")
    assert "+class GraphModule(torch.nn.Module):" in out
    rc, _, err = run(capsys, "diff", str(torch_logs), "--pass", "nosuch")
    assert rc == 2 and "passes: trace, dynamo" in err


HEADER = re.compile(r"^\S.* \([^)]*\): .+ vs .+$")


def test_every_diff_header_has_one_style(capsys):
    headers = []
    for argv in (
        ("--pass", "remove_dead_code"),
        ("--pass", "remove_dead_code", "--ranks", "0,1"),
    ):
        rc, out, _ = run(capsys, "diff", "--sample", "h200x2-rank-baked", *argv, "--color", "never", "--nodes")
        assert rc == 0
        headers.append(out.splitlines()[0])
    rc, out, _ = run(
        capsys,
        "diff",
        "--sample",
        "h200x2-fsdp2-compile-rank-literal",
        "--output-code",
        "--ranks",
        "0,1",
        "--color",
        "never",
    )
    assert rc == 0
    code_headers = [line for line in out.splitlines() if line.startswith("generated code")]
    headers += code_headers
    assert all(HEADER.match(h) for h in headers), headers
    assert headers[0] == "#0 remove_dead_code on rank 0 (pipeline 0): before vs after"
    assert headers[1] == "remove_dead_code (pipeline 0): rank 0 vs rank 1"
    # sections in compile order (the ranks first had them as 1/0#0, 1/1#0, 1/1#1, 1/0#1)
    keys = [re.search(r"\(compile (\S+)\)", h).group(1) for h in code_headers]
    assert keys == ["1/0#0", "1/0#1", "1/1#0", "1/1#1"]


def test_next_command_names_the_executable_that_ran(monkeypatch, tmp_path):
    from graphtrain_inspect.capture.launch_summary import this_command

    exe = tmp_path / "venv" / "bin" / "graphtrain-inspect"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setattr("sys.argv", [str(exe), "capture"])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # not activated: the path that ran
    assert this_command() == str(exe)
    monkeypatch.setenv("PATH", f"{exe.parent}:/usr/bin")  # activated: the bare name runs
    assert this_command() == "graphtrain-inspect"
    monkeypatch.setattr("sys.argv", ["/somewhere/graphtrain_inspect/inspector/cli/__main__.py"])
    assert this_command().endswith(" -m graphtrain_inspect.inspector.cli")


README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_quick_start_commands_parse_and_its_claims_hold():
    """The README's first section, as a newcomer pastes it: each graphtrain-inspect command is one
    the parser accepts; the number of checks and the exit codes it states are the real ones."""
    import shlex

    from graphtrain_inspect.inspector.checks import CHECKS

    text = README.read_text()
    start = text.index("## Set up and run")
    section = text[start : text.index("\n## ", start + 1)]
    blocks = re.findall(r"```\n(.*?)```", section, re.S)
    commands = [line for b in blocks for line in b.splitlines() if line.startswith("graphtrain-inspect ")]
    commands += re.findall(r"`(graphtrain-inspect [^`]+)`", section)
    assert len(commands) >= 5, commands
    for line in commands:
        argv = shlex.split(line)[1:]
        build_parser(argv[0]).parse_args(argv)  # exits (fails the test) on an unknown option
    assert ". .venv/bin/activate" in section  # the commands after it find graphtrain-inspect and torchrun
    assert "**exits 1**" in section
    assert re.search(r"\n\| `check [^|]*\| [^|]*\| 0 no error findings; \*\*1 error findings\*\*", text)
    checks_doc = (README.parent / "docs" / "inspector.md").read_text()
    counts = [int(n) for n in re.findall(r"runs (\d+) checks", text + checks_doc)]
    assert len(counts) >= 2 and set(counts) == {len(CHECKS)}, counts
    assert all(c in checks_doc for c in CHECKS)
    assert "`tui 2>file` leaves the screen blank" in " ".join((README.parent / "docs" / "tui.md").read_text().split())
