# Sourced by the GPU scripts: `timed OUT LABEL CORES COMMAND...` runs COMMAND on CORES (taskset),
# its stdout to OUT and its stderr to OUT.err, and prints "LABEL rc=RC SECONDS s" (wall seconds).
timed() {
    local out=$1 label=$2 cores=$3
    shift 3
    local t0 t1 rc
    t0=$(date +%s.%N)
    taskset -c "$cores" "$@" >"$out" 2>"$out.err"
    rc=$?
    t1=$(date +%s.%N)
    echo "$label rc=$rc $(awk "BEGIN{printf \"%.3f\", $t1 - $t0}") s"
}
