#!/usr/bin/env bash
# `diff --pass P` and `diff --pass P --ranks 0,1` of this checkout (one process, `-j 1`; and its
# default, the text diff in a forked child, on 2 and on 8 cores) against an earlier checkout's on
# one core, interleaved run by run on a many-core GPU host (device tool). Every output must be
# the same bytes.
#
#     REPS="1 2 3" PASS=tag_activation_checkpointing BASE=dir bash benchmarks/gpu/diff_against_base.sh CAPTURE.tar.xz...
#
# BASE as for check_against_base.sh (which unpacks the captures into /tmp/caps: run it first, or
# give capture directories). Prints per run: capture, what ran, exit status, seconds.
set -u
pass=${PASS:-tag_activation_checkpointing}
base=${BASE:?BASE: a folder with the earlier code}
if [ ! -d /tmp/gb/graphtrain_inspect/inspector ]; then
    mkdir -p /tmp/gti/graphtrain_inspect /tmp/gb/graphtrain_inspect
    for d in capture inspector tui samples; do cp -r "$d" /tmp/gti/graphtrain_inspect/; cp -r "$base/$d" /tmp/gb/graphtrain_inspect/; done
    touch /tmp/gti/graphtrain_inspect/__init__.py /tmp/gb/graphtrain_inspect/__init__.py
    python3 -m compileall -q /tmp/gti /tmp/gb >/dev/null
fi
. "$(dirname "$0")/timed.sh"
for cap in "$@"; do
    d=/tmp/caps/$(basename "$cap" .tar.xz)
    [ -d "$d" ] || d=$cap
    for ranks in "" "--ranks 0,1"; do
        for _ in ${REPS:-1 2 3}; do
            for v in "new -j1|2|/tmp/gti|-j 1" "new -j2|2-3|/tmp/gti|-j 2" "new -j8|2-9|/tmp/gti|-j 8" "base|2|/tmp/gb|"; do
                IFS='|' read -r label cores path jobs <<<"$v"
                # shellcheck disable=SC2086  # jobs and ranks are words
                echo "$(basename "$d") ${ranks:-pass} $(PYTHONPATH=$path:/tmp/site timed "/tmp/out.${label// /}" "$label" "$cores" python3 -m graphtrain_inspect.inspector.cli diff "$d" --pass "$pass" --color never $ranks $jobs)"
            done
            for o in new-j2 new-j8 base; do cmp -s /tmp/out.new-j1 "/tmp/out.$o" || echo "  $o: DIFFERENT from new -j1"; done
        done
    done
done
