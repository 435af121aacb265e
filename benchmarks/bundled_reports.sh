#!/usr/bin/env bash
# `check --json` of this checkout against another's on every bundled capture (samples/captures)
# and every log of tlparse's test corpus (tests/data/tlparse_inputs): stdout, stderr and exit
# status must be the same. Prints a line per input that differs, then the counts.
#
#     bash benchmarks/bundled_reports.sh BASE_CHECKOUT
#
# BASE_CHECKOUT: a git worktree of an earlier commit (`git worktree add /tmp/base COMMIT`), run
# as the package `graphtrain_inspect` through links under a temporary folder. From the repository
# root, with .venv made as the README says (PYTHON to use another interpreter). Exit 1 if any
# input differs. With DIFFS=1, also every `diff` of each bundled capture's rank-0 passes by
# #SEQ (the pass diff, `--text`, `--nodes --json`, `--ranks 0,1`, `--ranks 0,1 --side-by-side`).
set -u
base=$(cd "${1:?a checkout of the code to compare with}" && pwd)
py=${PYTHON:-.venv/bin/python}
work=$(mktemp -d)
mkdir -p "$work/pkg/graphtrain_inspect" "$work/tli"
touch "$work/pkg/graphtrain_inspect/__init__.py"
for name in capture inspector tui samples; do ln -s "$base/$name" "$work/pkg/graphtrain_inspect/$name"; done
tar -xJf tests/data/tlparse_inputs/strict_accepted.tar.xz -C "$work/tli"
run() { # the command's stdout, stderr and exit status, as one digest
  "$@" >"$work/out" 2>"$work/err"
  echo "rc $?" >>"$work/out"
  cat "$work/out" "$work/err" | md5sum
}
same=0
differ=0
compare() { # label, the command's arguments...
  local label=$1
  shift
  local a b
  a=$(run "$py" -m graphtrain_inspect.inspector.cli "$@")
  b=$(run env PYTHONPATH="$work/pkg" "$py" -m graphtrain_inspect.inspector.cli "$@")
  if [ "$a" = "$b" ]; then same=$((same + 1)); else differ=$((differ + 1)); echo "DIFFERENT $label"; fi
}
for f in samples/captures/*.tar.xz; do
  n=$(basename "$f" .tar.xz)
  compare "$n" check --sample "$n" --json
  [ "${DIFFS:-0}" = 1 ] || continue
  seqs=$("$py" -m graphtrain_inspect.inspector.cli ls --sample "$n" --json |
    "$py" -c 'import json, sys; print(" ".join(str(p["seq"]) for p in json.load(sys.stdin)["ranks"][0]["passes"]))')
  for seq in $seqs; do
    for opts in "" "--text" "--nodes --json" "--ranks 0,1" "--ranks 0,1 --side-by-side --width 160"; do
      # shellcheck disable=SC2086  # opts are words
      compare "$n diff #$seq $opts" diff --sample "$n" --pass "#$seq" --color never $opts
    done
  done
done
for f in "$work"/tli/*; do
  compare "tlparse input $(basename "$f")" check "$f" --json
done
echo "the same: $same, different: $differ"
rm -rf "$work"
[ "$differ" -eq 0 ]
