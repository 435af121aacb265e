"""Where one `graphtrain-inspect` command's time goes, without a profiler's overhead: the named
steps of the core wrapped with a timer, the command run once in this process.

    python -m benchmarks.check_pieces -- check -j 1 CAPTURE
    python -m benchmarks.check_pieces -- diff CAPTURE --pass NAME --nodes
    python -m benchmarks.check_pieces --tasks CAPTURE
    python -m benchmarks.check_pieces --timeline CAPTURE JOBS
    python -m benchmarks.check_pieces --whole CAPTURE JOBS [REPEAT]
    python -m benchmarks.check_pieces --profile CAPTURE PASS
    python -m benchmarks.check_pieces --phases CAPTURE PASS

Prints the imports' time, the command's, and per step its total wall seconds and calls (steps
nest: a rank diff holds the anchored diff it made). cProfile (`benchmarks.profile_command`) says
which functions; this says how long each step takes as the command runs. With `--tasks`: each
task `check -j N` hands a process (inspector/checks/parallel.py), with its weight, timed alone
in a fresh context (nothing cached, as a worker that gets it first), the cyclic collector off;
a rank diff's line also says its stage, how its reference table's rows lie in subgraphs (the
largest, and those whose digests differ from the other rank's at the same place), and how many
distinct rows it read by their digests (both sides).
With `--profile`: the rank diff task of stage PASS, as `--tasks` times it, under cProfile (its
time unprofiled first, then the 25 functions of most own time). With `--phases`: that task three
times, each in a fresh context, and the last time's steps of the anchored diff, timed as the
command's steps are (no profiler): what reads the capture (digest records, refs, the rows read by
digest) and what aligns and compares. With `--timeline`: when the
pool of `check -j JOBS` is made, when each process starts and ends its share (its tasks and
their weight), when this process has read torch's logs beside the capture, and when the prefetch
ends. With `--whole`: `check --json -j JOBS CAPTURE` as the console script runs it, in a process
of its own started REPEAT times (default 3), its marks counted from the moment it was started
(the interpreter's start included), after the bare interpreter's start and end: when the
interpreter ran this module, when the libraries `check` imports were imported (all of them
first), then the project's modules, when the capture was opened, the prefetch's marks as `--timeline` makes
them, when the report was made, when its JSON was written, and when the process had ended (the
starter's clock).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import io
import os
import sys
import time
from typing import Any

TOTAL: collections.Counter = collections.Counter()
CALLS: collections.Counter = collections.Counter()


def _wrap(owner: Any, name: str, label: str) -> None:
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def timed(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            TOTAL[label] += time.perf_counter() - t0
            CALLS[label] += 1

    setattr(owner, name, timed)


def tasks(path: str) -> None:
    from graphtrain_inspect.inspector.checks import parallel
    from graphtrain_inspect.inspector.checks.tables_and_blame import CheckContext
    from graphtrain_inspect.inspector.read import capture_reader
    from graphtrain_inspect.inspector.read.capture_index import open_capture
    from graphtrain_inspect.inspector.read.collector import no_gc

    real = capture_reader.Capture.digest_rows
    read: set[tuple] = set()

    def counted(self: Any, rank: int, gid: str, sub: int, rows: Any) -> Any:
        read.update((rank, gid, sub, i) for i in rows)
        return real(self, rank, gid, sub, rows)

    capture_reader.Capture.digest_rows = counted  # type: ignore[method-assign]
    for group in parallel.tasks_for(CheckContext(open_capture(path))):
        for task in group:
            ctx = CheckContext(open_capture(path))
            read.clear()
            with no_gc():
                t0 = time.perf_counter()
                parallel._do(ctx, task)
                s = time.perf_counter() - t0
            rows = f", {len(read)} rows read by digest" if read else ""
            print(f"{task[0]:5s} weight {task[-1]:8d}  {s * 1000:7.1f} ms{_layout(ctx, task)}{rows}")


def profile(path: str, pass_name: str) -> None:
    import cProfile
    import pstats

    from graphtrain_inspect.inspector.checks import parallel
    from graphtrain_inspect.inspector.checks.tables_and_blame import CheckContext
    from graphtrain_inspect.inspector.read.capture_index import open_capture
    from graphtrain_inspect.inspector.read.collector import no_gc

    found = [t for g in parallel.tasks_for(CheckContext(open_capture(path))) for t in g]
    found = [t for t in found if t[0] == "diff" and t[1].pass_name == pass_name]
    if not found:
        raise SystemExit(f"no rank diff task of stage {pass_name!r} in {path}")
    for task in found:
        for profiled in (False, True):
            ctx = CheckContext(open_capture(path))
            prof = cProfile.Profile() if profiled else None
            with no_gc():
                t0 = time.perf_counter()
                if prof is not None:
                    prof.runcall(parallel._do, ctx, task)
                else:
                    parallel._do(ctx, task)
                s = time.perf_counter() - t0
            print(f"{task[1].pass_name}: {s * 1000:.1f} ms{' profiled' if profiled else ''}{_layout(ctx, task)}")
            if prof is not None:
                pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def phases(path: str, pass_name: str) -> None:
    from graphtrain_inspect.inspector.checks import parallel
    from graphtrain_inspect.inspector.checks.tables_and_blame import CheckContext
    from graphtrain_inspect.inspector.diff import anchored, row_parts
    from graphtrain_inspect.inspector.read import capture_reader, row_digests
    from graphtrain_inspect.inspector.read.capture_index import open_capture
    from graphtrain_inspect.inspector.read.collector import no_gc

    found = [t for g in parallel.tasks_for(CheckContext(open_capture(path))) for t in g]
    found = [t for t in found if t[0] == "diff" and t[1].pass_name == pass_name]
    if not found:
        raise SystemExit(f"no rank diff task of stage {pass_name!r} in {path}")
    steps = [
        (anchored, "_sub_diff", "aligning: a subgraph's diff (all below in it but the digest records)"),
        (capture_reader.Capture, "row_digests", "reading: digest records laid over tables"),
        (row_digests.RowDigests, "shared", "aligning: rows the same on both sides, counted"),
        (row_digests.RowDigests, "sub_refs", "reading: a subgraph's refs"),
        (capture_reader.Capture, "digest_rows", "reading: rows read by digest (decoded, checked)"),
        (anchored, "_anchors", "aligning: anchors (digests once on each side, in order)"),
        (anchored, "_named_gap_seeds", "aligning: gap rows paired by name (reads rows too)"),
        (anchored, "_users", "aligning: users of the gap rows"),
        (row_parts.Parts, "__init__", "aligning: the rows read, as signatures and refs"),
        (anchored, "_refs_agree", "aligning: refs against the rows read"),
        (anchored, "align_seeded", "aligning: the seeded alignment"),
        (anchored, "compare_parts", "aligning: pairs compared"),
    ]
    for owner, name, label in steps:
        _wrap(owner, name, label)
    for _ in range(3):
        TOTAL.clear()
        CALLS.clear()
        ctx = CheckContext(open_capture(path))
        with no_gc():
            t0 = time.perf_counter()
            parallel._do(ctx, found[0])
            s = time.perf_counter() - t0
    print(f"{pass_name}: {s * 1000:.1f} ms (the third run){_layout(ctx, found[0])}")
    for label, v in sorted(TOTAL.items(), key=lambda kv: -kv[1]):
        print(f"  {label:72s} {v * 1000:7.1f} ms  x{CALLS[label]}")


def _layout(ctx: Any, task: tuple) -> str:
    """For a rank diff of tables with row digests: the stage, the reference rank's subgraphs, its
    largest one's rows of all its rows, and the rows of each subgraph whose digests differ from
    the other rank's at the same place (a diff cut by subgraph gives each such one to a process)."""
    if task[0] != "diff":
        return ""
    _, key, ref, other, _ = task
    across = ctx.index.across(key)
    da, db = ctx.cap.row_digests(ref, across[ref].gid), ctx.cap.row_digests(other, across[other].gid)
    if da is None or db is None:
        return f"  {key.pass_name}"
    differ = [
        (da.counts[k], db.counts[k])
        for k in range(min(len(da.counts), len(db.counts)))
        if da.sub_digests(k) != db.sub_digests(k)
    ]
    return (
        f"  {key.pass_name}: {len(da.counts)} subgraphs, the largest {max(da.counts)} of {sum(da.counts)}"
        f" rows; differing {differ[:4]}"
    )


_TIMED: dict[str, Any] = {}


def _timed_work(*a: Any) -> list:
    """parallel._work, in a worker, with a stamp the prefetch keeps as a stale-symbol result
    (task[3] its key): the worker, its start and end, its tasks and their weight."""
    import os
    import resource

    t0 = _TIMED["t0"]
    s = time.time()
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    out = _TIMED["work"](*a)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0  # pages copied or first touched
    stamp = (os.getpid(), s - t0, time.time() - t0, len(a[3]), sum(t[-1] for t in a[3]), faults)
    return [*out, (("stamp", 0, 0, stamp), None)]


def _prefetch_marks(t0: float, marks: dict[str, float]) -> list:
    """Hooks that put the marks of `check -j N`'s prefetch in `marks` (seconds from `t0`); the
    list the workers' stamps are put in (pid, start, end, tasks, weight, page faults)."""
    import multiprocessing.pool

    from graphtrain_inspect.inspector.checks import parallel
    from graphtrain_inspect.inspector.read import compile_events

    real_work, real_do, real_init = parallel._work, parallel._do, multiprocessing.pool.Pool.__init__
    parent = os.getpid()
    share = [0.0, 0, 0]

    def do(c: Any, task: tuple) -> tuple:
        out = real_do(c, task)
        if os.getpid() == parent:
            share[0] = max(share[0], time.time() - t0)
            share[1] += 1
            share[2] += task[-1]
        return out

    def init(self: Any, *a: Any, **k: Any) -> None:
        marks["pool: start"] = time.time() - t0
        real_init(self, *a, **k)
        marks["pool: workers forked"] = time.time() - t0

    real_story = compile_events.compile_story

    def story(c: Any) -> Any:
        out = real_story(c)
        marks.setdefault("torch's logs read (compile story), in this process", time.time() - t0)
        return out

    real_get, real_exit = multiprocessing.pool.ApplyResult.get, multiprocessing.pool.Pool.__exit__

    def get(self: Any, *a: Any, **k: Any) -> Any:
        out = real_get(self, *a, **k)
        marks["results taken (the last)"] = time.time() - t0
        return out

    def exit_(self: Any, *a: Any) -> Any:
        marks["pool: closing"] = time.time() - t0
        out = real_exit(self, *a)
        marks["pool: closed"] = time.time() - t0
        return out

    multiprocessing.pool.ApplyResult.get = get  # type: ignore[method-assign]
    multiprocessing.pool.Pool.__exit__ = exit_  # type: ignore[method-assign]
    compile_events.compile_story = story  # type: ignore[assignment]
    _TIMED.update(t0=t0, work=real_work)
    parallel._work, parallel._do = _timed_work, do  # the pool sends its function by name
    multiprocessing.pool.Pool.__init__ = init  # type: ignore[method-assign]
    real_prefetch = parallel.prefetch
    stamps: list = []

    def prefetch(ctx: Any, *a: Any, **k: Any) -> int:
        marks["prefetch: start"] = time.time() - t0
        used = real_prefetch(ctx, *a, **k)
        marks["prefetch done"] = time.time() - t0
        if used > 1:  # else no pool: the checks make everything as they go
            marks["this process's share ended"] = share[0]
        marks[f"-j: {used} processes; this one {share[1]} tasks of weight {share[2]}"] = marks["prefetch done"]
        stale = ctx.prefetched.get("stale-unbacked-symbol", {})
        for k in [k for k in stale if isinstance(k, tuple) and len(k) == 6]:
            stamps.append(k)  # the workers' stamps out, before the checks read what was made
            del stale[k]
        return used

    parallel.prefetch = prefetch  # type: ignore[assignment]
    return stamps


def _print_marks(marks: dict[str, float], stamps: list) -> None:
    for k, v in sorted(marks.items(), key=lambda kv: kv[1]):
        print(f"  {v:7.3f}  {k}")
    for pid, a, b, n, w, faults in sorted(stamps, key=lambda x: x[1]):
        print(f"  worker {pid}: {a:.3f}-{b:.3f} ({b - a:.3f} s) {n} tasks of weight {w}, {faults} page faults")


def timeline(path: str, jobs: int) -> None:
    """When each process of `check -j N`'s prefetch starts and ends its share, against the pool's
    start and the prefetch's end (seconds from the capture's opening)."""
    import gc

    from graphtrain_inspect.inspector.checks import parallel
    from graphtrain_inspect.inspector.checks.tables_and_blame import CheckContext
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    gc.disable()  # as the CLI's commands run (cli/main.py)
    t0 = time.time()
    ctx = CheckContext(open_capture(path))
    marks = {"index read": time.time() - t0}
    stamps = _prefetch_marks(t0, marks)
    s = time.time()
    parallel.tasks_for(ctx)
    marks["tasks listed (once more, timed)"] = time.time() - t0
    marks["tasks listed: took"] = time.time() - s
    parallel.prefetch(ctx, jobs)
    _print_marks(marks, stamps)


_WHOLE_T0 = "GTI_BENCH_T0"  # when the starter started the measured process (time.time())
_WHOLE_LIBS = "GTI_BENCH_LIBS"  # the modules not the project's that check imports, imported first


def whole(path: str, jobs: int, repeat: int) -> None:
    """`check --json -j JOBS` in a process of its own, REPEAT times: its marks from its start.
    First the interpreter alone (`-c` with nothing to run but its end), REPEAT times, and one
    run that lists the modules not the project's that the command imports (the standard
    library's, orjson, rapidfuzz): each measured run imports them first, marked apart from
    the project's own."""
    import subprocess

    bare = []
    for _ in range(repeat):
        t0 = time.time()
        subprocess.run([sys.executable, "-c", "import os; os._exit(0)"], check=True)
        bare.append(time.time() - t0)
    print("the interpreter alone, started and ended: " + ", ".join(f"{b:.3f}" for b in bare) + " s")
    cmd = [sys.executable, "-m", "benchmarks.check_pieces", "--whole-child", path, str(jobs)]
    env = {**os.environ, _WHOLE_T0: repr(time.time()), _WHOLE_LIBS: "?"}
    listed = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    libs = [ln[5:] for ln in listed.stderr.splitlines() if ln.startswith("LIBS ")]
    if not libs:
        raise SystemExit(f"the modules check imports were not listed: {listed.stderr[-2000:]}")
    print(f"modules not the project's that check imports: {len(libs[0].split(','))}")
    for _ in range(repeat):
        t0 = time.time()
        env = {**os.environ, _WHOLE_T0: repr(t0), _WHOLE_LIBS: libs[0]}
        out = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
        ended = time.time() - t0
        if out.returncode not in (0, 1):
            raise SystemExit(f"check ended with {out.returncode}: {out.stderr[-2000:]}")
        print(f"check --json -j {jobs}, {ended:.3f} s from its start to its end (exit {out.returncode})")
        sys.stdout.write(out.stderr)
        print(f"  {ended:7.3f}  the process ended (the starter's clock)")


_OURS = ("graphtrain_inspect", "benchmarks", "__main__", "__mp_main__")


def whole_child(path: str, jobs: int) -> None:
    """The command as the console script runs it (cli/main.py: its own process, the collector
    off, ended by `_end_now`), its marks written to stderr by an atexit function, which `_end_now`
    runs after the command has returned and before stdout is flushed."""
    import atexit
    import importlib

    t0 = float(os.environ[_WHOLE_T0])
    marks = {"this module running (the interpreter started)": time.time() - t0}
    libs = os.environ.get(_WHOLE_LIBS, "?")
    before = set(sys.modules)
    if libs != "?":
        for name in libs.split(","):
            with contextlib.suppress(Exception):  # one that imports only as part of another
                importlib.import_module(name)
        marks["imports not the project's (standard library, orjson, rapidfuzz), done"] = time.time() - t0
    from graphtrain_inspect.inspector import checks
    from graphtrain_inspect.inspector.checks import parallel, tables_and_blame  # noqa: F401 (what check runs)
    from graphtrain_inspect.inspector.cli import check
    from graphtrain_inspect.inspector.cli.main import main as cli_main

    marks["imports of the project's modules check needs, done"] = time.time() - t0
    stamps = _prefetch_marks(t0, marks)
    real_open, real_ctx, report = check.open_or_fail, tables_and_blame.CheckContext.__init__, checks.check_report

    def opened(*a: Any, **k: Any) -> Any:
        out = real_open(*a, **k)
        marks["capture opened (its index)"] = time.time() - t0
        return out

    def ctx_init(self: Any, *a: Any, **k: Any) -> None:
        real_ctx(self, *a, **k)
        marks.setdefault("check context made", time.time() - t0)

    def made(*a: Any, **k: Any) -> Any:
        out = report(*a, **k)
        marks["report made"] = time.time() - t0
        return out

    def said() -> None:
        marks["the command returned (its JSON written, not yet flushed)"] = time.time() - t0
        if libs == "?":  # the listing run: the modules this run imported, not the project's
            new = sorted(m for m in set(sys.modules) - before if m.split(".")[0] not in _OURS)
            print("LIBS " + ",".join(new), file=sys.__stderr__)
            return
        with contextlib.redirect_stdout(sys.__stderr__):
            _print_marks(marks, stamps)

    check.open_or_fail = opened  # type: ignore[assignment]
    checks.check_report = made  # type: ignore[assignment]
    tables_and_blame.CheckContext.__init__ = ctx_init  # type: ignore[method-assign]
    atexit.register(said)
    sys.argv = ["graphtrain-inspect", "check", "--json", "-j", str(jobs), path]
    cli_main()  # ends the process


def main() -> int:
    args = sys.argv[1:]
    args = args[1:] if args[:1] == ["--"] else args
    if not args:
        print(__doc__)
        return 2
    if args[0] == "--tasks" and len(args) == 2:
        tasks(args[1])
        return 0
    if args[0] == "--profile" and len(args) == 3:
        profile(args[1], args[2])
        return 0
    if args[0] == "--phases" and len(args) == 3:
        phases(args[1], args[2])
        return 0
    if args[0] == "--whole" and len(args) in (3, 4):
        whole(args[1], int(args[2]), int(args[3]) if len(args) == 4 else 3)
        return 0
    if args[0] == "--whole-child" and len(args) == 3:
        whole_child(args[1], int(args[2]))
        return 0
    if args[0] == "--timeline" and len(args) == 3:
        timeline(args[1], int(args[2]))
        return 0
    from benchmarks.scale_bench import ROOT, compiled

    compiled(ROOT)
    t0 = time.perf_counter()
    from graphtrain_inspect.inspector import checks
    from graphtrain_inspect.inspector.checks import parallel, stale_unbacked_symbol, tables_and_blame
    from graphtrain_inspect.inspector.cli.main import main as cli_main
    from graphtrain_inspect.inspector.diff import anchored, row_rank_diff
    from graphtrain_inspect.inspector.read import capture_reader, compile_events, row_digests

    for kind, mod in checks.check_modules().items():
        _wrap(mod, "run", f"check {kind}")
    steps = [
        (parallel, "prefetch", "-j: the work of every process"),
        (parallel, "tasks_for", "  -j: the tasks listed"),
        (parallel, "_do", "  -j: this process's share (and workers')"),
        (tables_and_blame.CheckContext, "rank_diff", "rank diffs"),
        (row_rank_diff, "_pairs_from_digests", "  positional, from digests"),
        (anchored, "_anchored_diff", "  anchored diffs"),
        (anchored, "_anchors", "    pairing the digests"),
        (anchored, "lis", "    longest increasing run"),
        (anchored, "_named_gap_seeds", "    gap rows paired by name"),
        (capture_reader.Capture, "row_digests", "row-digest records laid over tables"),
        (capture_reader.Capture, "digest_rows", "rows read by digest"),
        (row_digests.RowDigests, "sub_refs", "refs checked"),
        (stale_unbacked_symbol, "_scopes_say_none", "stale: scope events"),
        (stale_unbacked_symbol, "_walked", "stale: graphs walked"),
        (capture_reader.Capture, "symbols", "symbol maps read"),
        (checks, "attach_sources", "findings' source lines"),
        (compile_events, "_read_story", "torch's logs beside the capture read"),
    ]
    for owner, name, label in steps:
        _wrap(owner, name, label)
    t1 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            cli_main(args)
        except SystemExit:
            pass
    t2 = time.perf_counter()
    print(f"imports {t1 - t0:.3f} s, the command {t2 - t1:.3f} s (in this process)")
    for label, s in sorted(TOTAL.items(), key=lambda kv: -kv[1]):
        print(f"  {label:44s} {s:7.3f} s  x{CALLS[label]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
