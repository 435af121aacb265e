#!/usr/bin/env bash
# Row digests on GPUs: the sample with every planted bug on NGPU GPUs (NCCL), every node table with
# its `gti_row_digests` (GTI_CAPTURE_DIGEST_ROWS=0), once with every graph's records made in the
# training process and once with every graph's made by a forked child (GTI_CAPTURE_DEFER_NODES);
# then `check --json` of each read by the digests and with them ignored, and with the digests read
# but no diff made from anchors: those two reports must be the same document, the first the same
# findings (kind, severity, ranks, passes, message: the anchored diffs may pair rows otherwise,
# and so list other nodes in the evidence), and the two captures' reports the same document. Each row's refs are in the records since
# issue 33's second column: the script counts the records that hold them and the structural rank
# diffs `check` made from them (diff/anchored.py; on GPUs each rank's own device is in
# most rows; the rows compare by their normalized digests, where the tables have their normalized hash).
#
#     bash benchmarks/gpu/row_digest_runs.sh NGPU OUT
#
# Needs the package and orjson importable (PYTHONPATH); DEVICE=cpu tries it on a CPU machine. Prints a line per step; exit 1 if a pair
# of reports differs.
set -u
NGPU=${1:?number of GPUs}
OUT=${2:?output directory}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
noanchor='import sys
from graphtrain_inspect.inspector.diff import graph_diff as g, rank_diffs as r
object.__setattr__(r.ANCHORED, "make", lambda pair: None)  # rank diffs: no anchored strategy
g.anchored_pass_diff = lambda *args: None  # pass diffs: from the decoded tables
from graphtrain_inspect.inspector.cli.main import main
sys.exit(main(sys.argv[1:]))'
nodig='import sys
from graphtrain_inspect.inspector.read.capture_reader import Capture
Capture.reads_row_digests = False
from graphtrain_inspect.inspector.cli.main import main
sys.exit(main(sys.argv[1:]))'
bad=0
for mode in here child; do
  defer=$([ "$mode" = here ] && echo 0 || echo 1)
  cap=$OUT/cap-$mode
  GTI_CAPTURE_DIGEST_ROWS=0 GTI_CAPTURE_DEFER_NODES=$defer $PY -m graphtrain_inspect.inspector.cli capture --out "$cap" \
    --pass graphtrain_inspect.samples.pipeline:PIPELINE --no-inductor -- \
    $PY -m torch.distributed.run --standalone --nproc-per-node "$NGPU" -m graphtrain_inspect.samples.train \
    --device "${DEVICE:-cuda}" --steps 3 --quiet --bug rank-baked --bug rank-divergent --bug device-literal --bug stale-symbol \
    >"$OUT/capture-$mode.txt" 2>&1
  echo "capture $mode: exit $?, $(grep -c gti_row_digests "$cap"/*_gti.log | tr '\n' ' ')records, with refs: $(grep -c '"refs":\[' "$cap"/*_gti.log | tr '\n' ' ')"
  $PY - "$cap" <<'PYEOF'
import sys
from graphtrain_inspect.inspector.checks import check_report
from graphtrain_inspect.inspector.diff import anchored as a
from graphtrain_inspect.inspector.read.capture_index import open_capture
made = []
real = a._anchored_diff
a._anchored_diff = lambda *x: made.append(real(*x)) or made[-1]
with open_capture(sys.argv[1]) as cap:
    check_report(cap)
print(f"anchored diffs tried {len(made)}, made {sum(d is not None for d in made)}")
PYEOF
  $PY -m graphtrain_inspect.inspector.cli check --json "$cap" >"$OUT/$mode.json" 2>"$OUT/$mode.err"
  echo "check $mode: exit $?"
  $PY -c "$nodig" check --json "$cap" >"$OUT/$mode.nodig.json" 2>>"$OUT/$mode.err"
  $PY -c "$noanchor" check --json "$cap" >"$OUT/$mode.noanchor.json" 2>>"$OUT/$mode.err"
  if cmp -s "$OUT/$mode.noanchor.json" "$OUT/$mode.nodig.json"; then echo "$mode: same report with digests ignored and without anchored diffs"; else echo "$mode: DIFFERENT with digests ignored"; bad=1; fi
  $PY - "$OUT/$mode.json" "$OUT/$mode.nodig.json" <<'PYEOF' || bad=1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
key = lambda r: [(f["kind"], f["severity"], f["ranks"], f.get("introduced_by"), f.get("pass"), f["message"]) for f in r["findings"]]
if a == b:
    print("with anchored diffs: the same report")
elif key(a) == key(b):
    print("with anchored diffs: the same findings, evidence differs in", sum(x != y for x, y in zip(a["findings"], b["findings"])))
else:
    print("with anchored diffs: DIFFERENT findings")
    sys.exit(1)
PYEOF
done
if cmp -s "$OUT/here.json" "$OUT/child.json"; then echo "here and child: same report"; else echo "here and child: DIFFERENT"; bad=1; fi
$PY - "$OUT/here.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
print("findings:", r["summary"]["by_kind"], "errors", r["summary"]["error"], "warnings", r["summary"]["warning"])
PYEOF
exit $bad
