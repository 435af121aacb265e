"""Text from a capture is data: no command sends a control character from a capture to the
terminal (pass names, exception messages, capture errors, source lines, manifest fields), JSON
keeps the text exact, and the commands' own colours still work and cannot be forged."""

from __future__ import annotations

import json
import re
import sys

import pytest

from graphtrain_inspect.capture.shared import logformat, terminal_text
from graphtrain_inspect.capture.shared.terminal_text import Style
from tests.capture_utils import run_cli
from tests.tui_support import EVERY_ESCAPED, HOSTILE, hostile_capture

# every C0 control but newline and tab, DEL, every C1 control, the bidi and invisible format
# controls: written out here, not taken from the module under test
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def test_the_escaped_set():
    assert set(RAW.findall(EVERY_ESCAPED)) == set(EVERY_ESCAPED) and len(EVERY_ESCAPED) == 29 + 33 + 15
    assert not RAW.findall(terminal_text.escape_controls(EVERY_ESCAPED + "\x00"))
    assert terminal_text.escape_controls("bidi\u202eexe.txt\u2066\ufeff") == "bidi\\u202eexe.txt\\u2066\\ufeff"
    assert terminal_text.escape_controls("a\tb\nc\u00e9\u4e2d") == "a\tb\nc\u00e9\u4e2d"  # text is left alone


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    # the capture's own directory name holds every escaped character too: it is in every
    # command's messages (replay's refusal, trust's note, reading problems)
    d = tmp_path_factory.mktemp("hostile") / ("cap" + EVERY_ESCAPED)
    hostile_capture(d)
    m = json.loads((d / logformat.MANIFEST_NAME).read_text())
    m.update(user="eve\x1b[2J", host="box\x1b]0;t\x07", command_line="train\r\x1b[31m.py")
    (d / logformat.MANIFEST_NAME).write_text(json.dumps(m))
    return d


COMMANDS = [
    ["ls"],
    ["ls", "--all"],
    ["ls", "--verify"],
    ["check"],
    ["check", "--severity", "info"],
    ["diff", "--pass", "#1", "--ranks", "0,1"],
    ["diff", "--pass", "#0"],
    ["diff", "--pass", "#0", "--text"],
    ["diff", "--pass", "no-such\x1b[2J"],
    ["replay", "--pass", "#1", "--batch"],
    ["replay", "--pass", "#1", "--batch", "--trust"],
    ["replay", "--pass", "#2", "--batch", "--trust"],
    ["trust"],
]


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: " ".join(c).replace("\x1b", "ESC"))
def test_no_raw_control_character_reaches_the_terminal(hostile, cmd):
    r = run_cli(
        cmd[0],
        str(hostile),
        *cmd[1:],
        "--color" if cmd[0] in ("ls", "check", "diff") else "",
        *(["never"] if cmd[0] in ("ls", "check", "diff") else []),
    )
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out
    assert not RAW.findall(out), (cmd, [m for m in RAW.findall(out)], out[-2000:])


def test_the_escapes_are_shown_not_dropped(hostile):
    r = run_cli("ls", str(hostile), "--color", "never")
    assert "bidi\\u202eexe.txt" in r.stdout and "\\x07\\x08" in r.stdout and "\\u2069\\ufeff" in r.stdout
    assert "remove_dead_code\\x1b[2J\\x1b[31mRED" in r.stdout
    assert "shard\\x1b]0;pwned-title\\x07_rows" in r.stdout
    assert "boom\\x0dFAKE: no findings\\x08\\u009b2J" in r.stdout
    assert "bad shape\\x1b[2J\\x1b]0;pwned\\x07 at" in r.stdout  # the exception and the capture error
    r = run_cli("check", str(hostile), "--color", "never")
    assert r.returncode == 1 and "s = z[rank]  # \\x1b[2J\\x1b[31mRED" in r.stdout, r.stdout


def test_colours_stay_and_cannot_be_forged(hostile):
    r = run_cli("check", str(hostile), "--color", "always")
    assert "\x1b[31m" in r.stdout  # the ERROR's own colour
    assert "\x1b[2J" not in r.stdout and "\x1b]" not in r.stdout and "\\x1b[2J\\x1b[31mRED" in r.stdout
    # only this process's marks become escape codes: not a capture's text, nor another process's marks
    assert terminal_text.to_terminal(Style(True)("x", "red")) == "\x1b[31mx\x1b[0m"
    assert terminal_text.to_terminal("\x1b[31mx") == "\\x1b[31mx"
    assert terminal_text.to_terminal("a\tb\nc\r\x7f\x85") == "a\tb\nc\\x0d\\u007f\\u0085"


def _strings(x):
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from _strings(v)


def test_json_keeps_the_text_exact(hostile):
    for cmd in (["ls"], ["check"], ["diff", "--pass", "#1", "--ranks", "0,1"]):
        r = run_cli(cmd[0], str(hostile), *cmd[1:], "--json")
        assert not RAW.findall(r.stdout), cmd
        text = "\n".join(_strings(json.loads(r.stdout)))
        assert HOSTILE["pass2"] in text, cmd
        if cmd[0] == "ls":
            assert HOSTILE["raise"] in text and HOSTILE["message"].split("\r")[0] in text  # ls keeps its first line
        if cmd[0] == "check":
            assert "\x1b[2J\x1b[31mRED" in text


def test_capture_summary_escapes(tmp_path):
    """The launcher's own lines (its summary, its errors) go through the same layer."""
    prog = (
        "import torch, torch.fx\n"
        "from graphtrain_inspect.capture import record_pass\n"
        "gm = torch.fx.symbolic_trace(lambda x: x + 1)\n"
        f"def p(gm, *a):\n    raise ValueError({HOSTILE['message']!r})\n"
        f"p.__name__ = {HOSTILE['pass']!r}\n"
        "try:\n    record_pass(p)(gm)\nexcept ValueError:\n    pass\n"
    )
    r = run_cli("capture", "--out", str(tmp_path / "c"), "--no-inductor", "--", sys.executable, "-c", prog)
    assert r.returncode == 0, r.stderr
    assert not RAW.findall(r.stderr + r.stdout), r.stderr
    r = run_cli("ls", str(tmp_path / "c"), "--color", "never")
    assert "\\x1b[2J\\x1b[31mRED" in r.stdout and "raised builtins.ValueError: bad shape\\x1b[2J" in r.stdout, r.stdout


def test_sarif_message_text_is_escaped(hostile, tmp_path):
    sarif = tmp_path / "out.sarif"
    r = run_cli("check", str(hostile), "--severity", "info", "--sarif", str(sarif))
    assert r.returncode == 1, r.stderr
    doc = json.loads(sarif.read_text())
    run = doc["runs"][0]
    texts = [res["message"]["text"] for res in run["results"]]
    texts += [n["message"]["text"] for inv in run["invocations"] for n in inv["toolExecutionNotifications"]]
    texts += [
        loc["physicalLocation"]["region"]["snippet"]["text"]
        for res in run["results"]
        for loc in res.get("locations", [])
        if "snippet" in loc["physicalLocation"].get("region", {})
    ]
    assert texts and not RAW.findall("\n".join(texts)), [t for t in texts if RAW.search(t)]
    assert any("\\x1b[2J" in t for t in texts), texts
