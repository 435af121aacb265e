#!/usr/bin/env bash
# What keeping torch's own TORCH_TRACE logs (capture --torch-trace) costs on a real compiled run:
# wall time and bytes of the FSDP2 + torch.compile program (2 CPU ranks, gloo, 3 steps), captured
# with and without it, RUNS times each (default 2). From the repository root, with the venv in .venv.
#
#   bash benchmarks/torch_trace_cost.sh [RUNS]
#
# Prints one line per capture: seconds, capture bytes, bytes of DIR/torch_trace.
set -u
RUNS=${1:-2}
WORK=$(mktemp -d)
for i in $(seq 1 "$RUNS"); do
    for tt in "" "--torch-trace"; do
        d="$WORK/run$i${tt:+-tt}"
        s=$(date +%s.%N)
        .venv/bin/graphtrain-inspect capture --out "$d" $tt -- .venv/bin/torchrun --standalone --nproc-per-node 2 \
            -m tests.programs.fsdp2_compile --steps 3 >/dev/null 2>&1
        e=$(date +%s.%N)
        echo "run $i ${tt:-plain}: $(echo "$e - $s" | bc) s, capture $(du -sb "$d" | cut -f1) B," \
            "torch_trace $(du -sb "$d/torch_trace" 2>/dev/null | cut -f1 || echo 0) B"
    done
done
rm -rf "$WORK"
