"""The replay REPL: the captured graphs, the replayed result, and helpers to iterate on a pass.

    before      the graph the pass received (a fresh copy: the pass ran on another)
    after       the graph the capture recorded after the pass
    result      the replayed result (after rerun(): the latest one)
    pass_fn     the function that ran
    rerun(fn=None)   load `before` afresh, run fn (a function or "module:func"; default pass_fn) in the
                     rank's world, print the verdict, the diff and the checks; returns the result
    diff(a, b)       node-by-node diff of two graphs (GraphModules or captured gids), then the code
    check(gm)        findings with gm as this pass's output on the rank, new or gone vs the capture
    show(gm)         the graph's code (print_readable with devices and strides)

IPython when it is installed and stdin is a terminal; the standard library's REPL otherwise.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from graphtrain_inspect.capture.shared.terminal_text import Style, want_color


def _banner(r: Any, out: Any) -> str:
    rec = out.rec
    return "\n".join(
        [
            f"graphtrain-inspect replay: #{rec.seq} {rec.name} on rank {out.rank} ({out.verdict})",
            "  before   the graph the pass received (fresh copy)      after    the captured after-graph",
            "  result   the replayed result                           pass_fn  the function that ran",
            "  rerun(fn=None)  run again (fn: a function or 'module:func')   diff(a, b)  node diff of two graphs",
            "  check(gm)       findings with gm as the pass's output          show(gm)    print a graph's code",
            "  (the rank's environment and fake process group are entered only while a pass runs)",
        ]
    )


class Session:
    """The REPL's state and helpers (also usable from tests and scripts)."""

    def __init__(
        self,
        r: Any,
        out: Any,
        peer_outs: dict[int, Any] | None = None,
        *,
        color: bool = False,
        limit: int = 20,
        peers: bool = True,
    ):
        self.r = r
        self.out = out
        self.peer_outs = dict(peer_outs or {})
        self.st = Style(color)
        self.limit = limit
        self.peers = peers
        self._before: Any = None
        self._after: Any = None

    # -- values --------------------------------------------------------------------------------

    @property
    def before(self) -> Any:
        if self._before is None:
            self._before = self.r.load_before().gm
        return self._before

    @property
    def after(self) -> Any:
        if self._after is None:
            if not self.out.rec.after:
                return None
            self._after = self.r.load_after().gm
        return self._after

    @property
    def result(self) -> Any:
        return self.out.result

    @property
    def pass_fn(self) -> Any:
        return self.out.pass_fn.fn if self.out.pass_fn is not None else None

    # -- helpers -------------------------------------------------------------------------------

    def rerun(self, fn: Any = None) -> Any:
        from graphtrain_inspect.inspector.replay.replayer import check_delta
        from graphtrain_inspect.inspector.replay.report import check_lines, outcome_lines

        out = self.r.run(fn)
        self.out = out
        for line in outcome_lines(
            self.r, out, "verified", self.st, self.limit, with_fn=fn is not None or self.r.fn is not None
        ):
            print(line)
        if self.peers:
            from graphtrain_inspect.inspector.replay.plan import peers

            precs = peers(self.r.cap, self.r.target)
            self.peer_outs = {pr: self.r.run(fn, prec) for pr, prec in sorted(precs.items())}
            delta = check_delta(self.r.cap, self.r.target, {out.rank: out, **self.peer_outs}, precs)
            for line in check_lines(delta, out.rec, self.st, self.peer_outs):
                print(line)
        return out.result

    def _tables(self, g: Any) -> Any:
        from graphtrain_inspect.inspector.read.graphmodel import GraphTables
        from graphtrain_inspect.inspector.replay.replayer import GraphView, graph_view

        if isinstance(g, GraphTables):
            return g, None
        if isinstance(g, GraphView):
            return g.tables, g.code
        if isinstance(g, str):
            rank = self.out.rank
            t = self.r.cap.node_table(rank, g)
            if t is None:
                raise ValueError(f"no graph {g!r} on rank {rank}")
            return t, self.r.cap.graph_code(rank, g)
        v = graph_view(g)
        return v.tables, v.code

    def diff(self, a: Any, b: Any, *, text: bool = True) -> Any:
        from graphtrain_inspect.inspector.diff.graph_diff import diff_tables, text_diff
        from graphtrain_inspect.inspector.replay.replayer import code_lines
        from graphtrain_inspect.inspector.replay.report import diff_lines

        ta, ca = self._tables(a)
        tb, cb = self._tables(b)
        d = diff_tables(ta, tb, a_label="a", b_label="b")
        c = d.counts
        print(
            f"nodes: {c['added']} added, {c['removed']} removed, {c['changed']} changed"
            if not d.empty
            else "no node differences"
        )
        for line in diff_lines(d, self.st, self.limit):
            print(line)
        if text and ca is not None and cb is not None:
            lines = text_diff(code_lines(ca), code_lines(cb), "a", "b")
            for line in lines[:200]:
                print(line)
            if len(lines) > 200:
                print(f"... {len(lines) - 200} more diff lines")
        return d

    def check(self, gm: Any) -> Any:
        from graphtrain_inspect.inspector.replay.replayer import check_delta, graph_view
        from graphtrain_inspect.inspector.replay.report import check_lines

        view = graph_view(gm, devices_like=self.r.cap.devices(self.out.rank, self.out.rec.before))
        import copy

        mine = copy.copy(self.out)
        mine.view = view
        delta = check_delta(
            self.r.cap,
            self.r.target,
            {self.out.rank: mine, **{r: o for r, o in self.peer_outs.items() if r != self.out.rank}},
        )
        for line in check_lines(delta, self.out.rec, self.st, self.peer_outs):
            print(line)
        return delta

    def show(self, gm: Any) -> None:
        from graphtrain_inspect.capture import graph_tables

        if isinstance(gm, str):
            print(self.r.cap.graph_code(self.out.rank, gm) or f"no graph {gm!r}")
            return
        print(graph_tables.readable_code(gm))

    def namespace(self) -> dict[str, Any]:
        ns: dict[str, Any] = {
            "rerun": self._rerun_and_bind,
            "diff": self.diff,
            "check": self.check,
            "show": self.show,
            "session": self,
            "result": self.result,
            "pass_fn": self.pass_fn,
            "capture": self.r.cap,
            "torch": sys.modules.get("torch"),
        }
        ns["before"] = self.before
        ns["after"] = self.after
        self._ns = ns
        return ns

    def _rerun_and_bind(self, fn: Any = None) -> Any:
        res = self.rerun(fn)
        ns = getattr(self, "_ns", None)
        if ns is not None:
            ns["result"] = res
            ns["pass_fn"] = self.pass_fn
        return res


def start_repl(r: Any, out: Any, peer_outs: dict, delta: Any, args: argparse.Namespace) -> int:
    from graphtrain_inspect.inspector.errors import Refused, ReplayError

    s = Session(
        r,
        out,
        peer_outs,
        color=want_color(args.color),
        limit=args.limit,
        peers=args.peers == "all" and not args.no_check,
    )
    try:
        ns = s.namespace()
    except (ReplayError, Refused) as e:
        print(f"graphtrain-inspect replay: {e}", file=sys.stderr)
        return 2
    banner = _banner(r, out)
    if sys.stdin.isatty():
        try:
            from IPython import start_ipython  # type: ignore[import-not-found]  # optional: the REPL falls back to code.interact
        except ImportError:
            start_ipython = None
        if start_ipython is not None:
            from traitlets.config import Config  # type: ignore[import-not-found]  # optional: comes with IPython

            cfg = Config()
            cfg.TerminalInteractiveShell.banner1 = banner + "\n"
            # IPython draws its prompt with escape codes of its own: give it the raw terminal
            # (the standard REPL below keeps the escaping that show() and diff() print through).
            from graphtrain_inspect.capture.shared import terminal_text

            terminal_text.uninstall()
            start_ipython(argv=[], user_ns=ns, config=cfg)
            return 0
    import code

    try:
        import readline  # noqa: F401 - line editing in the standard REPL
    except ImportError:
        pass
    code.interact(banner=banner, local=ns, exitmsg="")
    return 0
