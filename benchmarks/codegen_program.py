"""A torch.compile workload for benchmarks/codegen_overhead.py: an MLP of N blocks, forward and
backward compiled by Inductor (CPU, C++ kernels), timed by itself (first call = compile)."""

import argparse
import json
import resource
import time

import torch


class Block(torch.nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.a = torch.nn.Linear(d, 2 * d)
        self.b = torch.nn.Linear(2 * d, d)
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, x):
        return x + self.b(torch.nn.functional.gelu(self.a(self.norm(x))) * 0.5)


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the C++ compiler runs)."""
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + ch.ru_utime + ch.ru_stime


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--timings-json", required=True)
    a = p.parse_args()
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[Block(64) for _ in range(a.blocks)])
    step = torch.compile(lambda x: net(x).square().mean())
    x = torch.randn(32, 64)
    t0, c0 = time.perf_counter(), _cpu()
    step(x).backward()
    compile_s, compile_cpu_s = time.perf_counter() - t0, _cpu() - c0
    later = []
    for _ in range(5):
        t = time.perf_counter()
        step(x).backward()
        later.append(time.perf_counter() - t)
    with open(a.timings_json, "w") as f:
        json.dump({"compile_s": compile_s, "compile_cpu_s": compile_cpu_s, "later_s": sorted(later)[2]}, f)


if __name__ == "__main__":
    main()
