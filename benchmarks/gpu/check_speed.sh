#!/usr/bin/env bash
# `check` against tlparse on a quiet many-core machine, one core each (taskset), as issue 33's
# table measures them: tlparse over every rank's log one after another, `check --json -j 1`, the
# same with the capture's `gti_symbol_rows` records ignored (the walk selecting rows from whole
# tables, as before them), the same with its `gti_row_digests` ignored (rank diffs and tables from
# whole payloads), the same with the rows' normalized digests ignored (the digests and the rows
# with an own device instead), the same with the digests read but no diff made from anchors
# (diff/anchored.py off: structural rank diffs from the decoded tables), and `check -j
# N` on N cores. Three runs each; every report of a capture must be the same document (the findings
# do not depend on N or on the records), but for the anchored diffs, which may pair rows otherwise:
# the runs without them must agree with each other, and where a report differs from the anchored
# diffs' the line says whether its findings are the same (kind, severity, ranks, passes, message).
#
#     bash benchmarks/gpu/check_speed.sh OUT CAPTURE.tar.xz|CAPTURE_DIR...
#
# Needs `tlparse` on PATH (or TLPARSE=path) and the package importable (PYTHONPATH). Prints one
# line per run: capture, what ran, cores, seconds; then `same` or `DIFFERENT` per capture.
set -u
out=$1
shift
mkdir -p "$out"
tl=${TLPARSE:-tlparse}
py=${PYTHON:-python3}
c0=${FIRST_CORE:-2}  # the cores used: c0 for one, c0..c0+N-1 for -j N
jobs=${JOBS:-2 4 8}
say() { echo "$*" | tee -a "$out/check_speed.txt"; }
. "$(dirname "$0")/timed.sh"
run() { # label cores command...: prints the wall seconds of the command, output to $out/last
  local label=$1 cores=$2
  shift 2
  say "$(timed "$out/last" "$label cores=$cores" "$cores" "$@")"
}
say "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1 /proc/loadavg)"
nodig='import sys
from graphtrain_inspect.inspector.read.capture_reader import Capture
Capture.reads_row_digests = False
from graphtrain_inspect.inspector.cli.main import main
sys.exit(main(sys.argv[1:]))'
findings='import json, sys
key = lambda p: [(f["kind"], f["severity"], f["ranks"], f.get("introduced_by"), f.get("pass"), f["message"]) for f in json.load(open(p))["findings"]]
a, b = key(sys.argv[1]), key(sys.argv[2])
print(f"{len(a)} findings, the same" if a == b else f"DIFFERENT findings ({len(a)} against {len(b)})")'
nonorm='import sys
from graphtrain_inspect.inspector.read import row_digests as d
d.RowDigests.normalized = lambda self, rewrites: None
from graphtrain_inspect.inspector.cli.main import main
sys.exit(main(sys.argv[1:]))'
noanchor='import sys
from graphtrain_inspect.inspector.diff import graph_diff as g, rank_diffs as r
object.__setattr__(r.ANCHORED, "make", lambda pair: None)  # rank diffs: no anchored strategy
g.anchored_pass_diff = lambda *args: None  # pass diffs: from the decoded tables
from graphtrain_inspect.inspector.cli.main import main
sys.exit(main(sys.argv[1:]))'
norec='import sys
from graphtrain_inspect.inspector.checks import stale_unbacked_symbol as s
s._recorded_rows = lambda ctx, rank, gid: None
from graphtrain_inspect.inspector.cli.main import main
sys.exit(main(sys.argv[1:]))'
for archive in "$@"; do
  name=$(basename "$archive" .tar.xz)
  if [ -d "$archive" ]; then  # a capture directory: read where it is, kept
    cap=$archive
  else
    tar -xJf "$archive" -C "$out" || { say "$archive: cannot extract"; exit 2; }
    cap=$out/$name
  fi
  cat "$cap"/*.log >/dev/null
  for i in 1 2 3; do
    t0=$(date +%s.%N)
    for log in "$cap"/*_gti.log; do
      d=$(mktemp -d)
      taskset -c "$c0" "$tl" "$log" -o "$d" --no-browser --overwrite >/dev/null 2>&1
      rm -rf "$d"
    done
    t1=$(date +%s.%N)
    say "$name tlparse cores=$c0 $(awk "BEGIN{printf \"%.3f\", $t1 - $t0}") s"
  done
  for i in 1 2 3; do
    run "$name check -j 1" "$c0" "$py" -m graphtrain_inspect.inspector.cli check "$cap" --json -j 1
    cp "$out/last" "$out/$name.j1.json"
    run "$name check -j 1 (records ignored)" "$c0" "$py" -c "$norec" check "$cap" --json -j 1
    cmp -s "$out/last" "$out/$name.j1.json" || say "$name DIFFERENT (records ignored)"
    run "$name check -j 1 (row digests ignored)" "$c0" "$py" -c "$nodig" check "$cap" --json -j 1
    cp "$out/last" "$out/$name.tables.json"
    cmp -s "$out/last" "$out/$name.j1.json" || say "$name differs from the anchored diffs' (row digests ignored): $("$py" -c "$findings" "$out/$name.j1.json" "$out/last")"
    run "$name check -j 1 (normalized digests ignored)" "$c0" "$py" -c "$nonorm" check "$cap" --json -j 1
    cmp -s "$out/last" "$out/$name.j1.json" || say "$name differs from the normalized digests' (normalized digests ignored): $("$py" -c "$findings" "$out/$name.j1.json" "$out/last")"
    run "$name check -j 1 (no anchored diffs)" "$c0" "$py" -c "$noanchor" check "$cap" --json -j 1
    cmp -s "$out/last" "$out/$name.tables.json" || say "$name DIFFERENT (no anchored diffs, row digests ignored)"
  done
  for n in $jobs; do
    for i in 1 2 3; do
      run "$name check -j $n" "$c0-$((c0 + n - 1))" "$py" -m graphtrain_inspect.inspector.cli check "$cap" --json -j "$n"
      cmp -s "$out/last" "$out/$name.j1.json" || say "$name DIFFERENT (-j $n)"
    done
  done
  say "$name done"
  [ -d "$archive" ] || rm -rf "$cap"
done
