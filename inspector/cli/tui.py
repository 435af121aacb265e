"""`graphtrain-inspect tui [DIR|LOG]`: browse a capture (the bundled sample without an argument).
`tui BASE NEW`: two runs compared, the passes that changed first (tui.compare_app).

Nothing heavy at module level: textual is imported only when the command runs.
"""

from __future__ import annotations

import argparse

from graphtrain_inspect.inspector.cli.common import CommandError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path",
        nargs="?",
        metavar="DIR|LOG",
        help="capture directory, TORCH_TRACE directory or log file (default: the bundled sample capture)",
    )
    p.add_argument(
        "new",
        nargs="?",
        metavar="NEW",
        help="a second run: compare DIR (the base) with it, as `compare DIR NEW` does",
    )
    p.add_argument(
        "--source",
        choices=("auto", "capture", "torch"),
        default="auto",
        help="read our capture logs, or torch's TORCH_TRACE logs",
    )
    p.add_argument("--sample", metavar="NAME", help="open the bundled sample capture NAME (see --list-samples)")
    p.add_argument(
        "--list-samples", action="store_true", help="list the bundled sample captures, a line each, and exit"
    )
    p.add_argument(
        "--keymap",
        metavar="FILE",
        help="key bindings by binding id (TOML); default ~/.config/graphtrain-inspect/keymap.toml",
    )
    p.add_argument(
        "--shared-graph",
        action="store_true",
        help="run the checks as check --shared-graph does: the graphs are compiled on one rank and loaded by the "
        "others",
    )
    p.add_argument(
        "--poll",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="how often to look for new records in a capture still being written",
    )


def resolve_path(args: argparse.Namespace) -> str:
    """The capture to open; the bundled sample when none is named. Raises ValueError."""
    if args.path:
        return args.path
    from graphtrain_inspect.inspector.read import bundled

    try:
        return str(bundled.path_of(args.sample))
    except bundled.BundledError as e:
        raise ValueError(f"{e}; name a capture: graphtrain-inspect tui DIR") from None


def describe(args: argparse.Namespace, path: str) -> str:
    """What the header says is open: the path, or which bundled sample (as `--sample NAME`, and
    what it holds), never its place in the cache."""
    from graphtrain_inspect.inspector.read import bundled

    name = bundled.sample_of(path)
    if name is None:
        return path
    hint = "" if args.path or args.sample else " · graphtrain-inspect tui DIR opens yours"
    return f"--sample {name} · {bundled.describe(name) or 'bundled sample capture'}{hint}"


def _refuse_what_is_no_capture(path: str, source: str) -> None:
    """CaptureUnreadable, with the line every other command prints, for a path that does not exist
    or a directory that holds no log, manifest, claim or torch_trace/ at all: found by listing it,
    before the screen is taken over (the app reads the logs, and watches a capture starting)."""
    import os

    from graphtrain_inspect.capture.shared import logformat
    from graphtrain_inspect.inspector.errors import CaptureUnreadable

    if not os.path.exists(path):
        raise CaptureUnreadable(f"{path}: no such file or directory")
    if not os.path.isdir(path):
        return
    try:
        names = os.listdir(path)
    except OSError:
        return  # the app says why it cannot be read
    started = {logformat.MANIFEST_NAME, logformat.CLAIM_NAME, "torch_trace"}  # a capture starting: watched
    if started & set(names) or any(n.endswith(".log") for n in names):
        return
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    open_capture(path, source=source).close()  # raises its one line: nothing here to read


def run(args: argparse.Namespace) -> int:
    if args.new:
        return _compare(args)
    try:
        path = resolve_path(args)
    except ValueError as e:
        raise CommandError(str(e)) from None
    _refuse_what_is_no_capture(path, args.source)
    from graphtrain_inspect.inspector.read import collector

    collector.pause()  # until the first tree is painted, or the capture cannot be read (the app resumes it)
    from graphtrain_inspect.tui.app import InspectApp
    from graphtrain_inspect.tui.keymap import load_keymap

    keymap, problems = load_keymap(args.keymap)
    app = InspectApp(
        path,
        source=args.source,
        keymap=keymap,
        keymap_problems=problems,
        poll_seconds=args.poll,
        label=describe(args, path),
        shared_graph=args.shared_graph,
    )
    app.run()
    return app.return_code or 0


def _compare(args: argparse.Namespace) -> int:
    """`tui BASE NEW`: both runs checked to exist first (their one line, before the screen is
    taken over), then browsed compared."""
    from graphtrain_inspect.inspector.cli.compare import resolve_pair

    base, new = resolve_pair(args.path), resolve_pair(args.new)
    for path in (base, new):
        _refuse_what_is_no_capture(path, args.source)
    from graphtrain_inspect.tui.compare_app import CompareApp

    app = CompareApp(base, new, source=args.source, shared_graph=args.shared_graph, labels=(args.path, args.new))
    app.run()
    return app.return_code or 0
