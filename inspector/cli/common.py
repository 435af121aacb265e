"""What every command shares: its one-line failure, opening the capture it was given, the options
every reading command takes (`--source`, `--color`) and its reading problems on stderr."""

from __future__ import annotations

import os
import sys
from typing import IO, Any

from graphtrain_inspect.inspector.errors import CommandError


def open_or_fail(directory: str, source: str) -> Any:
    """The capture (or TORCH_TRACE logs) at `directory`; CaptureUnreadable (an InspectorError:
    `main` prints its one line) when it cannot be read."""
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    return open_capture(directory, source=source)


def add_capture_argument(p: Any, name: str = "dir", metavar: str = "DIR", *, nodes: bool = False) -> None:
    """The capture a command reads: DIR, or `--sample NAME` (a bundled capture, unpacked on first
    use as the TUI does), and `--list-samples`. `resolve_capture` fills args.<name> in. `nodes`:
    DIR may be followed by the capture folders of the job's other nodes, read as one world."""
    p.add_argument(
        name,
        nargs="?",
        metavar=metavar,
        help="capture directory, TORCH_TRACE directory or log file"
        + ("; or a folder of one job's node captures" if nodes else ""),
    )
    if nodes:
        p.add_argument(
            "more_dirs",
            nargs="*",
            metavar="DIR",
            help="the capture folders of the job's other nodes (a local --out per node): read with the first "
            "as one world",
        )
    p.add_argument("--sample", metavar="NAME", help="a bundled sample capture instead of DIR (see --list-samples)")
    p.add_argument(
        "--list-samples", action="store_true", help="list the bundled sample captures, a line each, and exit"
    )


def add_jobs_argument(p: Any, what: str) -> None:
    """`-j N`: how many processes a command uses for `what` (default: the machine's cores)."""
    p.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help=f"processes for {what} (default: the machine's cores, at most 16; 1: this process only)",
    )


def jobs_of(args: Any) -> int:
    """The processes `-j N` gives (at least 1), or the default."""
    if args.jobs is not None:
        return max(1, args.jobs)
    from graphtrain_inspect.inspector.checks.parallel import default_jobs

    return default_jobs()


def list_samples() -> list[str]:
    """One line per bundled capture: its name (padded to the longest) and what it holds."""
    from graphtrain_inspect.inspector.read import bundled

    names = bundled.names()
    width = max(map(len, names), default=0)
    return [
        f"{n:<{width}}  {bundled.describe(n)}" + ("  (tui opens it by default)" if n == bundled.DEFAULT else "")
        for n in names
    ]


def resolve_capture(args: Any, command: str, name: str = "dir") -> None:
    """args.<name> from `--sample NAME` (unpacked), or a CommandError when neither is given."""
    given, sample = getattr(args, name), getattr(args, "sample", None)
    if given and sample:
        raise CommandError(f"give {name.upper()} or --sample NAME, not both")
    more = getattr(args, "more_dirs", None) or []
    if given and more:
        import os

        # one path the reader opens as one world (node_parts.node_folders), and reopens in workers
        setattr(args, name, os.pathsep.join([given, *more]))
    if given:
        return
    if not sample:
        raise CommandError(
            f"a capture to read: graphtrain-inspect {command} DIR, or --sample NAME (--list-samples lists them)"
        )
    from graphtrain_inspect.inspector.read import bundled

    setattr(args, name, str(bundled.path_of(sample)))  # BundledError: `main` prints its one line


def diff_title(what: str, where: str, a: str, b: str) -> str:
    """Every diff's header, in one style: `WHAT (WHERE): A vs B`."""
    return f"{what} ({where}): {a} vs {b}" if where else f"{what}: {a} vs {b}"


def rank_pair(cap: Any, spec: str | None, directory: str, usage: str) -> tuple[int, int]:
    """The two ranks of `--ranks A,B`, each one the capture has; `usage` is the error's opening
    when `spec` is not two integers."""
    try:
        ra, rb = (int(x) for x in (spec or "").split(","))
    except ValueError:
        raise CommandError(f"{usage}, not {spec!r}") from None
    for r in (ra, rb):
        if r not in cap.ranks:
            raise CommandError(f"no rank {r} in {directory} (ranks: {cap.ranks})")
    return ra, rb


def write_diffs(docs: list[dict[str, Any]], lines: list[str], as_json: bool) -> None:
    """A diff command's output: `{"diffs": docs}` with --json, else its lines."""
    import sys

    import orjson

    if as_json:
        sys.stdout.write(
            orjson.dumps({"diffs": docs}, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n"
        )
    else:
        sys.stdout.write("\n".join(lines) + "\n")


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def write_new(name: str, data: bytes, dir_fd: int | None = None) -> None:
    """Write `data` to `name` (relative to `dir_fd` when given) as a file made here: what was
    there under the name (a link planted in an output folder, a leftover) is removed, never
    written through, and a link made in between makes the write fail (O_EXCL, O_NOFOLLOW). OSError."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    fd = os.open(name, _NEW_FILE, 0o644, dir_fd=dir_fd)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def open_output_dir(path: str) -> int:
    """A descriptor of the output folder `path`, made if missing; the folder the user named may be
    a link, but not its last part when it is inside (`graphs/` of a report written into a capture:
    a planted link there would lead the files elsewhere). OSError."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        pass
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))


def add_common_arguments(p: Any) -> None:
    p.add_argument(
        "--source",
        choices=("auto", "capture", "torch"),
        default="auto",
        help="read our capture logs, or torch's TORCH_TRACE logs (a capture's torch_trace/ subdirectory)",
    )
    p.add_argument(
        "--color", choices=("auto", "always", "never"), default="auto", help="colour output (default: when a terminal)"
    )


def print_read_errors(cap: Any, stream: IO | None = None, limit: int = 20) -> None:
    """Reading problems, one line each (file:line: message), on stderr."""
    stream = stream or sys.stderr
    errs = cap.all_errors()
    for e in errs[:limit]:
        print(f"graphtrain-inspect: {e}", file=stream)
    if len(errs) > limit:
        print(f"graphtrain-inspect: ... and {len(errs) - limit} more reading problems", file=stream)
