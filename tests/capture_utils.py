"""Running real captures in tests, and reading their records back with the format module."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from graphtrain_inspect.capture.shared import logformat

ROOT = Path(__file__).resolve().parents[1]


def torchrun(nproc: int, *module_and_args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        "-m",
        *module_and_args,
    ]


CLI = [sys.executable, "-m", "graphtrain_inspect.inspector.cli"]


def child_env(extra: dict | None = None) -> dict:
    """The environment of every program a test starts: this checkout first on PYTHONPATH (the
    tests' own programs import as tests.programs.*), one OpenMP thread (2 shared cores)."""
    e = dict(os.environ)
    e.setdefault("OMP_NUM_THREADS", "1")
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in e.get("PYTHONPATH", "").split(os.pathsep) if p]])
    if extra:
        e.update(extra)
    return e


def run_cli(*args: str, timeout: int = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=ROOT, env=child_env(env), capture_output=True, text=True, timeout=timeout)


def run_plain(cmd: list[str], timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=timeout)


def capture(
    out: Path | str, program: list[str], *options: str, timeout: int = 300, env: dict | None = None
) -> subprocess.CompletedProcess:
    """`graphtrain-inspect capture --out OUT [OPTIONS] -- PROGRAM`: one program run under capture,
    to its end (program: `torchrun(n, module, ...)` or any command line)."""
    return run_cli("capture", "--out", str(out), *options, "--", *program, timeout=timeout, env=env)


def start_capture(
    out: Path | str, program: list[str], *options: str, env: dict | None = None, stderr: int | None = subprocess.PIPE
) -> subprocess.Popen:
    """`capture` as `capture()` runs it, started in the background (the test acts while it runs);
    its output in .stdout (and .stderr, unless `stderr=subprocess.STDOUT`)."""
    return subprocess.Popen(
        [*CLI, "capture", "--out", str(out), *options, "--", *program],
        cwd=ROOT,
        env=child_env(env),
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        stdin=subprocess.DEVNULL,
    )


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


def tlparse_exe() -> str:
    """The tlparse of the dev extras (a binary installed beside this Python)."""
    import shutil

    found = shutil.which("tlparse") or str(Path(sys.executable).with_name("tlparse"))
    assert Path(found).exists(), "tlparse (dev extra) is not installed"
    return found


class Plant:
    """Pickles to `open(path, "w")`: loading it creates the file."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def rewrite_log(log: Path, replace: dict[bytes, bytes]) -> int:
    """Replace bytes inside record payloads, keeping each record's md5 right. Returns records changed."""
    lines = log.read_bytes().split(b"\n")
    out: list[bytes] = []
    changed = 0
    i = 0
    while i < len(lines):
        head = lines[i]
        i += 1
        if not head or head.startswith(b"\t"):
            out.append(head)
            continue
        body = []
        while i < len(lines) and lines[i].startswith(b"\t"):
            body.append(lines[i])
            i += 1
        new_body = body
        for a, b in replace.items():
            new_body = [l.replace(a, b) for l in new_body]
        if new_body != body:
            env = logformat.parse_envelope_line(head)
            old, new = env["has_payload"], hashlib.md5(b"\n".join(l[1:] for l in new_body)).hexdigest()
            head = head.replace(old.encode(), new.encode())
            changed += 1
        out.append(head)
        out.extend(new_body)
    log.write_bytes(b"\n".join(out))
    return changed


def drop_relu(gm, example_inputs=None):
    """A pass that changes its graph in place: every `torch.relu` (or aten's, in a traced graph) taken out."""
    import torch

    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target in (torch.relu, torch.ops.aten.relu.default):
            n.replace_all_uses_with(n.args[0])
            gm.graph.erase_node(n)
    gm.recompile()
    return gm


def every_finding(doc: dict) -> list[dict]:
    """`check --json`'s findings with each root's consequences after it: every finding made."""
    return [g for f in doc.get("findings") or [] for g in (f, *(f.get("consequences") or []))]
