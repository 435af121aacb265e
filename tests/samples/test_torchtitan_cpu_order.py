"""The torchtitan CPU set-up works whatever imported torchtitan first (a pass module
that imported torchtitan before it must not leave torchtitan's device `cuda`, where
`torch._C has no attribute '_cuda_setDevice'` follows)."""

from __future__ import annotations

import sys

import pytest

from tests.capture_utils import run_plain

pytest.importorskip(
    "torchtitan.tools.utils", reason="the torchtitan extra is not installed (pip install -e '.[torchtitan]')"
)

PROGRAM = """
import torch
import torchtitan.tools.utils as tu
import torchtitan.distributed.utils as du  # copies tu's device with `from ... import`
assert tu.device_type == "cuda" and du.device_module is torch.cuda, (tu.device_type, du.device_module)
from graphtrain_inspect.samples.torchtitan_cpu import use_cpu_device
use_cpu_device()
assert (tu.device_type, tu.device_module) == ("cpu", torch.cpu), tu.device_type
assert (du.device_type, du.device_module) == ("cpu", torch.cpu), du.device_type
du.device_module.set_device  # torchtitan's trainer calls it: on torch.cpu it exists
print("ok")
"""


def test_set_up_after_torchtitan_was_imported():
    r = run_plain([sys.executable, "-c", PROGRAM], timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]
