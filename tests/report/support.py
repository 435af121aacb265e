"""What the report's tests share: a capture whose text is hostile HTML, and reading the page's
summary lines back."""

from __future__ import annotations

import html
import re
from pathlib import Path

from tests.capture_utils import run_cli

# Markup a capture may hold where it holds text: a script ending the page's own script, an
# attribute breakout with an event handler, an entity, a comment opener. Each sets window.pwned
# if the page ever runs it.
HTML_HOSTILE = {
    "pass": "remove_dead_code</script><script>window.pwned=1</script>",
    "pass2": 'shard"><img src=x onerror="window.pwned=2">_rows',
    "raise": "boom<!-- &amp; <b>bold</b>",
    "message": "bad <svg onload=window.pwned=3> shape",
    "source": 'File "/work/model<script>window.pwned=4</script>.py", line 7, in forward | s = z[rank]  # <i>x</i>',
}


def html_hostile_capture(directory) -> str:
    """tests.tui_support's 2-rank rank-baked capture (its graphs, the real record format) with
    markup in its pass names, exception message, capture error and the finding's source line."""
    from tests.small_captures import CaptureWriter, mesh_rank_table
    from tests.tui_support import _graphs

    w = CaptureWriter(directory, world_size=2)
    for r in range(2):
        rw = w.rank(r, rank_table=mesh_rank_table(r, (2,), ("dp",)), own_device="cpu")
        g0, g1, g2 = _graphs(r)
        for n in g2.graph.nodes:
            if n.op == "call_function" and "select" in str(n.target):
                n.meta["stack_trace"] = HTML_HOSTILE["source"].replace(" | ", "\n    ")
        rw.apply(HTML_HOSTILE["pass"], g0, g1)
        rw.apply(HTML_HOSTILE["pass2"], g1, g2)
        rw.apply(HTML_HOSTILE["raise"], g2, None, exception=ValueError(HTML_HOSTILE["message"]))
        rw.error("wrap", HTML_HOSTILE["message"])
        rw.end()
    return w.finish()


def write_report(capture: Path | str, out: Path, *extra: str) -> Path:
    r = run_cli("report", str(capture), "-o", str(out), "-j", "1", *extra)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"wrote {out}"), r.stdout
    return out


_HEADLINE = re.compile(
    r'<div class="headline-set" data-grading="([\w-]+)" data-info="(\d)"[^>]*>\s*'
    r'<div class="headline[^"]*">([^<]*)</div>\s*(?:<div class="more">([^<]*)</div>)?'
)


def headlines(page: str) -> dict[tuple[str, bool], tuple[str, str | None]]:
    """(grading, info shown) -> (headline, the line counting info findings not shown)."""
    return {
        (g, i == "1"): (html.unescape(head), html.unescape(more) if more else None)
        for g, i, head, more in _HEADLINE.findall(page)
    }


def check_lines(capture: Path | str, *args: str) -> tuple[str, str | None]:
    """`check`'s own summary line and its 'N info findings not shown' line (or None)."""
    r = run_cli("check", str(capture), "-j", "1", *args)
    assert r.returncode in (0, 1), r.stderr
    lines = r.stdout.rstrip("\n").splitlines()
    if "info finding" in lines[-1] and "not shown" in lines[-1]:
        return lines[-2], lines[-1]
    return lines[-1], None
