#!/usr/bin/env bash
# Capture torch's FSDP2 + torch.compile of a small transformer (tests/programs/fsdp2_compile.py) on
# NGPU GPUs (NCCL; each rank on cuda:LOCAL_RANK), clean and with a planted rank literal, and check
# both: the clean capture must have no error or warning, the planted one exactly the rank literal.
#
#   benchmarks/gpu/record_fsdp2_compile.sh NGPU OUTDIR [STEPS]
#
# From the repository root, with graphtrain-inspect installed in the `python3` that holds torch
# (`pip install --no-deps -e .` plus the orjson wheel). Packs OUTDIR/h200x<N>-fsdp2-compile-clean.tar.xz
# and OUTDIR/h200x<N>-fsdp2-compile-rank-literal.tar.xz; every command and its output goes to
# OUTDIR/fsdp2-log-<N>.txt, with `check --json` of each capture next to it. On a machine without
# CUDA the program runs on CPU ranks with gloo (a dry run of this script).
set -u
. "$(dirname "$0")/common.sh"
NGPU=${1:?number of GPUs}
OUT=${2:?output directory}
STEPS=${3:-3}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG="$OUT/fsdp2-log-$NGPU.txt"
gpu_env "$NGPU"
WORK=$(mktemp -d)
PY=${PYTHON:-python3}
PROGRAM=($PY -m torch.distributed.run --standalone --nproc-per-node "$NGPU" -m tests.programs.fsdp2_compile --steps "$STEPS")
capture() { # NAME PROGRAM-ARGS...: packed as h200x<NGPU>-fsdp2-compile-NAME, checked beside
    local name=h200x$NGPU-fsdp2-compile-$1
    shift
    packed_capture "$name" -- "${PROGRAM[@]}" "$@"
    logged $PY -m graphtrain_inspect.inspector.cli check "$WORK/$name" --severity info
    $PY -m graphtrain_inspect.inspector.cli check "$WORK/$name" --json > "$OUT/$name.check.json"
}

say "# $(date -u +%FT%TZ) $(hostname) torch $($PY -c 'import torch; print(torch.__version__, torch.cuda.device_count(), "GPUs")')"
logged "${PROGRAM[@]}"  # the uncaptured run: its loss lines must equal the clean capture's
capture clean
capture rank-literal --plant-rank-literal
say "# errors and warnings (clean: none; rank-literal: one rank-baked-constant):"
for name in clean rank-literal; do
    $PY - "$OUT/h200x$NGPU-fsdp2-compile-$name.check.json" <<'EOF' | tee -a "$LOG"
import json, sys
doc = json.load(open(sys.argv[1]))
bad = [(f["kind"], f["severity"], f["message"], (f.get("source") or {}).get("line")) for f in doc["findings"] if f["severity"] != "info"]
print(sys.argv[1].rsplit("/", 1)[-1], doc["summary"]["error"], "errors", doc["summary"]["warning"], "warnings", bad)
EOF
done
rm -rf "$WORK"
