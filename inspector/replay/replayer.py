"""Replay one captured pass: load the graph it received, run it again as it ran in training, and
compare the result with what the capture recorded.

    cap = open_capture(DIR)
    target = select(cap, "concretize_symbolic_shapes", 1, None)
    r = Replayer(cap, target)
    out = r.run()                      # Outcome: reproduced?, diff, exception, timings
    out = r.run(fn=my_fixed_pass)      # an edited copy or a candidate fix
    check_delta(cap, target, {target.rank: out})   # findings new or gone, compared with the capture

Loading: the before-graph's blob is verified and unpickled (GraphPickler) into a fresh
FakeTensorMode with its own ShapeEnv, after importing the operator libraries its node table names
(`device_mesh` ops need `torch.distributed._ops.device_mesh`, registered after DeviceMesh's opaque
type). Trust and the sha256 are checked first (inspector.replay.plan); this module is reached only
for captures that may be loaded.

Running "as in training": the captured rank's environment variables (RANK, LOCAL_RANK, WORLD_SIZE,
the manifest's TORCH_*/NCCL_* ...) and `sys.argv`; where the rank had torch.distributed
initialized (its rank table lists groups), a single-process world with the "fake" backend of the
captured rank and world size, with the captured process groups recreated under their captured
names, so `dist.get_rank()` answers as on that rank (and stays uninitialized where it was); a
TracingContext holding the graph's fake mode (and Inductor's `V.fake_mode` for Inductor passes).
Everything is restored afterwards.

The pass is the function named by the record's `module:qualname` (through the registry the
capture wrapped when it holds a functools.partial of it, so bound configuration is kept), or the
one given with `fn`. Inductor's passes are resolved by subsystem and name (see `inductor_pass`);
the ones that cannot be re-run say why.

Loading is in `load`, finding the pass in `resolve`, the rank's world in `world`; this module runs
and compares, and holds `Replayer` and `check_delta`. These modules import torch; nothing outside
the replay modules imports it.
"""

from __future__ import annotations

import re
import time
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import orjson
import torch
import torch.fx

from graphtrain_inspect.capture import graph_tables
from graphtrain_inspect.capture.shared import logformat

# What this module held before loading, resolving and the rank's world had their own modules:
# still importable from here.
from graphtrain_inspect.inspector.errors import (
    CannotReplay,  # noqa: F401
    ReplayError,
)
from graphtrain_inspect.inspector.read.capture_files import capture_dir
from graphtrain_inspect.inspector.read.graphmodel import GraphTables
from graphtrain_inspect.inspector.replay.load import (  # noqa: F401
    OP_LIBRARIES,
    Loaded,
    explain_load_error,
    import_op_libraries,
    load_blob,
    new_fake_mode,
)
from graphtrain_inspect.inspector.replay.plan import (
    Blob,
    Target,
    major_minor,
    op_namespaces,
    read_blob,
    torch_versions,
)
from graphtrain_inspect.inspector.replay.resolve import (  # noqa: F401
    PassFn,
    graph_or_gm,
    import_target,
    inductor_pass,
    named_pass,
    resolve_pass,
    user_fn,
)
from graphtrain_inspect.inspector.replay.world import World, destroy_fake_world, init_fake_world, rank_world  # noqa: F401

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.diff.node_diff import GraphDiff
    from graphtrain_inspect.inspector.read.capture_reader import Capture
    from graphtrain_inspect.inspector.read.capture_records import PassRecord


# ---------------------------------------------------------------------------------------------
# Running and comparing


@dataclass
class GraphView:
    """A live graph as a capture would record it: node tables, code, symbols, devices."""

    gid: str
    tables: GraphTables
    code: str
    symbols: dict[str, Any] | None
    devices: dict[str, Any] | None


def graph_view(
    gm: torch.fx.GraphModule, *, shape_env: Any = None, devices_like: dict | None = None, prefix: str = "r"
) -> GraphView:
    """Turn a live GraphModule into what the capture stores (capture.graph_tables), so the
    inspector's diffs and checks read it like a captured graph. `devices_like`: the captured
    device table whose own device / local rank this graph's table takes (the replay process
    itself computes on the CPU)."""
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes(), torch.no_grad():
        code = graph_tables.readable_code(gm)
        raw = graph_tables.node_tables(gm)
        tables_json = logformat.encode_node_table(raw)
        payload = orjson.loads(tables_json)  # exactly what a capture's reader sees
        env = shape_env if shape_env is not None else graph_tables.find_shape_env(gm)
        try:
            symbols = orjson.loads(orjson.dumps(graph_tables.symbol_map(gm, raw, env), option=orjson.OPT_NON_STR_KEYS))
        except Exception:  # noqa: BLE001
            symbols = None
        try:
            devices = orjson.loads(orjson.dumps(graph_tables.device_table(gm), option=orjson.OPT_NON_STR_KEYS))
            if devices_like:
                for k in ("own_device", "local_rank", "cuda_visible_devices"):
                    if k in devices_like:
                        devices[k] = devices_like[k]
        except Exception:  # noqa: BLE001
            devices = None
    gid = prefix + logformat.graph_id(code, tables_json)[1:]
    tables = GraphTables.from_payload(gid, payload, source="table")
    return GraphView(gid, tables, code, symbols, devices)


@dataclass
class Outcome:
    """One replay of the pass on one rank."""

    rank: int
    rec: "PassRecord"
    pass_fn: PassFn | None
    before: Loaded | None
    result: torch.fx.GraphModule | None = None
    view: GraphView | None = None  # the result as a capture would record it
    exception: BaseException | None = None
    exc_text: str | None = None
    run_s: float = 0.0
    world: World | None = None
    diff: "GraphDiff | None" = None  # captured after-graph vs the result
    verdict: str = "differs"  # reproduced | differs
    reason: str = ""  # one line
    renamed: int = 0  # aligned, equal nodes whose FX names differ

    @property
    def reproduced(self) -> bool:
        return self.verdict == "reproduced"


def run_pass(pf: PassFn, gm: torch.fx.GraphModule) -> Any:
    if pf.inductor is not None:
        from torch.fx.passes.graph_transform_observer import GraphTransformObserver

        obs = GraphTransformObserver(gm, pf.inductor[0], subsystem=pf.inductor[1])
        # As the capture did: a GraphModule returned by the pass is its output, else `gm`.
        return obs.apply_graph_pass(pf.fn) if pf.call == "graph" else obs.apply_gm_pass(pf.fn)
    if pf.call == "graph":
        return pf.fn(gm.graph)
    if pf.call == "gm_inputs":
        return pf.fn(gm, example_inputs(gm))
    return pf.fn(gm)


def example_inputs(gm: torch.fx.GraphModule) -> list[Any]:
    """The graph's inputs as the pass saw them in training: its placeholders' fake values."""
    out = []
    for n in gm.graph.find_nodes(op="placeholder"):
        out.append(n.meta.get("val", n.meta.get("example_value")))
    return out


def result_graph(result: Any, gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """What the capture takes as the pass's output: a returned GraphModule, else `gm` mutated."""
    if isinstance(result, torch.fx.GraphModule):
        return result
    if isinstance(result, (tuple, list)):
        for r in result:
            if isinstance(r, torch.fx.GraphModule):
                return r
    return gm


_CLASS_LINE = re.compile(r"^class \S+\(torch\.nn\.Module\):$")


def code_lines(code: str) -> list[str]:
    from graphtrain_inspect.inspector.diff.graph_diff import normalize_code

    lines = normalize_code(code)
    # The class line names the GraphModule's Python class (`<lambda>`, `GraphModuleImpl`): not the graph.
    return [l for l in lines if not _CLASS_LINE.match(l)]


def compare(cap: "Capture", rec: "PassRecord", out: Outcome, role: str = "out") -> None:
    """Fill in the verdict: the result against the captured after-graph, node by node."""
    from graphtrain_inspect.inspector.diff.graph_diff import diff_tables

    if rec.status != "ok" or not rec.after:
        cap_exc = (rec.exception or {}).get("type") or "an exception"
        if out.exception is not None:
            mine = f"{type(out.exception).__module__}.{type(out.exception).__qualname__}"
            same = cap_exc in (mine, type(out.exception).__name__) or cap_exc.endswith(
                "." + type(out.exception).__name__
            )
            out.verdict = "reproduced" if same else "differs"
            out.reason = (
                f"raised {type(out.exception).__name__} as in training"
                if same
                else f"raised {type(out.exception).__name__}; in training it raised {cap_exc}"
            )
        else:
            out.verdict = "differs"
            out.reason = f"finished; in training it raised {cap_exc}: {(rec.exception or {}).get('message', '')[:200]}"
        return
    if out.exception is not None:
        out.verdict = "differs"
        first = str(out.exception).splitlines()[0][:300] if str(out.exception) else ""
        out.reason = f"raised {type(out.exception).__name__}: {first}; in training it finished"
        return
    gid = rec.after.get(role) or next(iter(rec.after.values()))
    captured = cap.node_table(rec.rank, gid)
    if captured is None or out.view is None:
        out.verdict = "differs"
        out.reason = f"the captured after-graph {gid} has no readable node table"
        return
    d = diff_tables(captured, out.view.tables, a_label=f"captured {gid}", b_label="replayed")
    out.diff = d
    out.renamed = sum(
        1
        for sub in d.subgraphs
        for n in sub.nodes
        if n.status == "same" and n.a is not None and n.b is not None and n.a.get("name") != n.b.get("name")
    )
    paths_a = [g.path for g in captured.graphs]
    paths_b = [g.path for g in out.view.tables.graphs]
    if d.empty and paths_a == paths_b:
        out.verdict = "reproduced"
        n = out.view.tables.node_count
        out.reason = (
            f"the result matches the captured after-graph {gid} node for node ({n} nodes"
            + (f", {len(paths_b) - 1} nested subgraphs" if len(paths_b) > 1 else "")
            + ")"
        )
        if out.renamed:
            out.reason += f"; {out.renamed} nodes carry other FX names (name counters start afresh in a loaded graph)"
    else:
        c = d.counts
        out.verdict = "differs"
        out.reason = (
            f"the result differs from the captured after-graph {gid}: {c['added']} nodes added, "
            f"{c['removed']} removed, {c['changed']} changed"
        )


# ---------------------------------------------------------------------------------------------
# The replayer


class Replayer:
    """Everything a replay needs, loaded once: the capture, the target, the verified blobs."""

    def __init__(
        self,
        cap: "Capture",
        target: Target,
        *,
        trust: bool = False,
        fn: Any = None,
        setup: Sequence[str] = (),
        imports: Sequence[str] = (),
        log: Callable[[str], None] | None = None,
    ):
        self.cap = cap
        self.target = target
        self.trust = trust
        self.fn = fn
        self.setup = list(setup)
        self.imports = list(imports)
        self.log = log or (lambda s: None)
        self.captured_torch = torch_versions(cap, target.rank)
        self._blobs: dict[tuple[int, str], Blob] = {}
        self._imported: set[str] = set()
        self.notes: list[str] = []
        mm_cap, mm_here = major_minor(self.captured_torch), major_minor(torch.__version__)
        if mm_cap and mm_here and mm_cap != mm_here:
            self.notes.append(
                f"captured with torch {self.captured_torch}, replaying with torch {torch.__version__}: "
                "blobs and passes may not be compatible across torch versions"
            )

    @property
    def rank(self) -> int:
        return self.target.rank

    @property
    def rec(self) -> "PassRecord":
        return self.target.rec

    # -- loading --------------------------------------------------------------------------------

    def blob(self, rec: "PassRecord", gid: str | None, what: str) -> Blob:
        key = (rec.rank, gid or "")
        b = self._blobs.get(key)
        if b is None:
            b = self._blobs[key] = read_blob(self.cap, rec, gid, trust=self.trust, what=what)
        return b

    def prepare(self, rank: int, gid: str) -> None:
        ns = op_namespaces(self.cap, rank, gid)
        want = {n for n in ns if n not in self._imported}
        if want or (self.imports and not self._imported):
            for note in import_op_libraries(want, self.imports):
                if note not in self.notes:
                    self.notes.append(note)
            self._imported |= want | {"<extra>"}

    def load(self, rec: "PassRecord", gid: str | None, what: str = "before") -> Loaded:
        b = self.blob(rec, gid, what)
        self.prepare(rec.rank, gid or "")
        return load_blob(b, captured_torch=self.captured_torch)

    def load_before(self, rec: "PassRecord | None" = None) -> Loaded:
        rec = rec or self.rec
        return self.load(rec, rec.before, "before")

    def load_after(self, role: str = "out") -> Loaded:
        gid = self.rec.after.get(role) or next(iter(self.rec.after.values()), None)
        return self.load(self.rec, gid, "after")

    # -- running --------------------------------------------------------------------------------

    def run(self, fn: Any = None, rec: "PassRecord | None" = None, *, resolved: PassFn | None = None) -> Outcome:
        """Load a fresh copy of the before-graph of `rec` (default: the target) and run the pass
        on it in the captured rank's world. Raises ReplayError/Refused when it cannot be loaded."""
        rec = rec or self.rec
        loaded = self.load_before(rec)
        gm = loaded.gm
        use_fn = fn if fn is not None else self.fn
        out = Outcome(rec.rank, rec, None, loaded)
        inductor = rec.source == "inductor"
        with rank_world(self.cap, rec.rank, loaded.fake_mode, inductor=inductor, setup=self.setup) as world:
            out.world = world
            try:
                pf = resolved or resolve_pass(rec, self.target.target, gm, use_fn, capture_dir(self.cap))
            except ReplayError:
                raise
            except Exception as e:
                raise ReplayError(f"cannot prepare #{rec.seq} {rec.name} to run: {type(e).__name__}: {e}") from e
            out.pass_fn = pf
            t0 = time.perf_counter()
            try:
                res = run_pass(pf, gm)
                out.result = result_graph(res, gm)
            except Exception as e:  # noqa: BLE001 - the pass's own exception is a result
                out.exception = e
                out.exc_text = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])
            out.run_s = time.perf_counter() - t0
            if out.result is not None:
                try:
                    out.view = graph_view(
                        out.result,
                        shape_env=loaded.shape_env,
                        devices_like=self.cap.devices(rec.rank, rec.before) if rec.before else None,
                    )
                except Exception as e:  # noqa: BLE001
                    out.exception = e
                    out.exc_text = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])
                    out.result = None
        compare(self.cap, rec, out)
        return out

    def run_peers(self, fn: Any = None, ranks: list[int] | None = None) -> dict[int, Outcome]:
        """The same pass application replayed on other ranks (each in its own world)."""
        from graphtrain_inspect.inspector.replay.plan import peers

        outs: dict[int, Outcome] = {}
        for r, rec in sorted(peers(self.cap, self.target).items()):
            if ranks is not None and r not in ranks:
                continue
            outs[r] = self.run(fn, rec)
        return outs


# ---------------------------------------------------------------------------------------------
# Checks on the result


@dataclass
class CheckDelta:
    """Findings of the checks with the replayed outputs in place, against the captured ones."""

    new: list[Any]  # present in the pass's output after the replay, not in the capture
    gone: list[Any]  # present in the captured output, not after the replay
    kept: list[Any]  # present in both
    replaced: list[int]  # ranks whose output is the replayed one
    not_run: list[Any]
    notes: list[str]


def check_delta(
    cap: "Capture", target: Target, outcomes: dict[int, Outcome], peer_recs: dict[int, "PassRecord"] | None = None
) -> CheckDelta:
    """Run every check on the capture cut after the pass, once as captured and once with the
    replayed results in place (ranks whose replay raised keep their captured output)."""
    from graphtrain_inspect.inspector.checks import check_report
    from graphtrain_inspect.inspector.replay.view import ReplayView, captured_view, compare_findings, cut_points

    if peer_recs is None:
        from graphtrain_inspect.inspector.replay.plan import peers

        peer_recs = peers(cap, target)
    cuts = cut_points(cap, target.rank, target.rec, peer_recs)
    notes = []
    replaced: dict[int, dict[str, GraphView]] = {}
    for r, out in sorted(outcomes.items()):
        if out.view is None:
            notes.append(f"rank {r}: the replay raised, its captured output is kept for the checks")
            continue
        role = next(iter(out.rec.after), "out")
        replaced[r] = {role: out.view}
    before = check_report(captured_view(cap, cuts))  # type: ignore[arg-type]  # a view that reads like a Capture (duck-typed)
    after = check_report(ReplayView(cap, cuts, replaced))  # type: ignore[arg-type]  # a view that reads like a Capture (duck-typed)
    seqs = {target.rec.seq, *(p.seq for p in peer_recs.values())}
    new, gone, kept = compare_findings(before.findings, after.findings, seqs)
    return CheckDelta(new, gone, kept, sorted(replaced), after.not_run, notes + list(after.notes))
