"""Running real captures in tests, and reading their records back with the format module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from graphtrain_inspect.capture import logformat

ROOT = Path(__file__).resolve().parents[1]


def torchrun(nproc: int, *module_and_args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", "-m", *module_and_args]


def run_cli(*args: str, timeout: int = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.setdefault("OMP_NUM_THREADS", "1")
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in e.get("PYTHONPATH", "").split(os.pathsep) if p]])
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "graphtrain_inspect.inspector.cli", *args], cwd=ROOT, env=e, capture_output=True, text=True, timeout=timeout)


def run_plain(cmd: list[str], timeout: int = 300) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.setdefault("OMP_NUM_THREADS", "1")
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in e.get("PYTHONPATH", "").split(os.pathsep) if p]])
    return subprocess.run(cmd, cwd=ROOT, env=e, capture_output=True, text=True, timeout=timeout)


def loss_lines(stdout: str) -> list[str]:
    return sorted(l for l in stdout.splitlines() if " loss " in l)


def records(log: Path) -> list[tuple[str, dict, object]]:
    """(kind, envelope, payload) of every record in a log, payloads decoded and md5-checked."""
    out = []
    for _, line, payload_lines in logformat.split_records(log.read_bytes()):
        env = logformat.parse_envelope_line(line)
        out.append((logformat.record_kind(env), env, logformat.decode_payload(payload_lines, env)))
    return out


def payloads(log: Path, kind: str) -> list:
    return [p for k, _, p in records(log) if k == kind]
