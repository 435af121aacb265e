"""Whether the node-table digests a capture recorded are the ones the reader takes: per capture,
its tables, how many carry a digest (`norm`), how many the reader takes (its own rewrites for the
graph are the recorded ones), how many of those equal the reader's own hash of the table, and
the ranks-agree line the classes give.

    python -m benchmarks.digest_agreement CAPTURE...
"""

from __future__ import annotations

import argparse

from graphtrain_inspect.capture.shared import logformat, rank_tokens
from graphtrain_inspect.inspector.checks.rank_classes import RankClasses
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.stages import StageIndex


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captures", nargs="+")
    for path in ap.parse_args().captures:
        cap = open_capture(path)
        classes = RankClasses(cap, StageIndex(cap))
        tables = with_norm = taken = equal = 0
        for r in cap.ranks:
            log = cap.log_file(r)
            for gid in cap.graphs(r):
                rec = cap.graph_record(r, gid, logformat.NODES)
                if rec is None:
                    continue
                tables += 1
                with_norm += rank_tokens.NORM in rec.meta
                got = classes.recorded_digest(r, gid)
                if got is not None and log is not None:
                    taken += 1
                    text = log.payload_bytes(rec)
                    equal += text is not None and got == rank_tokens.table_digest(text, classes.rewrites(r, gid).pair)
        print(
            f"{path}: {tables} tables, {with_norm} with a digest, {taken} taken, {equal} equal to the reader's "
            f"hash; {classes.summary_line() or 'ranks not compared (one rank logged)'}"
        )


if __name__ == "__main__":
    main()
