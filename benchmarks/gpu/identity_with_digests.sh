#!/usr/bin/env bash
# The GPU matrix of benchmarks/gpu/identity_runs.sh with every node table's row digests written
# (GTI_CAPTURE_DIGEST_ROWS=0: its programs' tables are under the 1,000-row floor), then each
# capture's `check --json` run twice, once with the digests ignored (`Capture.reads_row_digests`) and
# once with the digests read but no diff made from anchors (the `anchored` rank-diff strategy off): a line per
# capture with its exit status, whether the reports are one document (the last two must be; the
# first may list other nodes in a structural rank diff's evidence, never other findings), its
# digest records and its findings; then benchmarks/gpu/row_digest_runs.sh.
#
#     bash benchmarks/gpu/identity_with_digests.sh NGPU
#
# From the repository root, the package and orjson importable (PYTHONPATH); writes under /tmp.
set -u
NGPU=${1:?number of GPUs}
export GTI_CAPTURE_DIGEST_ROWS=0
bash benchmarks/gpu/identity_runs.sh "$NGPU" /tmp/id > /tmp/id.out 2>&1; echo "identity_runs exit $?"
nodig='import sys
from graphtrain_inspect.inspector.read.capture_reader import Capture
Capture.reads_row_digests = False
from graphtrain_inspect.inspector.cli.main import main
sys.exit(main(sys.argv[1:]))'
noanchor='import sys
from graphtrain_inspect.inspector.diff import graph_diff as g, rank_diffs as r
object.__setattr__(r.ANCHORED, "make", lambda pair: None)  # rank diffs: no anchored strategy
g.anchored_pass_diff = lambda *args: None  # pass diffs: from the decoded tables
from graphtrain_inspect.inspector.cli.main import main
sys.exit(main(sys.argv[1:]))'
findings='import json, sys
key = lambda p: [(f["kind"], f["severity"], f["ranks"], f.get("introduced_by"), f.get("pass"), f["message"]) for f in json.load(open(p))["findings"]]
sys.exit(0 if key(sys.argv[1]) == key(sys.argv[2]) else 1)'
mkdir -p /tmp/idx
for f in /tmp/id/*.tar.xz; do
  tar -xJf "$f" -C /tmp/idx
  n=$(basename "$f" .tar.xz); c=/tmp/idx/$n
  python3 -m graphtrain_inspect.inspector.cli check --json "$c" > /tmp/idx/$n.1.json 2>/dev/null; rc=$?
  python3 -m graphtrain_inspect.inspector.cli check --json "$c" > /tmp/idx/$n.2.json 2>/dev/null
  python3 -c "$nodig" check --json "$c" > /tmp/idx/$n.nd.json 2>/dev/null
  python3 -c "$noanchor" check --json "$c" > /tmp/idx/$n.na.json 2>/dev/null
  same=$(cmp -s /tmp/idx/$n.1.json /tmp/idx/$n.2.json && echo same-twice || echo DIFFERENT-twice)
  if cmp -s /tmp/idx/$n.1.json /tmp/idx/$n.nd.json; then nd=same-digests-ignored
  elif python3 -c "$findings" /tmp/idx/$n.1.json /tmp/idx/$n.nd.json; then nd=same-findings-digests-ignored
  else nd=DIFFERENT-digests-ignored; fi
  na=$(cmp -s /tmp/idx/$n.na.json /tmp/idx/$n.nd.json && echo same-without-anchors || echo DIFFERENT-without-anchors)
  dig=$(cat $c/*_gti.log | grep -c gti_row_digests)
  summ=$(python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['summary']; print('E',s['error'],'W',s['warning'],'I',s['info'],'read_errors',len(s['read_errors']),s['by_kind'])" /tmp/idx/$n.1.json)
  echo "$n rc=$rc $same $nd $na digests=$dig $summ"
done
unset GTI_CAPTURE_DIGEST_ROWS
bash benchmarks/gpu/row_digest_runs.sh "$NGPU" /tmp/rdr
