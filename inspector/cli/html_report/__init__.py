"""`graphtrain-inspect report`'s page: one self-contained HTML file (styles and script inline,
nothing fetched, opens from file://) that shows what `check` finds, the diffs behind each finding,
a rank x stage grid of graph agreement coloured by the findings in it, a picture of each rank's
compile time, compile events and the capture's metadata.

    html = render(cap, jobs=1)

contents.gather collects it from the core (checks, diff, read); page.html.j2 lays it out, rendered
by Jinja2 with autoescape on, so names from a capture are text whatever they hold; code and diffs
are highlighted by pygments, which escapes them itself.
"""

from __future__ import annotations

import os
import re
from importlib.resources import files
from pathlib import Path
from typing import Any


def render(cap: Any, jobs: int = 1, graphs_dir: Path | None = None, reports: Any = None) -> str:
    """The page; with `graphs_dir`, the whole graphs behind its diffs are written there too (one
    file of FX code each) and linked from the diffs, relative to the page's folder. `reports`: the
    checks' reports per rank and shared (contents.GRADINGS), when already made."""
    import jinja2

    from graphtrain_inspect.inspector.cli.html_report import contents, excerpts

    here = files(__name__)
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["safe_html"] = lambda html: jinja2.utils.markupsafe.Markup(html)  # pygments output only
    template = env.from_string(here.joinpath("page.html.j2").read_text(encoding="utf-8"))
    data = contents.gather(cap, jobs, reports)
    data["graph_links"] = write_graphs(cap, data["diffs"], graphs_dir) if graphs_dir is not None else {}
    css = here.joinpath("page.css").read_text(encoding="utf-8") + "\n" + excerpts.css()
    return template.render(
        **data,
        css=jinja2.utils.markupsafe.Markup(css),
        script=jinja2.utils.markupsafe.Markup(here.joinpath("page.js").read_text(encoding="utf-8")),
        version=_version(),
    )


def _version() -> str:
    from graphtrain_inspect.inspector.cli.main import version

    return version()


def write_graphs(cap: Any, diffs: list[dict], folder: Path) -> dict[tuple[int, str], str]:
    """Each graph the diffs name, as its FX code in `folder` (r<rank>-<gid>.py); the links by
    (rank, gid). A graph id that is not a plain name (a damaged or hostile log) gets no file. Each
    file is made anew through the folder's descriptor (`write_new`): a link planted in the folder
    (a report written into a capture someone else can write) is replaced, never written through,
    and a linked folder is refused."""
    from graphtrain_inspect.inspector.cli.common import open_output_dir, write_new

    dfd = open_output_dir(str(folder))
    links: dict[tuple[int, str], str] = {}
    try:
        for d in diffs:
            for rank, gid in d.get("graphs") or []:
                if (rank, gid) in links or not re.fullmatch(r"[A-Za-z0-9_]{1,64}", gid):
                    continue
                code = cap.graph_code(rank, gid)
                if code is None:
                    continue
                name = f"r{rank}-{gid}.py"
                write_new(name, code.encode("utf-8"), dfd)
                links[(rank, gid)] = f"{folder.name}/{name}"
    finally:
        os.close(dfd)
    return links
