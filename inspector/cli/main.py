"""The `graphtrain-inspect` command: one subcommand per module, imported only when it runs.

Each command module has `add_arguments(parser)` and `run(args) -> int` and must import nothing
heavy at module level (no torch, textual or rich), so `check` and `ls` start fast. The table names
modules as strings: the UI (tui/) is reached only when its command is chosen.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from typing import Any, NoReturn

# Commands that read a capture once and end: the cyclic collector stays off while they run
# (`inspector.read.collector`). Not capture (the user's training), replay (the user's passes) nor
# the TUI (a long session).
BATCH_READERS = frozenset({"ls", "diff", "check", "compare", "report"})
# Commands whose process, their own, ends as they return, without the interpreter's teardown
# (`_end_now`): the batch readers, and the TUI once its terminal is given back
ENDS_AT_RETURN = BATCH_READERS | {"tui"}

COMMANDS: dict[str, tuple[str, str]] = {
    "capture": (
        "graphtrain_inspect.capture.launcher",
        "run a training command with every graph pass captured on every rank",
    ),
    "ls": ("graphtrain_inspect.inspector.cli.ls", "list ranks, graphs and passes of a capture or TORCH_TRACE log"),
    "diff": ("graphtrain_inspect.inspector.cli.diff", "diff a pass's graphs, before/after or across ranks"),
    "check": (
        "graphtrain_inspect.inspector.cli.check",
        "find rank-baked constants, device literals, stale symbols, divergent passes",
    ),
    "compare": (
        "graphtrain_inspect.inspector.cli.compare",
        "compare two runs: what changed in each pass's graphs on each rank, and which findings are new",
    ),
    "report": (
        "graphtrain_inspect.inspector.cli.report",
        "write a self-contained HTML report of a capture's findings, diffs and rank agreement",
    ),
    "repro": (
        "graphtrain_inspect.inspector.cli.repro",
        "write a folder that reproduces one finding with torch alone (repro.py exits 1 while it is there)",
    ),
    "replay": ("graphtrain_inspect.inspector.cli.replay", "re-run one captured pass on its captured input graph"),
    "trust": (
        "graphtrain_inspect.inspector.cli.trust",
        "sign a capture with your key, so replay loads it without --trust",
    ),
    "tui": ("graphtrain_inspect.inspector.cli.tui", "browse a capture interactively"),
}


# What each command's --help ends with: one to three command lines a user can copy (a test parses
# every one with the command's own parser, so they stay valid as the options change).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "capture": (
        "graphtrain-inspect capture --out cap -- torchrun --nproc-per-node 2 train.py",
        "graphtrain-inspect capture --out cap --pass my_passes:bucket -- torchrun --nproc-per-node 2 train.py",
        "graphtrain-inspect capture --out cap --simulate-world 64 --mesh dp=8,tp=8 -- python train.py",
    ),
    "ls": ("graphtrain-inspect ls cap", "graphtrain-inspect ls --sample h200x2-rank-divergent --rank 1"),
    "diff": (
        "graphtrain-inspect diff cap --pass remove_dead_code",
        "graphtrain-inspect diff cap --pass remove_dead_code --ranks 0,1",
        "graphtrain-inspect diff cap --output-code --ranks 0,1",
    ),
    "check": (
        "graphtrain-inspect check cap",
        "graphtrain-inspect check cap --json --severity error",
        "graphtrain-inspect check --sample h200x2-rank-baked --shared-graph",
    ),
    "compare": (
        "graphtrain-inspect compare main.cap pr.cap",
        "graphtrain-inspect compare main.cap pr.cap --pass remove_dead_code --rank 1",
        "graphtrain-inspect compare h200x2-clean h200x2-rank-divergent --json",
    ),
    "report": (
        "graphtrain-inspect report cap -o report.html",
        "graphtrain-inspect report --sample h200x2-clean -o out/",
    ),
    "repro": ("graphtrain-inspect repro cap --finding 1 -o repro1", "python repro1/repro.py"),
    "replay": (
        "graphtrain-inspect replay cap --pass remove_dead_code --rank 1",
        "graphtrain-inspect replay cap --pass remove_dead_code --batch --fn my_passes:fixed_pass",
    ),
    "trust": ("graphtrain-inspect trust cap",),
    "tui": ("graphtrain-inspect tui cap", "graphtrain-inspect tui --sample h200x2-rank-divergent"),
}


def examples_text(name: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES.get(name, ()))


def _with_examples(parser: argparse.ArgumentParser, name: str) -> None:
    """End the command's help with its examples, as written (each on its own line)."""
    if name not in EXAMPLES:
        return
    formatter: Any = parser.formatter_class
    if not (isinstance(formatter, type) and issubclass(formatter, argparse.RawDescriptionHelpFormatter)):
        # the default wraps the epilog's lines into one paragraph; the command's own formatter stays
        raw: Any = type("WithExamples", (argparse.RawDescriptionHelpFormatter, formatter), {})
        parser.formatter_class = raw
    parser.epilog = "\n\n".join(t for t in (parser.epilog, examples_text(name)) if t)


def _load(name: str):
    module, _ = COMMANDS[name]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and module.startswith(e.name):
            return None  # not built yet in this version
        raise


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("graphtrain-inspect")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """argparse's `version` action with the version looked up when asked for: reading the
    installed package's metadata (importlib.metadata) took 20 ms of every command's start."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show program's version number and exit"
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(f"{parser.prog} {version()}")
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    from graphtrain_inspect.inspector.cli.argument_errors import ErrorFirstParser

    parser = ErrorFirstParser(
        prog="graphtrain-inspect",
        description="Inspect and debug the graph passes of graph-based distributed PyTorch training.",
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        # Only the chosen command's module is imported: the others cost nothing at start-up.
        if name == only:
            mod = _load(name)
            if mod is not None:
                mod.add_arguments(p)
            _with_examples(p, name)
    return parser


def _unknown_options(parser: argparse.ArgumentParser, command: str | None, extras: list[str]) -> NoReturn:
    """End on arguments no parser took, as argparse does, with the nearest option of the command
    for each one that looks like a misspelled option."""
    from graphtrain_inspect.inspector.cli.argument_errors import nearest

    sub = parser
    for action in parser._subparsers._group_actions if parser._subparsers else ():  # the command's own parser
        sub = getattr(action, "choices", {}).get(command, parser)
    known = [o for a in sub._actions for o in a.option_strings]

    def said(x: str) -> str:
        guess = nearest(x.split("=")[0], known) if x.startswith("--") else None
        return f"{x} (did you mean {guess}?)" if guess else x

    sub.error("unrecognized arguments: " + " ".join(said(x) for x in extras))


def main(argv: list[str] | None = None) -> int:
    own_process = argv is None  # the console script, `python -m`: the process ends with the command
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(chosen if chosen in COMMANDS else None)
    args, extras = parser.parse_known_args(argv)
    if extras:
        _unknown_options(parser, args.command, extras)
    if args.command is None:
        parser.print_help()
        return 2
    mod = _load(args.command)
    if mod is None:
        print(f"graphtrain-inspect: '{args.command}' is not available in this version", file=sys.stderr)
        return 2
    from graphtrain_inspect.capture.shared import terminal_text
    from graphtrain_inspect.inspector.cli.common import list_samples, resolve_capture
    from graphtrain_inspect.inspector.errors import InspectorError
    from graphtrain_inspect.inspector.read.collector import no_gc

    if args.command != "tui":  # Textual owns the terminal there; the TUI escapes as it renders
        # Text from a capture is data: whatever a command prints, control characters are escaped.
        terminal_text.install()
    try:
        if getattr(args, "list_samples", False):
            print("\n".join(list_samples()))
            return 0
        if hasattr(args, "sample") and hasattr(args, "dir"):  # ls, diff, check: DIR or --sample NAME
            resolve_capture(args, args.command)
        if args.command in BATCH_READERS and not own_process:
            with no_gc():  # called in a process that goes on (tests, scripts): as it was after
                return int(mod.run(args) or 0)
        if args.command in BATCH_READERS:
            # off for good: the process ends with the command, and a collector turned back on
            # would rescan everything it holds once more on the way out
            gc.disable()
        code = int(mod.run(args) or 0)
        if own_process and args.command in ENDS_AT_RETURN:
            _end_now(code)
        return code
    except InspectorError as e:  # the one place an error of the core becomes its line and exit status
        print(f"graphtrain-inspect {args.command}: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        return 130
    except terminal_text.OutputNotWritten as e:  # a write failed mid-output: the rest is lost too
        if own_process:
            _end_now(_UNFLUSHED, lost=e)  # says it
        _say_lost(e)
        return _UNFLUSHED
    except BrokenPipeError:
        if own_process:  # the reader went away: nothing is left to write, nor to flush into it
            os._exit(0)
        return 0


# the exit status of a process whose output could not be flushed at its end: Python's own, for the
# flush its teardown makes
_UNFLUSHED = 120


def _say_lost(e: OSError) -> None:
    try:
        print(f"graphtrain-inspect: the output could not be written: {e}", file=sys.stderr)
    except OSError:  # stderr is the stream that failed: nothing is left to say it on
        pass


def _end_now(code: int, lost: OSError | None = None) -> NoReturn:
    """End the process of a command that has read a capture and written all it writes (its files
    are closed when it returns): its output flushed, without the interpreter's teardown, which
    frees every object read one by one and runs a full collection, the collector off or not
    (`check -j 1` of the 30k-node capture whose ranks differ 0.662 s against 0.778 on a 2-core machine,
    `python -m benchmarks check`). What was registered to run at exit
    (`atexit`: multiprocessing's, a caller's) runs first, as it would. `lost`: a write to stdout
    already failed; it is said, and what is left in stdout's buffer is not tried again."""
    import atexit

    run_exit_functions = getattr(atexit, "_run_exitfuncs", None)  # CPython's; elsewhere none run
    if run_exit_functions is not None:
        run_exit_functions()
    if lost is None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:  # the reader stopped reading, as `main` answers it
            code = 0
        except OSError as e:  # the output is not whole (a full disk): said, as the teardown's flush did
            lost = e
    if lost is not None:
        _say_lost(lost)
        code = _UNFLUSHED
    try:
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
