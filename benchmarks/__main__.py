"""One entry point for every case: `python -m benchmarks NAME [args]`, `python -m benchmarks --list`.

Each case is a function of a module here, which reads its own arguments (`NAME --help`); the one
timing helper they share is benchmarks/timing.py. The GPU hosts' shell scripts are under gpu/.
"""

from __future__ import annotations

import importlib
import sys
from typing import NamedTuple


class Case(NamedTuple):
    name: str
    target: str  # module:function
    prints: str  # the figure it prints


CASES = [
    Case("scale-captures", "scale:make_main", "the workloads: captures of 5k-200k-node graphs, 2-8 ranks"),
    Case("scale", "scale:main", "index MB/s, `ls`, `check`, diffs and memory at scale, beside tlparse"),
    Case("check", "commands:check_main", "`check -j N` wall and peak RSS, as a multiple of tlparse's"),
    Case("diff", "commands:diff_main", "`diff --pass P` and `--ranks 0,1` wall and peak RSS"),
    Case("report-size", "commands:report_main", "`report`'s page size, wall and peak RSS"),
    Case("compare", "commands:compare_main", "`compare` of two 30k-node runs: the graphs' part and the command"),
    Case("capture-overhead", "capture_overhead:overhead_main", "the sample's compile phase under capture, x plain"),
    Case("codegen-overhead", "capture_overhead:codegen_main", "Inductor's compile with its code kept, x plain"),
    Case("record-cost", "capture_overhead:record_cost_main", "the capture's records per node table: ms and size"),
    Case("torch-trace-cost", "capture_overhead:torch_trace_cost_main", "capture --torch-trace: seconds and bytes"),
    Case("torchtitan-capture", "torchtitan_capture:main", "graph_trainer's passes under capture, x plain"),
    Case("tui", "tui:main", "TUI: first painted tree, key to repaint, memory on a 1 GB capture"),
    Case("worlds", "worlds:worlds_main", "simulated worlds: capture and `check` time and memory per world"),
    Case("torchtitan-worlds", "worlds:torchtitan_worlds_main", "graph_trainer in simulated worlds"),
    Case("simulated-vs-real", "worlds:vs_real_main", "a real run against its simulated twin: SAME or what differs"),
    Case("world-synth", "worlds:synth_main", "a world of N ranks written from a real capture of a few"),
    Case("long-lines", "long_lines:main", "peak RSS of the commands and the TUI with a 500 MB line in a log"),
    Case("fuzz-reader", "fuzz_reader:main", "damaged logs read, records lost, crashes"),
    Case("verdicts", "verdicts_across_torch:main", "each test program's `check` verdict under this torch"),
]


def resolve(case: Case):
    module, function = case.target.split(":")
    return getattr(importlib.import_module(f"benchmarks.{module}"), function)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "--list"):
        width = max(len(c.name) for c in CASES)
        for c in CASES:
            print(f"{c.name:{width}}  {c.prints}")
        if not argv or argv[0] != "--list":
            print("\npython -m benchmarks NAME [args]; NAME --help for its arguments")
        return 0
    by_name = {c.name: c for c in CASES}
    case = by_name.get(argv[0])
    if case is None:
        print(f"benchmarks: no case {argv[0]!r} (python -m benchmarks --list)", file=sys.stderr)
        return 2
    sys.argv = [f"benchmarks {case.name}", *argv[1:]]
    result = resolve(case)()
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
