# Sourced by the GPU hosts' scripts: what they share (device tool hosts have no project install).
#
#   timed OUT LABEL CORES COMMAND...   COMMAND on CORES (taskset), stdout to OUT, stderr to OUT.err;
#                                      prints "LABEL rc=RC SECONDS s" (wall seconds)
#   stage_code DEST [CHECKOUT]         CHECKOUT's (default: this one's) package folders as
#                                      DEST/graphtrain_inspect, byte-compiled as an install is
#   install_wheels                     the carried wheels in .whl/ (orjson, rapidfuzz, tlparse ...)
#                                      into /tmp/site, for PYTHONPATH=...:/tmp/site
#   unpack_captures ARG...             each CAPTURE.tar.xz (or directory) as /tmp/caps/NAME
#   gpu_env NGPU                       NCCL without NVLink multicast, NGPU visible devices, the
#                                      checkout first on PYTHONPATH (tests.programs.*)
#   say TEXT / logged CMD... / packed_capture NAME CAPTURE-ARGS... -- PROGRAM...
#                                      a log at $LOG of every command and its output; a capture
#                                      made into $WORK and packed as $OUT/NAME.tar.xz

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

stage_code() {
    local dest=$1 from=${2:-.}
    rm -rf "$dest"
    mkdir -p "$dest/graphtrain_inspect"
    for d in capture inspector tui samples; do cp -r "$from/$d" "$dest/graphtrain_inspect/"; done
    touch "$dest/graphtrain_inspect/__init__.py"
    python3 -m compileall -q "$dest" >/dev/null
}

install_wheels() {
    pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
}

unpack_captures() {
    mkdir -p /tmp/caps /tmp/x
    local t n
    for t in "$@"; do # each into a folder of its own name (two tarballs may hold the same folder name)
        n=$(basename "$t" .tar.xz)
        [ -e "/tmp/caps/$n" ] && continue
        if [ -d "$t" ]; then
            ln -s "$(cd "$t" && pwd)" "/tmp/caps/$n"
            continue
        fi
        mkdir -p "/tmp/x/$n"
        tar -xJf "$t" -C "/tmp/x/$n"
        mv /tmp/x/"$n"/* "/tmp/caps/$n"
    done
}

gpu_env() {
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-$(seq -s, 0 $(($1 - 1)))}
}

say() { echo "$@" | tee -a "$LOG"; }

logged() { # CMD...: the command line and its output into $LOG
    say "\$ $*"
    "$@" >>"$LOG" 2>&1
    local rc=$?
    say "[exit $rc]"
    return $rc
}

packed_capture() { # NAME [CAPTURE-OPTS...] -- PROGRAM...
    local name=$1
    shift
    local opts=()
    while [ "$1" != "--" ]; do opts+=("$1"); shift; done
    shift
    logged ${PY:-python3} -m graphtrain_inspect.inspector.cli capture --out "$WORK/$name" "${opts[@]}" -- "$@"
    (cd "$WORK" && tar -cJf "$OUT/$name.tar.xz" "$name")
    say "packed $OUT/$name.tar.xz $(du -h "$OUT/$name.tar.xz" | cut -f1)"
}
