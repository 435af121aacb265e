"""The README and the docs run as printed: their command blocks, run in order in one fresh folder
(the README first, then `DOCS` in order: a doc's blocks may use what the README's demo captured),
print what they show and exit as they say.

A fenced block is marked by the HTML comment on the line before it (invisible on GitHub):

- `<!-- readme-test: run -->`: every line is a command; or, where lines start with `$ `, those
  are the commands and the lines under each are what it prints (stdout), `...` standing for any
  lines and, inside a line, for any text. `; exit codes 0 1` gives each command's exit code in
  order (default: all 0).
- `<!-- readme-test: output -->`: what the last command run printed.
- `<!-- readme-test: skip (why) -->`: not run (set-up, a synopsis, the torchtitan extra).

Every block that holds a command, in the README or any doc, must carry one of them (checked
without running anything), so a new command block is either tested or says why not. Only paths
(the repository, the installed package, the folder the commands run in) and timings are normalized.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import graphtrain_inspect.samples
from tests.capture_utils import ROOT

README = ROOT / "README.md"
# the docs whose blocks run, after the README's, in this order; every other doc's blocks are skipped
DOCS = ["capture.md", "inspector.md", "large-jobs.md", "sharing.md"]
MARK = re.compile(r"^<!-- readme-test: (run|output|skip)\b(.*?)-->\s*$")
COMMAND = re.compile(r"^(\$ |graphtrain-inspect |python|\.venv/|torchrun |TORCH_TRACE=|tlparse )")
TIMING = re.compile(r"\b\d+(\.\d+)? ?(ms|s)\b")


@dataclass
class Block:
    line: int  # 1-based line of the opening fence
    mark: str | None
    arg: str
    lines: list[str] = field(default_factory=list)


def readme_blocks(text: str) -> list[Block]:
    blocks, mark, arg, current = [], None, "", None
    for i, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if current is not None:
            if stripped.startswith("```"):
                blocks.append(current)
                current = None
            else:
                current.lines.append(raw)
            continue
        if stripped.startswith("```"):
            current = Block(i, mark, arg)
            mark, arg = None, ""
            continue
        m = MARK.match(stripped)
        if m:
            mark, arg = m.group(1), m.group(2).strip()
        elif stripped:
            mark, arg = None, ""  # a marker belongs to the block right under it
    return blocks


@dataclass
class Step:
    command: str
    exit_code: int
    expected: list[str] | None  # None: what it prints is not shown
    where: str


def steps(blocks: list[Block], name: str = "README.md") -> list[Step]:
    out: list[Step] = []
    for b in blocks:
        if b.mark == "output":
            assert out, f"{name}:{b.line}: an output block before any command"
            out[-1].expected = b.lines
        elif b.mark == "run":
            codes = [int(c) for c in re.findall(r"\d+", b.arg.partition("exit codes")[2])]
            prompted = any(l.startswith("$ ") for l in b.lines)
            mine: list[Step] = []
            for l in b.lines:
                if prompted and not l.startswith("$ "):
                    mine[-1].expected = (mine[-1].expected or []) + [l]
                elif l.strip():
                    mine.append(Step(l.removeprefix("$ ").strip(), 0, None, f"{name}:{b.line}"))
            if codes:
                assert len(codes) == len(mine), f"{name}:{b.line}: {len(codes)} exit codes, {len(mine)} commands"
                for s, c in zip(mine, codes):
                    s.exit_code = c
            out.extend(mine)
    return out


def _pattern(expected: str) -> re.Pattern:
    return re.compile(".*".join(re.escape(part) for part in expected.split("...")) + r"\Z")


def matches(expected: list[str], actual: list[str]) -> bool:
    """`expected` against `actual` line by line; a line `...` takes any number of lines."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head.strip() == "...":
        return any(matches(rest, actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and bool(_pattern(head).match(actual[0])) and matches(rest, actual[1:])


def normalize(text: str, folders: list[str]) -> list[str]:
    for f in folders:
        text = text.replace(f.rstrip("/") + "/", "")
    return [TIMING.sub("T", l).rstrip() for l in text.splitlines()]


def documents() -> list[tuple[str, Path]]:
    """The README, then the docs whose blocks run, in order, then every other doc (all skipped)."""
    others = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name not in DOCS)
    return [("README.md", README)] + [(f"docs/{n}", ROOT / "docs" / n) for n in DOCS + others]


def all_steps() -> list[Step]:
    return [s for name, path in documents() for s in steps(readme_blocks(path.read_text()), name)]


def test_every_command_block_is_marked():
    unmarked = [
        f"{name}:{b.line}: {b.lines[0]}"
        for name, path in documents()
        for b in readme_blocks(path.read_text())
        if b.mark is None and b.lines and COMMAND.match(b.lines[0].strip())
    ]
    assert not unmarked, "command blocks with no readme-test marker:\n" + "\n".join(unmarked)
    assert all((ROOT / "docs" / n).is_file() for n in DOCS)
    # the README's demo and its repro, the coor demo; fsdp2, the look-around and the sample diff,
    # compile events, sim8, the sample report in the docs
    assert len(steps(readme_blocks(README.read_text()))) >= 10
    assert len(all_steps()) >= 24


def test_matches_takes_ellipses_for_lines_and_text():
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert matches(["x: ...  (y)"], ["x: long reason  (y)"])
    assert not matches(["a", "d"], ["a", "b", "d"])
    assert not matches(["a", "...", "e"], ["a", "b", "d"])


@pytest.mark.slow
def test_readme_runs_as_printed(tmp_path):
    """Set-up excepted, every command block in order: the demo captures (2 gloo ranks), the FSDP2 +
    torch.compile capture, the bundled samples, compile events, an 8-rank simulated capture."""
    todo = all_steps()
    samples = Path(graphtrain_inspect.samples.__file__)
    # the installed package's folder (samples/ in it), the repository, the folder the commands run in
    # (each as given and resolved); longest first, so that no folder's prefix is taken for it
    given = [samples.parents[1], samples.resolve().parents[1], ROOT, tmp_path, tmp_path.resolve()]
    folders = sorted({str(f) for f in given}, key=len, reverse=True)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    # `python -m tests.programs...` as from the repository's root, where the README runs them
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    env.setdefault("OMP_NUM_THREADS", "1")
    failures = []
    for s in todo:
        p = subprocess.run(
            s.command, shell=True, executable="/bin/bash", cwd=tmp_path, env=env, capture_output=True, text=True
        )
        if p.returncode != s.exit_code:
            failures.append(
                f"{s.where}: `{s.command}` exited {p.returncode}, README says {s.exit_code}\n{p.stderr[-2000:]}"
            )
            continue
        if s.expected is None:
            continue
        actual, expected = normalize(p.stdout, folders), normalize("\n".join(s.expected), [])
        if not matches(expected, actual):
            diff = "\n".join(difflib.unified_diff(expected, actual, "README", "printed", lineterm=""))
            failures.append(f"{s.where}: `{s.command}` printed something else:\n{diff}")
    assert not failures, "\n\n".join(failures)
