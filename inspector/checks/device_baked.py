"""device-baked: a device baked into a graph that some rank cannot or should not use.

The policy (docs/inspector.md, `check --help`):

- A device literal (a `device=` kwarg, a device inside a list argument, a "cuda:1" string) or a
  constant, buffer or parameter reached by get_attr that names another rank's device (an index
  that is not the rank's own device, from the capture's device table; for text-only graphs,
  inferred from the inputs' devices), or an accelerator on a rank that computes on the CPU: an
  error in the graph that runs, a warning when a later pass removed it (e.g. a device-placement
  pass rewriting `cuda:1` to `cuda`): the model code still has the bug.
- A literal equal to each rank's own device (`cuda:0` on rank 0, `cuda:1` on rank 1: what
  make_fx and torch.compile record on GPUs): right for a graph each rank compiles for itself,
  info. In a shared graph (compiled on one rank and loaded by the others) it is the compiling
  rank's device, wrong on every other rank: an error (info when a later pass removed it: tracing
  records the own device, and a placement pass removing it is the fix).
  A graph is shared when the capture shows compile on one rank (rank_baked_constant.compile_on_one_rank)
  or the user says so (`check --shared-graph`).
- Across ranks: device literals that differ between ranks at aligned nodes of otherwise
  comparable graphs (e.g. `device(type='cpu', index=LOCAL_RANK)`) and are not each rank's own
  device: the graph is only right on the rank that traced it (an error when the index is a
  rank-derived value, else a warning).
"""

from __future__ import annotations

from typing import Any

from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.capture.shared.rank_ranges import values_by_rank
from graphtrain_inspect.inspector.checks.context import CheckContext, Observation
from graphtrain_inspect.inspector.checks.differing_literals import cross_rank_evidence, literal_sites
from graphtrain_inspect.inspector.checks.findings import Finding
from graphtrain_inspect.inspector.checks.rank_baked_constant import compile_on_one_rank, match_vectors
from graphtrain_inspect.inspector.read.graphmodel import device_of_leaf, split_device

KIND = "device-baked"
DESCRIPTION = (
    "device literals, constants or buffers on another rank's device, or device literals that differ across ranks"
)

_HOST = ("cpu", "meta")


def _foreign(dev: str | None, own: str | None) -> str | None:
    """Why `dev` is wrong for a rank computing on `own`, or None."""
    typ, idx = split_device(dev)
    own_typ, own_idx = split_device(own)
    if typ is None:
        return None
    if own_idx is not None and typ == own_typ and idx is not None and idx != own_idx:
        return f"is not this rank's device {own}"
    if own_typ in _HOST and typ not in _HOST and own is not None:
        return f"is an accelerator on a rank that computes on {own}"
    return None


def per_graph(devices: dict[str, Any], own: str | None, *, shared: bool) -> list[Observation]:
    out: list[Observation] = []
    own = devices.get("own_device") or own
    for lit in devices.get("literals") or []:
        dev = lit.get("device")
        why = _foreign(dev, own)
        # another rank's device or an accelerator on a CPU rank is in the model code (a warning
        # even when a pass removes it); the own device in a shared graph is what tracing records
        # (make_fx), fine once a pass removes it
        fixed = "warning" if why is not None else None
        if why is None and shared and split_device(dev)[1] is not None:
            why = "pins the compiling rank's device in a graph every rank loads"
        if why is None:
            continue
        sev = "error"
        msg = f"device literal {dev} in {lit.get('target')} {lit.get('where')} {why}"
        ev = {
            "device": dev,
            "own_device": own,
            "where": lit.get("where"),
            "target": lit.get("target"),
            "source": "literal",
        }
        key: tuple[Any, ...] = ("literal", lit.get("graph") or "", lit.get("target"), lit.get("where"), dev)
        out.append(
            Observation(
                key,
                sev,
                msg,
                node=lit.get("node"),
                subgraph=lit.get("graph") or None,
                evidence=ev,
                loose_key=("literal", dev),
                severity_if_fixed=fixed,
            )
        )
    for val in devices.get("values") or []:
        kind = val.get("kind")
        if kind == "input":
            continue
        dev = val.get("device")
        why = _foreign(dev, own)
        fixed = "warning" if why is not None else None
        if why is None and shared and split_device(dev)[1] is not None and split_device(dev)[0] not in _HOST:
            why = "pins the compiling rank's device in a graph every rank loads"
        if why is None:
            continue
        sev = "error"
        msg = f"{kind} {val.get('node')} ({val.get('dtype')}{val.get('shape')}) lives on {dev}, which {why}"
        ev = {
            "device": dev,
            "own_device": own,
            "kind": kind,
            "dtype": val.get("dtype"),
            "shape": val.get("shape"),
            "source": kind,
        }
        if "value" in val:
            ev["value"] = val["value"]
        key = ("value", val.get("graph") or "", kind, dev, val.get("dtype"), repr(val.get("shape")))
        out.append(
            Observation(
                key,
                sev,
                msg,
                node=val.get("node"),
                subgraph=val.get("graph") or None,
                evidence=ev,
                severity_if_fixed=fixed,
            )
        )
    return out


def _observe_across(ctx: CheckContext, key, group: list[int]) -> list[Observation]:
    out = []
    stages = ctx.index.across(key)
    vectors = ctx.vectors()
    for s in literal_sites(ctx, key, group):
        if not s.is_device:
            continue
        devs = {r: device_of_leaf(v) for r, v in s.values.items()}
        if len(set(devs.values())) < 2:
            continue
        # a rank whose literal is foreign to it is reported by the per-rank check
        if any(_foreign(d, ctx.cap.own_device(r, stages[r].gid)) for r, d in devs.items() if r in stages):
            continue
        idx = {r: split_device(d)[1] for r, d in devs.items()}
        matches = (
            match_vectors({r: i for r, i in idx.items() if i is not None}, vectors)
            if all(i is not None for i in idx.values())
            else []
        )
        vals = values_by_rank(devs, str)
        if matches:
            msg = (
                f"device literal in {s.target} {s.where} differs across ranks ({vals}): the index is the "
                f"{matches[0]['vector']}"
            )
            sev = "error"
        else:
            msg = f"device literal in {s.target} {s.where} differs across ranks ({vals})"
            sev = "warning"
        ev = cross_rank_evidence(s.where, s.target, devs, s.nodes, matches, source="cross-rank")
        vals_key = tuple(devs[r] for r in sorted(devs))
        out.append(
            Observation(
                ("across", s.subgraph, s.target, s.where, vals_key),
                sev,
                msg,
                node=s.node,
                subgraph=s.subgraph or None,
                evidence=ev,
                loose_key=("across", vals_key),
                severity_if_fixed="warning",
            )
        )
    return out


def _observe_own(ctx: CheckContext, key, group: list[int]) -> list[Observation]:
    """Accelerator device literals that are each rank's own device (cuda:0 on rank 0, cuda:1 on
    rank 1, at the same place): right for a per-rank compile (info), wrong for a graph compiled
    once and loaded everywhere (with `--shared-graph` the per-rank check reports each as an
    error). Normalization hides them from the literal comparison, so look at them here."""
    stages = ctx.index.across(key)
    present = [r for r in group if r in stages]
    if len(present) < 2:
        return []
    per_rank: dict[int, dict[tuple, dict]] = {}
    for r in present:
        table = ctx.cap.devices(r, stages[r].gid) or {}
        own = table.get("own_device") or ctx.cap.own_device(r, stages[r].gid)
        typ, idx = split_device(own)
        if idx is None or typ in _HOST:
            return []
        seen: dict[tuple, int] = {}
        mine: dict[tuple, dict] = {}
        for lit in table.get("literals") or []:
            if lit.get("device") != own:
                continue
            base = (lit.get("graph") or "", lit.get("target"), lit.get("where"))
            n = seen.get(base, 0)
            seen[base] = n + 1
            mine[base + (n,)] = lit
        per_rank[r] = mine
    common = set.intersection(*(set(m) for m in per_rank.values()))
    vectors = ctx.vectors()
    out = []
    for k in sorted(common, key=repr):
        devs = {r: per_rank[r][k]["device"] for r in present}
        if len(set(devs.values())) < 2:
            continue
        indices = {r: split_device(d)[1] for r, d in devs.items()}
        matches = match_vectors(indices, vectors)
        lit = per_rank[present[0]][k]
        vals = ", ".join(f"rank {r}: {devs[r]}" for r in present)
        msg = (
            f"device literal in {lit.get('target')} {lit.get('where')} is each rank's own device ({vals}): "
            "right for a graph each rank compiles for itself, wrong if one rank's graph is loaded by the "
            "others (check --shared-graph)"
        )
        ev = cross_rank_evidence(
            lit.get("where"),
            lit.get("target"),
            devs,
            {r: per_rank[r][k].get("node") for r in present},
            matches,
            source="own-device",
        )
        out.append(
            Observation(
                ("own", *k[:3], tuple(devs[r] for r in present)),
                "info",
                msg,
                node=lit.get("node"),
                subgraph=k[0] or None,
                evidence=ev,
                loose_key=("own", tuple(devs[r] for r in present)),
            )
        )
    return out


def run(ctx: CheckContext) -> list:
    coor, compiling = compile_on_one_rank(ctx)
    cache: dict[tuple, list[Observation]] = {}
    unknown_own: set[int] = set()

    def observe(stage):
        own = ctx.cap.own_device(stage.rank, stage.gid)
        if own is None:
            unknown_own.add(stage.rank)
        shared = ctx.shared_graph or (coor and stage.rank in compiling and (ctx.cap.world_size or 1) > 1)
        k = (ctx.content_key(stage.rank, stage.gid, logformat.DEVICES), own, shared)
        if k not in cache:
            devices = ctx.cap.devices(stage.rank, stage.gid)
            cache[k] = per_graph(devices, own, shared=shared) if devices else []
        return cache[k]

    findings = ctx.blame_per_rank(KIND, observe)
    if unknown_own:
        ctx.skip(
            f"{KIND} (own device)",
            f"rank(s) {sorted(unknown_own)}: own device unknown (no device table, no inputs with a device)",
        )
    if ctx.compared_groups():
        own = (lambda key, group: []) if ctx.shared_graph else (lambda key, group: _observe_own(ctx, key, group))
        findings.extend(ctx.blame_across(KIND, lambda key, group: _observe_across(ctx, key, group) + own(key, group)))
    else:
        ctx.skip(f"{KIND} (across ranks)", "needs graphs of at least two ranks to compare")
    return findings


def evidence_lines(f: Finding) -> list[str]:
    """The finding's evidence as lines of text (`check`, `report`, the TUI and SARIF show them)."""
    if f.layer == "codegen":
        from graphtrain_inspect.inspector.checks.codegen_sites import code_evidence_lines

        return code_evidence_lines(f)
    ev = f.evidence or {}
    if ev.get("values"):
        return [values_by_rank(ev["values"], str, prefix="r", sep="=")]
    return [f"{ev.get('device')} (own device {ev.get('own_device')})"]
