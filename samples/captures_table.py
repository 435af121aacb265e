"""Print the table of bundled captures for samples/README.md, from the captures themselves.

    python -m graphtrain_inspect.samples.captures_table

Each row: the capture, the command that recorded it (from its manifest), hardware, torch
version, date, and what `graphtrain-inspect check` finds (errors and warnings by kind and blamed
pass; info findings counted), and what `check --shared-graph` adds.
"""

from __future__ import annotations

import re
import time
from collections import Counter

import orjson

from graphtrain_inspect.inspector.checks import run_checks
from graphtrain_inspect.inspector.read import bundled
from graphtrain_inspect.inspector.read.capture_index import open_capture


def _by(introduced_by: str | None) -> str:
    """Where a finding comes from: the pass that introduced it, or the run itself (training-failed)."""
    return f"introduced by {introduced_by}" if introduced_by else "the run itself"


def row(name: str) -> str:
    path = bundled.path_of(name)
    manifest = orjson.loads((path / "manifest.json").read_bytes())
    cmd = manifest["command_line"].replace("python3 -m torch.distributed.run", "torchrun")
    cmd = re.sub(r" --losses-json \S+", "", cmd)  # the recording script's own bookkeeping
    cmd = cmd.replace(" -m samples.", " -m graphtrain_inspect.samples.")  # recorded before the package namespace
    n = int(re.search(r"--nproc-per-node[ =](\d+)", cmd).group(1))
    cap = open_capture(str(path))
    findings = run_checks(cap)
    serious = Counter((f.kind, f.severity, f.introduced_by) for f in findings if f.severity in ("error", "warning"))
    info = sum(1 for f in findings if f.severity == "info")
    found = (
        "; ".join(f"{c} {sev} {kind} ({_by(by)})" for (kind, sev, by), c in sorted(serious.items(), key=str))
        or "no errors or warnings"
    )
    found += f"; {info} info"
    # what `check --shared-graph` adds (the graph to be loaded by every rank: own-device literals)
    shared = Counter(
        (f.kind, f.severity, f.introduced_by)
        for f in run_checks(cap, shared_graph=True)
        if f.severity in ("error", "warning")
    )
    extra = shared - serious
    if extra:
        found += "; with `--shared-graph` " + "; ".join(
            f"{c} {sev} {kind} ({_by(by)})" for (kind, sev, by), c in sorted(extra.items(), key=str)
        )
    date = time.strftime("%Y-%m-%d", time.gmtime(manifest["started"]))
    return (
        f"| `{name}` | `graphtrain-inspect capture{capture_options(manifest)} -- {cmd}` | {n} × H200, NCCL | "
        f"{manifest['torch_version']} | {date} | {found} |"
    )


def capture_options(manifest: dict) -> str:
    """The capture's own options as its manifest records them (the first captures, recorded before
    the manifest kept them, all ran the sample's pipeline without Inductor)."""
    opts = manifest.get("options")
    if opts is None:
        return " --pass graphtrain_inspect.samples.pipeline:PIPELINE --no-inductor"
    passes = [
        p.replace("samples.", "graphtrain_inspect.samples.", 1) if p.startswith("samples.") else p
        for p in opts.get("passes") or []
    ]
    return (
        "".join(f" --pass {p}" for p in passes)
        + ("" if opts.get("inductor", True) else " --no-inductor")
        + ("" if opts.get("blobs", True) else " --no-blobs")
    )


def main() -> None:
    print("| capture | command | hardware | torch | date | `check` finds |")
    print("|---|---|---|---|---|---|")
    for name in bundled.names():
        print(row(name))


if __name__ == "__main__":
    main()
