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
# input differs.
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
compare() { # label, check's arguments...
  local label=$1
  shift
  local a b
  a=$(run "$py" -m graphtrain_inspect.inspector.cli check "$@" --json)
  b=$(run env PYTHONPATH="$work/pkg" "$py" -m graphtrain_inspect.inspector.cli check "$@" --json)
  if [ "$a" = "$b" ]; then same=$((same + 1)); else differ=$((differ + 1)); echo "DIFFERENT $label"; fi
}
for f in samples/captures/*.tar.xz; do
  n=$(basename "$f" .tar.xz)
  compare "$n" --sample "$n"
done
for f in "$work"/tli/*; do
  compare "tlparse input $(basename "$f")" "$f"
done
echo "the same: $same, different: $differ"
rm -rf "$work"
[ "$differ" -eq 0 ]
