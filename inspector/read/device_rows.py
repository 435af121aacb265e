"""Per-rank device tables of one graph state as rows, mismatches marked.

    rows = device_rows({rank: (devices_table, local_rank, header)})

One row per rank (its own device, local rank, visible devices) followed by that rank's device
literals and constants/parameters/buffers. A row is marked when its device is not the rank's own
(another index of the same device type, or an accelerator on a host-only rank, as `check` rules
it), or when the same literal holds a different device on another rank, the rank's own device
included (baked per rank: right here, wrong in a graph compiled on one rank and loaded by the
others, as `check` warns). No textual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphtrain_inspect.inspector.read.graphmodel import split_device

_HOST = ("cpu", "meta")


@dataclass
class DeviceRow:
    rank: int
    kind: str  # rank | literal | input | parameter | buffer | constant
    node: str | None
    subgraph: str | None
    where: str | None
    device: str | None
    detail: str
    mismatch: str | None = None


def foreign(dev: str | None, own: str | None) -> str | None:
    """Why `dev` is wrong on a rank that computes on `own`, or None."""
    typ, idx = split_device(dev)
    own_typ, own_idx = split_device(own)
    if typ is None or own is None:
        return None
    if own_idx is not None and typ == own_typ and idx is not None and idx != own_idx:
        return f"not this rank's device {own}"
    if own_typ in _HOST and typ not in _HOST:
        return f"accelerator on a rank computing on {own}"
    return None


def _norm(dev: str | None, own: str | None) -> str | None:
    return "<own>" if dev is not None and own is not None and dev == own else dev


def device_rows(
    per_rank: dict[int, tuple[dict[str, Any] | None, int | None, dict[str, Any] | None]],
) -> list[DeviceRow]:
    """`per_rank`: rank -> (gti_devices table of the graph, local rank, log header)."""
    # literal sites across ranks: (graph, node, where) -> {rank: normalized device}
    sites: dict[tuple, dict[int, tuple[str | None, str | None]]] = {}
    for r, (dev, _, _) in per_rank.items():
        if not isinstance(dev, dict):
            continue
        own = dev.get("own_device")
        for lit in dev.get("literals") or []:
            d = lit.get("device")
            sites.setdefault((lit.get("graph") or "", lit.get("node"), lit.get("where")), {})[r] = (d, _norm(d, own))
    rows: list[DeviceRow] = []
    for r in sorted(per_rank):
        dev, local, header = per_rank[r]
        dev = dev if isinstance(dev, dict) else {}
        own = dev.get("own_device")
        visible = dev.get("cuda_visible_devices") or (header or {}).get("cuda_visible_devices")
        local = dev.get("local_rank") if isinstance(dev.get("local_rank"), int) else local
        detail = f"local rank {local}" if local is not None else "local rank ?"
        if visible:
            detail += f", CUDA_VISIBLE_DEVICES={visible}"
        if host := (header or {}).get("host"):
            detail += f", host {host}"
        mismatch = None
        typ, idx = split_device(own)
        if idx is not None and local is not None and not visible and idx != local:
            mismatch = f"own device index {idx} is not the local rank {local}"
        rows.append(DeviceRow(r, "rank", None, None, None, own, detail, mismatch))
        for lit in dev.get("literals") or []:
            d = lit.get("device")
            why = foreign(d, own)
            if why is None:
                across = sites.get((lit.get("graph") or "", lit.get("node"), lit.get("where")), {})
                raw = ", ".join(f"r{k}={v[0]}" for k, v in sorted(across.items()))
                if len({v[1] for v in across.values()}) > 1:
                    why = "differs across ranks: " + raw
                elif len({v[0] for v in across.values()}) > 1:
                    why = "each rank's own device, baked per rank: " + raw
            rows.append(
                DeviceRow(
                    r,
                    "literal",
                    lit.get("node"),
                    lit.get("graph") or None,
                    lit.get("where"),
                    d,
                    str(lit.get("target") or ""),
                    why,
                )
            )
        for val in dev.get("values") or []:
            d = val.get("device")
            kind = str(val.get("kind") or "value")
            shape = val.get("shape")
            detail = " ".join(
                str(x) for x in (val.get("dtype"), list(shape) if isinstance(shape, list) else None) if x is not None
            )
            why = None if kind == "input" else foreign(d, own)
            rows.append(DeviceRow(r, kind, val.get("node"), val.get("graph") or None, None, d, detail, why))
    return rows
