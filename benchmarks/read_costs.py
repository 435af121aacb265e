"""Two reads of a large capture timed in process, each against the way it was read before (kept
here as the reference), and the package's import with and without its bytecode.

    python -m benchmarks.read_costs CAPTURE [--rank 0] [--repeat 5] [--bytecode]

* the row-target scan (`RowDigests.rows_by_target`'s regex) over the largest subgraph of the
  largest table with row digests: the module's pattern against the alternation it replaced
  (`(?:[^"\\\\\\n]|\\\\.)*`), which must find the same targets;
* a graph's code payload: `LogFile.payload` (tabs deleted in one pass, checked by the md5) against
  the line-by-line read (`logformat.decode_payload` of the split lines), the same text;
* torch's own logs beside the capture (`DIR/torch_trace/`, where it has them): a `LogFile` scan
  of each, its bulk records skimmed (`logformat.SKIMMED_KINDS`), against every envelope decoded
  at the scan (the set emptied), which must find the same records and envelopes;
* with `--bytecode`: `check CAPTURE --json -j 1` in a fresh process, the package copied without
  its `__pycache__` and PYTHONDONTWRITEBYTECODE set (each process compiles it) against this
  checkout with its bytecode written.

Prints the best of `--repeat` runs of each, in seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.scale_bench import compiled
from graphtrain_inspect.capture.shared import logformat
from graphtrain_inspect.inspector.read import row_digests
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.logscan import LogFile

ROOT = Path(__file__).resolve().parents[1]
_OLD_STR = rb'"(?:[^"\\\n]|\\.)*"'
_OLD_TARGET = re.compile(rb'\n\t\{"name":' + _OLD_STR + rb',"op":' + _OLD_STR + rb',"target":"((?:[^"\\\n]|\\.)*)"')


def best(fn, repeat: int) -> tuple[float, object]:
    times, value = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t)
    return min(times), value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", type=Path)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--bytecode", action="store_true")
    args = ap.parse_args()
    cap = open_capture(str(args.capture))
    res: dict = {"capture": str(args.capture)}
    gids = sorted(cap.graphs(args.rank), key=lambda g: cap.node_count(args.rank, g) or 0)
    gid = next(g for g in reversed(gids) if cap.row_digests(args.rank, g) is not None)
    d = cap.row_digests(args.rank, gid)
    k = max(range(len(d.counts)), key=d.counts.__getitem__)
    first, n = d._line0[k], d.counts[k]
    lo, hi = d._starts[first] - 2, d._starts[first + n - 1] + d._lens[first + n - 1]
    new_s, new = best(lambda: row_digests._ROW_TARGET.findall(d._buf, lo, hi), args.repeat)
    old_s, old = best(lambda: _OLD_TARGET.findall(d._buf, lo, hi), args.repeat)
    assert new == old and len(new) == n, "the two patterns read other targets"
    res["target_scan"] = {"rows": n, "s": round(new_s, 4), "before_s": round(old_s, 4)}

    log = cap.log_file(args.rank)
    rec = cap.graph(args.rank, gid).records[logformat.GRAPH_CODE]

    def fast():
        log._cache.clear()
        return log.payload(rec)

    fast_s, text = best(fast, args.repeat)
    line_s, text2 = best(lambda: logformat.decode_payload(log.raw_payload(rec).split(b"\n"), rec.env), args.repeat)
    assert text == text2, "the two reads give other code"
    res["graph_code"] = {"nodes": cap.node_count(args.rank, gid), "s": round(fast_s, 4), "before_s": round(line_s, 4)}

    torch_dir = args.capture / "torch_trace"
    if torch_dir.is_dir():
        res["torch_logs"] = [_torch_log(path, args.repeat) for path in sorted(torch_dir.glob("*.log"))]

    if args.bytecode:
        cli = [sys.executable, "-m", "graphtrain_inspect.inspector.cli"]
        cmd = [*cli, "check", str(args.capture), "--json", "-j", "1"]
        work = Path(tempfile.mkdtemp(prefix="gti-nopyc-"))
        pkg = work / "graphtrain_inspect"
        pkg.mkdir()
        (pkg / "__init__.py").touch()
        for name in ("capture", "inspector", "tui", "samples"):
            shutil.copytree(ROOT / name, pkg / name, ignore=shutil.ignore_patterns("__pycache__"))
        compiled(ROOT)
        with_pyc = dict(os.environ)  # this checkout, as installed, its bytecode written just above
        bare = {**with_pyc, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(work)}

        def run(e):
            return lambda: subprocess.run(cmd, env=e, capture_output=True, check=False)

        res["check_process"] = {"with_bytecode_s": round(best(run(with_pyc), args.repeat)[0], 3),
                                "without_bytecode_s": round(best(run(bare), args.repeat)[0], 3)}  # fmt: skip
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(res, indent=1))


def _torch_log(path: Path, repeat: int) -> dict:
    def scan():
        log = LogFile(str(path))
        log.close()
        return log

    skim_s, log = best(scan, repeat)
    skimmed = logformat.SKIMMED_KINDS
    logformat.SKIMMED_KINDS = frozenset()
    try:
        whole_s, whole = best(scan, repeat)
    finally:
        logformat.SKIMMED_KINDS = skimmed
    # every envelope decoded now (after the timing): the same records as the whole decode's
    view = [(r.kind, r.offset, r.end, r.env) for r in log.records]
    assert view == [(r.kind, r.offset, r.end, r.env) for r in whole.records], f"{path}: other records"
    n = sum(r.kind in skimmed for r in log.records)
    return {"log": path.name, "records": len(view), "skimmed": n, "s": round(skim_s, 4), "before_s": round(whole_s, 4)}


if __name__ == "__main__":
    main()
