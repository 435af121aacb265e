#!/usr/bin/env bash
# `check -j 1` and `-j 8` of this checkout and of an earlier one, and tlparse on the same logs,
# interleaved run by run on a many-core GPU host (device tool), one core each but -j 8 (taskset):
# the ratio to tlparse and the gain over the earlier code measured at the same moments of the
# machine. Every report must be the same document: -j 1 and -j 8, this code and the earlier one.
# With DIFFS=1, then `diff --pass $PASS` and `--ranks 0,1` of this checkout at -j 1, 2 and 8
# against the earlier one's on one core; every output the same bytes.
#
#     REPS="1 2 3" TLPARSE=path BASE=dir [DIFFS=1 PASS=name] bash benchmarks/gpu/check_against_base.sh CAPTURE.tar.xz|DIR...
#
# BASE: a folder holding the earlier code's capture/ inspector/ tui/ samples/ (`git archive REV
# capture inspector tui samples | tar -x -C BASE`), carried with the call. Needs the wheels of
# orjson and rapidfuzz in .whl/ (the GPU hosts have neither). Prints per run: capture, what ran,
# exit status, seconds; then whether the outputs are the same.
set -u
tl=${TLPARSE:-tlparse}
base=${BASE:?BASE: a folder with the earlier code}
pass=${PASS:-tag_activation_checkpointing}
. "$(dirname "$0")/common.sh"
install_wheels
rm -rf /tmp/caps /tmp/x
stage_code /tmp/gti
stage_code /tmp/gb "$base"
unpack_captures "$@"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), $(python3 -V), $(date -u +%F)"
cli() { # LABEL CORES CODE ARGS...: graphtrain-inspect ARGS of CODE (/tmp/gti or /tmp/gb), output to /tmp/out.LABEL
    local label=$1 cores=$2 code=$3
    shift 3
    PYTHONPATH=$code:/tmp/site timed "/tmp/out.$label" "$label" "$cores" python3 -m graphtrain_inspect.inspector.cli "$@"
}
for cap in $(ls /tmp/caps); do
    d=/tmp/caps/$cap
    for _ in ${REPS:-1 2 3}; do
        t0=$(date +%s.%N)
        for log in "$d"/*.log; do taskset -c 2 "$tl" "$log" -o /tmp/tl --no-browser --overwrite >/dev/null 2>&1; done
        t1=$(date +%s.%N)
        echo "$cap tlparse $(awk "BEGIN{printf \"%.3f\", $t1 - $t0}") s"
        echo "$cap $(cli new1 2 /tmp/gti check "$d" --json -j 1)"
        echo "$cap $(cli base1 2 /tmp/gb check "$d" --json -j 1)"
        echo "$cap $(cli new8 2-9 /tmp/gti check "$d" --json -j 8)"
        echo "$cap $(cli base8 2-9 /tmp/gb check "$d" --json -j 8)"
        cmp -s /tmp/out.new1 /tmp/out.new8 && echo "  -j 1 and -j 8: same" || echo "  -j 1 and -j 8: DIFFERENT"
        cmp -s /tmp/out.new1 /tmp/out.base1 && echo "  this code and the base: same" || echo "  this code and the base: DIFFERENT"
    done
    [ "${DIFFS:-0}" = 1 ] || continue
    for ranks in "" "--ranks 0,1"; do
        for _ in ${REPS:-1 2 3}; do
            for v in "new-j1|2|/tmp/gti|-j 1" "new-j2|2-3|/tmp/gti|-j 2" "new-j8|2-9|/tmp/gti|-j 8" "base|2|/tmp/gb|"; do
                IFS='|' read -r label cores code jobs <<<"$v"
                # shellcheck disable=SC2086  # jobs and ranks are words
                echo "$cap diff ${ranks:-pass} $(cli "$label" "$cores" "$code" diff "$d" --pass "$pass" --color never $ranks $jobs)"
            done
            for o in new-j2 new-j8 base; do cmp -s /tmp/out.new-j1 "/tmp/out.$o" || echo "  $o: DIFFERENT from new-j1"; done
        done
    done
done
