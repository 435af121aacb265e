"""`graphtrain-inspect report` on a large capture: the page's size (the bound: under 10 MB for a
30k-node 2-rank capture), how long it takes and its peak RSS.

    python -m benchmarks.report_size CAPTURE [-j N]

Make the capture with `python -m benchmarks.scale_captures --only 30k-2r-bug --no-torch-trace`
(ranks that differ from the trace on: every stage has a rank diff to cut down). Prints one line:
the page's bytes, the findings and diff sections in it, the wall seconds and the peak RSS; exits
1 when the page is 10 MB or more.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from benchmarks.scale_bench import cli, logs_of, timed, warm

LIMIT = 10_000_000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", type=Path)
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args()
    warm(logs_of(args.capture))
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        run = timed(cli("report", str(args.capture), "-o", str(page), "-j", str(args.jobs)))
        if run["rc"] != 0:
            sys.exit(f"report exited {run['rc']}")
        text = page.read_text(encoding="utf-8")
    size = len(text.encode())
    findings = text.count('<article class="finding')
    sections = text.count('<section class="diff"')
    print(
        f"{args.capture.name}: {size / 1e6:.2f} MB, {findings} findings, {sections} diff sections; "
        f"{run['s']:.1f} s, peak RSS {run['rss_mb']:.0f} MB"
    )
    sys.exit(0 if size < LIMIT else 1)


if __name__ == "__main__":
    main()
