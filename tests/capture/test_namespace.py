"""A training project whose own modules are called capture, inspector and samples: under
`graphtrain-inspect capture` it still imports its own, and the capture still records its passes.

Before the tool installed under one namespace, the capture's start-up in each worker did
`import capture` with the user's script folder first on sys.path, so a project's own capture.py
replaced the tool's (or the tool's replaced theirs): the capture changed what the training ran.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import orjson
import pytest

PROJECT = {
    "capture.py": "WHO = 'the project capture.py'\n",
    "inspector.py": "WHO = 'the project inspector.py'\n",
    "samples/__init__.py": "WHO = 'the project samples package'\n",
    "passes.py": textwrap.dedent(
        """
        import torch

        def double_relu(gm, example_inputs):
            for n in gm.graph.nodes:
                if n.target is torch.ops.aten.relu.default:
                    with gm.graph.inserting_after(n):
                        m = gm.graph.call_function(torch.ops.aten.mul.Tensor, (n, 2))
                    n.replace_all_uses_with(m, delete_user_cb=lambda u: u is not m)
            gm.recompile()
            return gm
        """
    ),
    "train.py": textwrap.dedent(
        """
        import os, sys
        import torch
        import torch.distributed as dist
        from torch.fx.experimental.proxy_tensor import make_fx

        import capture, inspector, samples
        import passes

        dist.init_process_group("gloo")
        # one write per line: the two ranks share the launcher's stdout (print writes each piece)
        sys.stdout.write(f"rank {dist.get_rank()} imports: {capture.WHO} | {inspector.WHO} | {samples.WHO}\\n")
        sys.stdout.flush()
        x = torch.randn(4)
        gm = make_fx(lambda x: torch.relu(x) + 1)(x)
        gm = passes.double_relu(gm, [x])
        same = gm(x).sum().item() == ((torch.relu(x) * 2) + 1).sum().item()
        sys.stdout.write(f"rank {dist.get_rank()} result {same}\\n")
        sys.stdout.flush()
        dist.destroy_process_group()
        """
    ),
}


@pytest.mark.slow
def test_project_modules_named_like_ours_are_theirs_and_still_captured(tmp_path):
    proj = tmp_path / "proj"
    for rel, text in PROJECT.items():
        (proj / rel).parent.mkdir(parents=True, exist_ok=True)
        (proj / rel).write_text(text)
    out = tmp_path / "cap"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["OMP_NUM_THREADS"] = "1"
    cmd = [
        sys.executable,
        "-m",
        "graphtrain_inspect.inspector.cli",
        "capture",
        "--out",
        str(out),
        "--pass",
        "passes:double_relu",
        "--no-inductor",
        "--",
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        "train.py",
    ]
    r = subprocess.run(cmd, cwd=proj, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    for rank in (0, 1):
        assert (
            f"rank {rank} imports: the project capture.py | the project inspector.py | the project samples package"
            in r.stdout
        )
        assert f"rank {rank} result True" in r.stdout
    ls = subprocess.run(
        [sys.executable, "-m", "graphtrain_inspect.inspector.cli", "ls", str(out), "--json"],
        cwd=proj,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ls.returncode == 0, ls.stderr
    doc = orjson.loads(ls.stdout)
    for rank in doc["ranks"]:
        assert [(p["name"], p["status"], p["before"]["nodes"], p["after"]["out"]["nodes"]) for p in rank["passes"]] == [
            ("double_relu", "ok", 4, 5)
        ]
    assert [rank["rank"] for rank in doc["ranks"]] == [0, 1]
