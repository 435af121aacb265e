#!/usr/bin/env bash
# Record the bundled captures on NGPU GPUs (NCCL), plus the evidence runs quoted in the notes.
#
#   samples/record_gpu_captures.sh NGPU OUTDIR [STEPS]
#
# Runs from the repository root with `python3` holding torch (and orjson importable). Each
# capture is packed as OUTDIR/h200x<N>-<name>.tar.xz; every command and its output goes to
# OUTDIR/gpu-log-<N>.txt. Every capture keeps its blobs (xz packs a 2-rank capture to ~200 KB).
set -u
NGPU=${1:?number of GPUs}
OUT=${2:?output directory}
STEPS=${3:-20}
mkdir -p "$OUT"
LOG="$OUT/gpu-log-$NGPU.txt"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
[ "${DEVICE:-cuda}" = cuda ] && export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-$(seq -s, 0 $((NGPU - 1)))}
WORK=$(mktemp -d)
DEVICE=${DEVICE:-cuda}  # DEVICE=cpu tries the script out on a CPU machine
PY=${PYTHON:-python3}
TRAIN=($PY -m torch.distributed.run --standalone --nproc-per-node "$NGPU" -m graphtrain_inspect.samples.train --device "$DEVICE" --steps "$STEPS" --quiet)

say() { echo "$@" | tee -a "$LOG"; }
run() {  # run CMD..., logging the command line and its output
    say "\$ $*"
    "$@" >>"$LOG" 2>&1
    local rc=$?
    say "[exit $rc]"
    return $rc
}
capture() {  # capture NAME [--no-blobs] -- TRAIN-ARGS...
    local name=$1; shift
    local opts=()
    while [ "$1" != "--" ]; do opts+=("$1"); shift; done
    shift
    local dir="$WORK/h200x$NGPU-$name"
    run $PY -m graphtrain_inspect.inspector.cli capture --out "$dir" --torch-trace --pass graphtrain_inspect.samples.pipeline:PIPELINE --no-inductor "${opts[@]}" -- "${TRAIN[@]}" --losses-json "$WORK/$name.losses.json" "$@"
    run $PY -m graphtrain_inspect.inspector.cli check "$dir"
    (cd "$WORK" && tar -cJf "$OUT/h200x$NGPU-$name.tar.xz" "h200x$NGPU-$name")
    say "packed $OUT/h200x$NGPU-$name.tar.xz $(du -h "$OUT/h200x$NGPU-$name.tar.xz" | cut -f1)"
}

say "# $(date -u +%FT%TZ) on $(hostname): $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs)"
say "# torch $($PY -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>/dev/null)"

capture clean --
capture rank-baked -- --bug rank-baked
capture device-literal -- --bug device-literal
capture stale-symbol -- --bug stale-symbol
capture rank-divergent -- --bug rank-divergent
capture coor-rank-baked -- --coor --bug rank-baked

if [ "$NGPU" = 2 ]; then
    capture coor-clean -- --coor
    say "# evidence: eager vs traced, traced without capture (compare with the clean capture's losses)"
    run "${TRAIN[@]}" --mode eager --losses-json "$WORK/eager.losses.json"
    run "${TRAIN[@]}" --losses-json "$WORK/plain.losses.json"
    run $PY - "$WORK" <<'EOF'
import json, sys
w = sys.argv[1]
L = {k: json.load(open(f"{w}/{k}.losses.json")) for k in ("eager", "plain", "clean", "coor-clean", "coor-rank-baked", "rank-baked")}
rel = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(L["plain"], L["eager"]))
print("traced vs eager: max relative difference", rel, "(<= 1e-6)" if rel <= 1e-6 else "(> 1e-6!)")
print("captured vs plain traced, bitwise equal:", L["clean"] == L["plain"])
print("coor clean vs per-rank clean, bitwise equal:", L["coor-clean"] == L["plain"])
print("coor rank-baked vs clean, equal:", L["coor-rank-baked"] == L["plain"], "(silently wrong numbers expected)")
for k, v in L.items():
    print(f"{k:16s} first {v[0]!r} last {v[-1]!r}")
EOF
    say "# evidence: every blob of the clean capture loads back under this torch (what replay needs)"
    run $PY samples/load_blobs.py "$WORK/h200x$NGPU-clean"
    say "# evidence: compile-on-one-rank with a baked device literal, then the same under --virtual-local-rank"
    run "${TRAIN[@]}" --steps 2 --coor --bug device-literal
    run $PY -m torch.distributed.run --standalone --virtual-local-rank --nproc-per-node "$NGPU" -m graphtrain_inspect.samples.train --device "$DEVICE" --steps 2 --quiet --coor --bug device-literal
fi
say "# done $(date -u +%FT%TZ)"
