"""The TUI rank-diff view's line per rank ("rank 3: agrees", "rank 5: differs (...)"): the time
`CaptureSession.rank_diff` takes to make them for one pass's output, as the view does, in process.
With `--view pass`: the time `CaptureSession.pass_diff` takes to make the pass diff view of that
pass's output on the lowest rank, and its line counts.

    python -m benchmarks.tui_rank_lines CAPTURE [--pass NAME] [--repeat 3] [--view rank|pass]

With another checkout's code first on PYTHONPATH (benchmarks.scale_bench.base_env's layout) the
same script times that code. Prints the best time, the number of lines and the first three.
"""

from __future__ import annotations

import argparse
import os
import time

from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.tui.session import CaptureSession, Place


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture")
    ap.add_argument("--pass", dest="pass_name", default="tag_activation_checkpointing")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--view", choices=["rank", "pass"], default="rank")
    args = ap.parse_args()
    best, status = float("inf"), []
    for _ in range(args.repeat):
        session = CaptureSession(open_capture(args.capture))  # fresh: no diff cached from the run before
        # the rank diff: the second rank against the first; the pass diff: on the first rank
        rank = session.cap.ranks[1 if args.view == "rank" else 0]
        seq = next(p.seq for p in session.cap.passes(rank) if p.name == args.pass_name)
        t0 = time.perf_counter()
        if args.view == "pass":
            got = session.pass_diff(Place(rank, 0, seq, "out"))
            status = [f"lines {got.model.counts}" if got is not None else "no diff"]
        else:
            _, status = session.rank_diff(Place(rank, 0, seq, "out"), session.cap.ranks[0])
        best = min(best, time.perf_counter() - t0)
    print(f"{best:.2f} s (best of {args.repeat}, load {os.getloadavg()[0]:.1f}), {len(status)} lines: {status[:3]}")


if __name__ == "__main__":
    main()
