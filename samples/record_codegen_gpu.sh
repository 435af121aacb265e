#!/usr/bin/env bash
# Inductor's generated code on 2 GPUs: code compiled on rank 0 and loaded by both ranks (seed
# 004: the wrapper pins device 0), the same with --virtual-local-rank, and per-rank compiles.
#
#   samples/record_codegen_gpu.sh OUTDIR
#
# Runs from the repository root with `python3` holding torch (2.11 or later) and orjson. Each
# capture goes to OUTDIR/<name>/ and is packed as OUTDIR/h200x2-codegen-<name>.tar.xz; every
# command and its output goes to OUTDIR/codegen-log.txt: the sample's per-rank verdicts, `ls`,
# `check` (text and --json) and, for the per-rank compile, `diff --output-code --ranks 0,1`.
# DEVICE=cpu tries the script out on a CPU machine (gloo; C++ code pins no device).
set -u
OUT=${1:?output directory}
mkdir -p "$OUT"
LOG="$OUT/codegen-log.txt"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
DEVICE=${DEVICE:-cuda}
[ "$DEVICE" = cuda ] && export CUDA_VISIBLE_DEVICES=0,1
PY=${PYTHON:-python3}
GTI=($PY -m graphtrain_inspect.inspector.cli)
SAMPLE=(-m graphtrain_inspect.samples.codegen_one_rank --device "$DEVICE")

say() { echo "$@" | tee -a "$LOG"; }
run() {  # run CMD..., logging the command line and its output
    say "\$ $*"
    "$@" 2>&1 | tee -a "$LOG"
    say "(exit ${PIPESTATUS[0]})"
}

for name in coor virtual per-rank; do
    case $name in
        coor) launch=($PY -m torch.distributed.run --standalone --nproc-per-node 2 "${SAMPLE[@]}") ;;
        virtual) launch=($PY -m torch.distributed.run --standalone --nproc-per-node 2 --virtual-local-rank "${SAMPLE[@]}") ;;
        per-rank) launch=($PY -m torch.distributed.run --standalone --nproc-per-node 2 "${SAMPLE[@]}" --per-rank) ;;
    esac
    rm -rf "${OUT:?}/$name"
    say ""
    say "=== $name ==="
    run "${GTI[@]}" capture --out "$OUT/$name" -- "${launch[@]}"
    run "${GTI[@]}" ls "$OUT/$name" --all --color never
    run "${GTI[@]}" check "$OUT/$name" --color never
    "${GTI[@]}" check "$OUT/$name" --json > "$OUT/$name/check.json" 2>> "$LOG"
    [ "$name" = per-rank ] && run "${GTI[@]}" diff "$OUT/$name" --output-code --ranks 0,1 --color never
    tar -C "$OUT" -cJf "$OUT/h200x2-codegen-$name.tar.xz" "$name"
done
say ""
say "expected: coor: rank 1 FAILED (or allocated on cuda:0), check: device-baked [generated code] error naming index 0 and loading rank 1;"
say "          virtual: both ok (each rank sees its GPU as cuda:0), the same finding (the code still pins index 0 of a shared artifact);"
say "          per-rank: both ok, no codegen finding, diff --output-code agrees."
