"""A node table row's `stack` is the user's line: the innermost frame outside torch itself."""

from __future__ import annotations

import os

import torch

from graphtrain_inspect.capture.graph_tables import last_frame

TORCH = os.path.dirname(os.path.abspath(torch.__file__))


def test_innermost_frame_outside_torch():
    stack = (
        '  File "/home/me/train.py", line 10, in forward\n    y = self.lin(x) * 2\n'
        f'  File "{TORCH}/nn/modules/linear.py", line 125, in forward\n    return F.linear(input, '
        "self.weight, self.bias)\n"
    )
    assert last_frame(stack) == 'File "/home/me/train.py", line 10, in forward | y = self.lin(x) * 2'


def test_only_torch_frames_keep_the_innermost():
    stack = (
        f'  File "{TORCH}/distributed/_functional_collectives.py", line 1239, in forward\n    return '
        "_maybe_wrap_tensor(input)\n"
    )
    assert (
        last_frame(stack) == f'File "{TORCH}/distributed/_functional_collectives.py", line 1239, in forward | return '
        "_maybe_wrap_tensor(input)"
    )
    assert last_frame("") is None and last_frame(None) is None
