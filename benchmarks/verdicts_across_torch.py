"""The verdict of plain `check` on every program under tests/programs/, as one torch sees it.

    python -m benchmarks.verdicts_across_torch OUT.json [NAME ...]        # capture and check each
    python -m benchmarks.verdicts_across_torch --compare A.json B.json    # what differs, exit 1 if any

Each program is captured as the suite captures it (2 gloo CPU ranks, the suite's options) with the
Python that runs this script, so running it once from an environment with torch 2.13 and once from
one with torch 2.14.1 (or 2.11 on a GPU host) gives two files whose verdicts must agree: the same
findings by kind, severity, layer, blamed pass and node. `--compare` prints the programs whose
verdicts differ and the findings on each side.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.timing import GTI, ROOT, timed

_VOCAB_PASSES = [
    "--pass",
    "tests.programs.precompile_load_passes:COMPILE_TIME",
    "--pass",
    "tests.programs.precompile_load_passes:LOAD_TIME",
]
# name: (capture options, program command after `torchrun --nproc-per-node N -m`, N), as the tests
# run them; N 0: one process, `python -m`
PROGRAMS: dict[str, tuple[list[str], list[str], int]] = {
    "fsdp2-clean": (["--torch-trace"], ["tests.programs.fsdp2_compile", "--steps", "3"], 2),
    "fsdp2-planted": (["--torch-trace"], ["tests.programs.fsdp2_compile", "--steps", "3", "--plant-rank-literal"], 2),
    "rank-recompile-divergent": (["--torch-trace"], ["tests.programs.rank_recompile", "--divergent"], 2),
    "rank-recompile-twin": (["--torch-trace"], ["tests.programs.rank_recompile"], 2),
    "rank-literal-compile": (["--torch-trace"], ["tests.programs.rank_literal_compile"], 2),
    "backward-literal-compile": ([], ["tests.programs.backward_literal_compile"], 2),
    "precompile-load": (
        ["--pass", "tests.programs.precompile_load_passes:COMPILE_TIME"],
        ["tests.programs.precompile_load"],
        2,
    ),
    "precompile-load-planted": (
        ["--pass", "tests.programs.precompile_load_passes:COMPILE_TIME"],
        ["tests.programs.precompile_load", "--plant"],
        2,
    ),
    "graph-trainer-own-pipeline": ([], ["tests.programs.graph_trainer_own_pipeline"], 2),
    "inspector-planted": (
        ["--pass", "tests.programs.inspector_planted_passes:PASSES", "--no-inductor", "--no-blobs", "--torch-trace"],
        ["tests.programs.inspector_planted"],
        2,
    ),
    "cond-branch-strides": ([], ["tests.programs.cond_branch_strides"], 0),
    "cond-branch-strides-fixed": ([], ["tests.programs.cond_branch_strides", "--fixed"], 0),
    "dynamic-recompile": ([], ["tests.programs.dynamic_recompile"], 2),
    "partitioner-recompute": ([], ["tests.programs.partitioner_recompute"], 2),
    "partitioner-recompute-sync": ([], ["tests.programs.partitioner_recompute", "--fix", "sync"], 2),
    "partitioner-recompute-no-collective": (
        [],
        ["tests.programs.partitioner_recompute", "--fix", "no-collective-recompute"],
        2,
    ),
    "cache-rank-offset": ([], ["tests.programs.cache_rank_offset"], 2),
    "cache-rank-offset-fixed": ([], ["tests.programs.cache_rank_offset", "--fixed"], 2),
    "train-failure-early": (["--no-inductor"], ["tests.programs.train_failure", "--raise-early", "1"], 2),
    "train-failure-fx": (["--no-inductor"], ["tests.programs.train_failure", "--fx-index", "1"], 2),
    "train-failure-compiled": ([], ["tests.programs.train_failure", "--compiled-index", "1"], 2),
    "train-failure-twin": (["--no-inductor"], ["tests.programs.train_failure"], 2),
    "uneven-shards": (["--pass", "tests.programs.uneven_shards_passes:PIPELINE"], ["tests.programs.uneven_shards"], 2),
    "uneven-shards-rewrite": (
        ["--pass", "tests.programs.uneven_shards_passes:PIPELINE"],
        ["tests.programs.uneven_shards", "--rewrite"],
        2,
    ),
    "uneven-shards-plant": (
        ["--pass", "tests.programs.uneven_shards_passes:PIPELINE"],
        ["tests.programs.uneven_shards", "--plant"],
        2,
    ),
    "vocab-parallel": (_VOCAB_PASSES, ["tests.programs.vocab_parallel"], 2),
    "vocab-parallel-fixed": (_VOCAB_PASSES, ["tests.programs.vocab_parallel", "--fixed"], 2),
    "rank-reorder": (["--pass", "tests.programs.rank_reorder_passes:PIPELINE"], ["tests.programs.rank_reorder"], 2),
    "rank-reorder-clean": (
        ["--pass", "tests.programs.rank_reorder_passes:PIPELINE"],
        ["tests.programs.rank_reorder"],
        2,
    ),
    "pipeline-stages": (
        ["--pass", "tests.programs.pipeline_stages_passes:PIPELINE"],
        ["tests.programs.pipeline_stages"],
        4,
    ),
}
# programs whose twin is chosen by the environment its passes read
PROGRAM_ENV: dict[str, dict[str, str]] = {"rank-reorder-clean": {"GTI_REORDER_CLEAN": "1"}}


def _finding_key(f: dict) -> tuple:
    # what must agree across torch versions: the kind, its grade, its layer and the pass blamed.
    # Not the last pass that still has it (torch adds and renames its own passes between
    # versions), nor node names (torch's own ops decompose into other nodes)
    return tuple(str(f.get(k)) for k in ("kind", "severity", "layer", "introduced_by"))


def _graded(v: dict) -> list:
    return [f for f in v["findings"] if f[1] != "info"]


def verdict(name: str, work: Path) -> dict:
    options, program, nproc = PROGRAMS[name]
    out = work / name
    # this checkout first (the programs import as tests.programs.*), then what the caller set
    path = [str(ROOT), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCHINDUCTOR_COMPILE_THREADS="1", PYTHONPATH=os.pathsep.join(path))
    env.update(PROGRAM_ENV.get(name, {}))
    cmd = [*GTI, "capture", "--out", str(out), *options, "--"]
    if nproc:
        cmd += [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
    cmd += ["-m", *program] if nproc else [sys.executable, "-m", *program]
    with tempfile.TemporaryFile() as cap_err, tempfile.TemporaryFile() as chk_err:
        cap = timed(cmd, env=env, stderr=cap_err)
        chk = timed([*GTI, "check", str(out), "--json"], env=env, stderr=chk_err)
        cap_err.seek(0)
        chk_err.seek(0)
        cap_tail = cap_err.read().decode(errors="replace")[-800:] if cap["rc"] else ""
        chk_tail = chk_err.read().decode(errors="replace")[-400:]
    try:
        findings = json.loads(chk["out"])["findings"]
    except ValueError:
        findings = []
    return {
        "capture_exit": cap["rc"],
        "capture_s": round(cap["s"], 1),
        "check_exit": chk["rc"],
        "findings": sorted(list(_finding_key(f)) for f in findings),
        "stderr_tail": cap_tail + chk_tail,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", help="where to write this torch's verdicts (JSON)")
    ap.add_argument("names", nargs="*", help=f"programs (default all): {', '.join(PROGRAMS)}")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="programs captured at once (a host with cores to spare)")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), help="two verdict files to compare")
    args = ap.parse_args()
    if args.compare:
        a, b = (json.loads(Path(p).read_text()) for p in args.compare)
        print(f"A: torch {a['torch']}  B: torch {b['torch']}")
        differ = 0
        for name in sorted(set(a["programs"]) | set(b["programs"])):
            va, vb = a["programs"].get(name), b["programs"].get(name)
            both = va is not None and vb is not None
            same = both and (va["check_exit"], va["findings"]) == (vb["check_exit"], vb["findings"])
            # the verdict: the exit status, the errors and the warnings (info may differ where one
            # torch folds or decomposes what the other keeps)
            verdict_same = both and (va["check_exit"], _graded(va)) == (vb["check_exit"], _graded(vb))
            print(f"{'same' if same else 'same verdict, info differs' if verdict_same else 'DIFFERS'}: {name}")
            if not verdict_same:
                differ += 1
            if not same:
                for side, v in (("A", va), ("B", vb)):
                    if v is None:
                        print(f"    {side}: not run")
                        continue
                    print(f"    {side}: check exit {v['check_exit']}")
                    for f in v["findings"]:
                        print(f"    {side}:   {' '.join(str(x) for x in f)}")
        print(f"{differ} of {len(set(a['programs']) | set(b['programs']))} programs differ in their verdict")
        return 1 if differ else 0
    if not args.out:
        ap.error("give OUT.json, or --compare A B")
    import torch

    names = args.names or list(PROGRAMS)
    doc = {"torch": torch.__version__, "python": sys.version.split()[0], "programs": {}}
    with tempfile.TemporaryDirectory(prefix="gti-verdicts-") as work, ThreadPoolExecutor(args.jobs) as pool:
        done = pool.map(lambda name: (name, verdict(name, Path(work))), names)
        for name, v in done:
            doc["programs"][name] = v
            print(f"{name}: capture exit {v['capture_exit']} ({v['capture_s']} s), check exit {v['check_exit']}")
            for f in v["findings"]:
                print("   ", *f)
            if v["capture_exit"]:
                print("   ", v["stderr_tail"].strip().splitlines()[-1:] or "")
    Path(args.out).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
