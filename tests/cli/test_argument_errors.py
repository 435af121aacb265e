"""A wrong argument ends every command the same way: the error on the first line, a short usage
on the second, exit 2 (no screen of usage first; `tui nosuchdir` exits 2 too)."""

from __future__ import annotations

import pytest

from tests.capture_utils import run_cli


@pytest.mark.parametrize(
    "args, first",
    [
        (["check", "--severity", "bogus"], "graphtrain-inspect check: argument --severity: invalid choice: 'bogus'"),
        (["check", "--check", "nope", "x"], "graphtrain-inspect check: argument --check: invalid choice: 'nope'"),
        (["ls", "--source", "all", "x"], "graphtrain-inspect ls: argument --source: invalid choice: 'all'"),
        (["capture", "--out"], "graphtrain-inspect capture: argument --out: expected one argument"),
        (["bogus"], "graphtrain-inspect: argument COMMAND: invalid choice: 'bogus'"),
    ],
)
def test_error_first_then_a_short_usage(args, first):
    r = run_cli(*args)
    lines = r.stderr.splitlines()
    assert r.returncode == 2 and r.stdout == ""
    assert lines[0].startswith(first), r.stderr
    assert len(lines) == 2 and lines[1].startswith("usage: graphtrain-inspect") and "--help" in lines[1], r.stderr


@pytest.mark.parametrize("command", ["ls", "check", "diff", "tui"])
def test_a_missing_path_is_one_line_in_every_command(command, tmp_path):
    missing = str(tmp_path / "nosuchdir")
    r = run_cli(command, missing, *(["--pass", "p"] if command == "diff" else []))
    assert r.returncode == 2, r.stderr
    assert r.stderr == f"graphtrain-inspect {command}: {missing}: no such file or directory\n"


def test_tui_on_a_directory_with_nothing_to_read_is_one_line(tmp_path):
    r = run_cli("tui", str(tmp_path))
    assert r.returncode == 2
    assert (
        r.stderr
        == f"graphtrain-inspect tui: {tmp_path}: not a capture: no dedicated_log_torch_trace_rank_<R>_gti.log logs\n"
    )


@pytest.mark.parametrize(
    "args, first",
    [
        (["chek", "x"], "graphtrain-inspect: argument COMMAND: invalid choice: 'chek' (did you mean 'check'?)"),
        (["check", "--jsn", "x"], "graphtrain-inspect check: unrecognized arguments: --jsn (did you mean --json?)"),
        (
            ["check", "x", "--severity", "eror"],
            "graphtrain-inspect check: argument --severity: invalid choice: 'eror' (did you mean 'error'?)",
        ),
        (["ls", "x", "--rnak", "1"], "graphtrain-inspect ls: unrecognized arguments: --rnak (did you mean --rank?) 1"),
    ],
)
def test_a_misspelling_is_answered_with_the_nearest_name(args, first, capsys):
    from graphtrain_inspect.inspector.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(args)
    err = capsys.readouterr().err.splitlines()
    assert e.value.code == 2 and err[0] == first and err[1].startswith("usage: graphtrain-inspect")


def test_every_command_help_ends_with_examples_its_parser_takes():
    import shlex

    from graphtrain_inspect.inspector.cli.main import COMMANDS, EXAMPLES, build_parser

    assert set(EXAMPLES) == set(COMMANDS)
    for name in COMMANDS:
        parser = build_parser(name)
        sub = parser._subparsers._group_actions[0].choices[name]
        assert sub.format_help().rstrip().endswith(EXAMPLES[name][-1]), name
        for line in EXAMPLES[name]:
            words = shlex.split(line)
            if words[0] == "graphtrain-inspect":  # others are what to run next (python repro1/repro.py)
                args, extras = parser.parse_known_args(words[1:])
                assert args.command == name and not extras, line
