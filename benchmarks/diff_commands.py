"""`graphtrain-inspect diff` as a user runs it, timed: a pass diff and a rank diff of one pass.

    python -m benchmarks.diff_commands CAPTURE --pass NAME [--repeat 3] [--base CHECKOUT]

Four commands, each a fresh process: `diff CAPTURE --pass NAME --nodes`, the same with the text
diff (no `--nodes`), and both with `--ranks 0,1`. Each figure is the best of `--repeat` runs, with
its peak RSS. With `--base CHECKOUT` (a git worktree of an earlier commit) each command also runs
with that code, in turns with this one's, and its output must be the same (exit 1 if not), but
with `--base-may-differ` (an earlier code whose diffs pair rows otherwise: each code's runs must
agree with each other, and `same_as_base` says whether the two codes' outputs are the same).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from benchmarks.scale_bench import base_env, cli, logs_of, timed, warm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", type=Path)
    ap.add_argument("--pass", dest="pass_name", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--base", type=Path, help="a checkout of earlier code to time beside this one (same output required)"
    )
    ap.add_argument("--base-may-differ", action="store_true")
    args = ap.parse_args()
    warm(logs_of(args.capture))
    base = base_env(args.base, Path(tempfile.mkdtemp(prefix="gti-base-"))) if args.base else None
    variants = [("", None), ("base_", base)] if base is not None else [("", None)]
    res: dict = {"capture": str(args.capture), "pass": args.pass_name}
    for label, extra in (
        ("pass_nodes", ["--nodes"]),
        ("pass_text", []),
        ("ranks_nodes", ["--ranks", "0,1", "--nodes"]),
        ("ranks_text", ["--ranks", "0,1"]),
    ):
        runs: dict[str, list[dict]] = {p: [] for p, _ in variants}
        for _ in range(args.repeat):
            for prefix, env in variants:
                r = timed(cli("diff", str(args.capture), "--pass", args.pass_name, "--color", "never", *extra), env=env)
                if r["rc"] != 0:
                    raise SystemExit(f"{prefix}diff {label} failed (exit {r['rc']})")
                runs[prefix].append(r)
        outs = {p: {r["out"] for r in rs} for p, rs in runs.items()}
        if any(len(o) != 1 for o in outs.values()):
            raise SystemExit(f"diff {label}: the output depends on the run")
        if len(set().union(*outs.values())) != 1:
            if not args.base_may_differ:
                raise SystemExit(f"diff {label}: the output depends on the code (base)")
            res[f"{label}_same_as_base"] = False
        elif base is not None:
            res[f"{label}_same_as_base"] = True
        for prefix, rs in runs.items():
            b = min(rs, key=lambda r: r["s"])
            res[f"{prefix}{label}"] = {"s": round(b["s"], 3), "rss_mb": round(b["rss_mb"])}
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
