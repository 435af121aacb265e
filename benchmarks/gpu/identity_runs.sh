#!/usr/bin/env bash
# What ran where, checked on GPUs: the flows whose ranks must be paired by identity,
# each captured with torch's own trace, on NGPU GPUs (NCCL where the program uses GPUs).
#
#   benchmarks/gpu/identity_runs.sh NGPU OUTDIR
#
# From the repository root, with graphtrain-inspect importable by the `python3` that holds torch
# (`pip install --no-deps --no-build-isolation -e .` plus the orjson wheel). Each capture is
# packed as OUTDIR/<gpu>x<NGPU>-<name>.tar.xz; every command and its output goes to
# OUTDIR/identity-log-<NGPU>.txt. The CPU tests read the packed captures (bundled; tests/samples/
# test_bundled_captures.py) and assert what `check` says of each:
#   2 GPUs: fsdp2-compile-clean (no error or warning; FSDP2's own failure info),
#           fsdp2-compile-rank-literal (the literal: info per rank, an error with --shared-graph),
#           rank-recompile-divergent (exactly the rank-divergent-compile error, no device-baked),
#           rank-recompile-twin (nothing), precompile-load (the baked slice, no pass-ran alarm)
#   4 GPUs: the same fsdp2 pair on 4 ranks
set -u
. "$(dirname "$0")/common.sh"
NGPU=${1:?number of GPUs}
OUT=${2:?output directory}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG="$OUT/identity-log-$NGPU.txt"
gpu_env "$NGPU"
PY=${PYTHON:-python3}
GPU=$($PY -c 'import torch; print(torch.cuda.get_device_name(0).split()[1].lower() if torch.cuda.is_available() else "cpu")' 2>/dev/null)
WORK=$(mktemp -d)
RUN=($PY -m torch.distributed.run --standalone --nproc-per-node "$NGPU")
PASSES=(--pass tests.programs.precompile_load_passes:COMPILE_TIME --pass tests.programs.precompile_load_passes:LOAD_TIME)
capture() { # NAME [CAPTURE-OPTS...] -- PROGRAM-ARGS...: with torch's trace, packed as <gpu>x<NGPU>-NAME
    local name=$1
    shift
    local opts=()
    while [ "$1" != "--" ]; do opts+=("$1"); shift; done
    shift
    packed_capture "${GPU}x$NGPU-$name" --torch-trace "${opts[@]}" -- "${RUN[@]}" "$@"
}

say "# $(date -u +%FT%TZ) on $(hostname): $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | xargs)"
say "# torch $($PY -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>/dev/null)"
capture fsdp2-compile-clean -- -m tests.programs.fsdp2_compile --steps 3
capture fsdp2-compile-rank-literal -- -m tests.programs.fsdp2_compile --steps 3 --plant-rank-literal
if [ "$NGPU" = 2 ]; then
    capture rank-recompile-divergent -- -m tests.programs.rank_recompile --divergent
    capture rank-recompile-twin -- -m tests.programs.rank_recompile
    capture precompile-load "${PASSES[@]}" -- -m tests.programs.precompile_load --plant
fi
say "# done $(date -u +%FT%TZ)"
