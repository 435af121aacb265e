#!/usr/bin/env bash
# `check -j 1` and `-j 8` of this checkout and of an earlier one, and tlparse on the same logs,
# interleaved run by run on a many-core GPU host (device tool), one core each but -j 8 (taskset):
# the ratio to tlparse and the gain over the earlier code measured at the same moments of the
# machine. Every report must be the same document: -j 1 and -j 8, this code and the earlier one.
#
#     REPS="1 2 3" TLPARSE=path BASE=dir bash benchmarks/gpu/check_against_base.sh CAPTURE.tar.xz|DIR...
#
# BASE: a folder holding the earlier code's capture/ inspector/ tui/ samples/ (`git archive REV
# capture inspector tui samples | tar -x -C BASE`), carried with the call. Needs the wheels of
# orjson and rapidfuzz in .whl/ (the GPU hosts have neither). Prints per run: capture, what ran,
# exit status, seconds; then whether the reports are the same.
set -u
tl=${TLPARSE:-tlparse}
base=${BASE:?BASE: a folder with the earlier code}
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
rm -rf /tmp/gti /tmp/gb /tmp/caps /tmp/x
mkdir -p /tmp/gti/graphtrain_inspect /tmp/gb/graphtrain_inspect /tmp/caps
for d in capture inspector tui samples; do
    cp -r "$d" /tmp/gti/graphtrain_inspect/
    cp -r "$base/$d" /tmp/gb/graphtrain_inspect/
done
touch /tmp/gti/graphtrain_inspect/__init__.py /tmp/gb/graphtrain_inspect/__init__.py
python3 -m compileall -q /tmp/gti /tmp/gb >/dev/null # the bytecode an install has
for t in "$@"; do # each tarball into a folder of its own name (two may hold the same folder name)
    n=$(basename "$t" .tar.xz)
    if [ -d "$t" ]; then # a capture directory: linked as it is
        ln -s "$(cd "$t" && pwd)" "/tmp/caps/$n"
        continue
    fi
    mkdir -p "/tmp/x/$n"
    tar -xJf "$t" -C "/tmp/x/$n"
    mv /tmp/x/"$n"/* "/tmp/caps/$n"
done
echo "machine: $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), $(python3 -V)"
. "$(dirname "$0")/timed.sh"
run() { # label cores command...: output to /tmp/out.LABEL
    local label=$1 cores=$2
    shift 2
    echo "$cap $(timed "/tmp/out.$label" "$label" "$cores" "$@")"
}
for cap in $(ls /tmp/caps); do
    d=/tmp/caps/$cap
    for _ in ${REPS:-1 2 3}; do
        t0=$(date +%s.%N)
        for log in "$d"/*.log; do taskset -c 2 "$tl" "$log" -o /tmp/tl --no-browser --overwrite >/dev/null 2>&1; done
        t1=$(date +%s.%N)
        echo "$cap tlparse $(awk "BEGIN{printf \"%.3f\", $t1 - $t0}") s"
        PYTHONPATH=/tmp/gti:/tmp/site run new1 2 python3 -m graphtrain_inspect.inspector.cli check "$d" --json -j 1
        PYTHONPATH=/tmp/gb:/tmp/site run base1 2 python3 -m graphtrain_inspect.inspector.cli check "$d" --json -j 1
        PYTHONPATH=/tmp/gti:/tmp/site run new8 2-9 python3 -m graphtrain_inspect.inspector.cli check "$d" --json -j 8
        PYTHONPATH=/tmp/gb:/tmp/site run base8 2-9 python3 -m graphtrain_inspect.inspector.cli check "$d" --json -j 8
        cmp -s /tmp/out.new1 /tmp/out.new8 && echo "  -j 1 and -j 8: same" || echo "  -j 1 and -j 8: DIFFERENT"
        cmp -s /tmp/out.new1 /tmp/out.base1 && echo "  this code and the base: same" || echo "  this code and the base: DIFFERENT"
    done
done
