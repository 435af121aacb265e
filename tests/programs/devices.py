"""Each rank's device and process-group backend, as the programs here choose them."""

from __future__ import annotations

import os

import torch


def rank_device(cuda: bool) -> tuple[torch.device, str]:
    """(device, backend) of this rank: with `cuda`, cuda:LOCAL_RANK (made the current device) and
    NCCL; else the CPU and gloo."""
    if not cuda:
        return torch.device("cpu"), "gloo"
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    return device, "nccl"
