"""torchtitan's own entry point (`torchtitan.train`), run on this machine's CPU.

    python -m graphtrain_inspect.samples.torchtitan_cpu [--gti-bug NAME] --module graph_trainer.llama3 --config ...
        [torchtitan options]

torchtitan picks its device with `torch._utils._get_available_device_type() or "cuda"`: on a
CPU-only machine that is `cuda`, and its first `torch.cuda.set_device` fails. Here the device type
is `cpu` (torchtitan then asks for gloo), and the `torch.cuda` functions it calls get CPU answers (the machine's name
and memory, no
allocator statistics, device index 0). Nothing of
torchtitan is edited: this only answers what torch itself leaves unanswered for `cpu`, then runs
`torchtitan.train` as `python -m torchtitan.train` would.

`--gti-bug NAME` (taken out before torchtitan parses its options) imports
`samples.torchtitan_passes`, which registers the pass pipelines with a planted bug in
graph_trainer's own `PASS_PIPELINE_REGISTRY`; torchtitan selects one with
`--compile.pass_pipeline`.
"""

from __future__ import annotations

import os
import platform
import runpy
import sys
from types import SimpleNamespace
from typing import Any


def _mem_total_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def use_cpu_device() -> None:
    """Make torchtitan's device type `cpu` and give `torch.cpu` what its memory monitor asks."""
    import torch
    import torch._utils

    torch._utils._get_available_device_type = lambda: "cpu"
    cpu: Any = torch.cpu
    answers = {
        "get_device_name": lambda device=None: platform.processor() or platform.machine() or "cpu",
        "get_device_properties": lambda device=None: SimpleNamespace(total_memory=_mem_total_bytes(), name="cpu"),
        "memory_stats": lambda device=None: {},  # no caching allocator: torchtitan prints -1 for its peaks
        "reset_peak_memory_stats": lambda device=None: None,
        "empty_cache": lambda: None,
    }
    # torch.cpu.current_device() is the string "cpu"; torchtitan passes it on as an index
    # (`barrier(device_ids=[current_device()])` after the first step, a TypeError on gloo).
    cpu.current_device = lambda: 0
    import torch.distributed as dist

    if not hasattr(dist, "set_timeout"):
        # torchtitan 0.3.0 shortens every group's timeout after step 1 with
        # `torch.distributed.set_timeout`, public only in torch after 2.13 (its README asks for a
        # nightly); 2.13 has the same function under its private name.
        from torch.distributed import distributed_c10d

        private = getattr(distributed_c10d, "_set_pg_timeout", None)
        if private is not None:
            dist.set_timeout = private  # type: ignore[attr-defined]
    for name, fn in answers.items():
        if not hasattr(cpu, name):  # a later torch that has them keeps its own
            setattr(cpu, name, fn)
    _rebind_imported_torchtitan(torch)


def _rebind_imported_torchtitan(torch: Any) -> None:
    """torchtitan reads its device once, when `torchtitan.tools.utils` is imported, and other
    modules copy it (`from torchtitan.tools.utils import device_module, device_type`). Code that
    imported torchtitan before this set-up (a pass module of the user's, say) left `cuda` there,
    and the first `torch.cuda.set_device` fails: every copy made so far is pointed at `cpu`, so
    the order of imports does not matter."""
    for name, mod in list(sys.modules.items()):
        if not name.startswith("torchtitan") or mod is None:
            continue
        if getattr(mod, "device_type", None) == "cuda" and getattr(mod, "device_module", None) is torch.cuda:
            mod.device_type, mod.device_module = "cpu", torch.cpu


def main(argv: list[str]) -> None:
    bug = None
    if "--gti-bug" in argv:
        i = argv.index("--gti-bug")
        bug = argv[i + 1] if i + 1 < len(argv) else ""
        del argv[i : i + 2]
    use_cpu_device()
    if bug is not None:
        os.environ["GTI_TORCHTITAN_BUG"] = bug
        from graphtrain_inspect.samples import torchtitan_passes  # noqa: F401 - registers the pipelines

    sys.argv = ["torchtitan.train", *argv]
    runpy.run_module("torchtitan.train", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
