"""`graphtrain-inspect report`'s page: one self-contained HTML file (styles and script inline,
nothing fetched, opens from file://) that shows what `check` finds, the diffs behind each finding,
a rank x stage grid of graph agreement, compile events and the capture's metadata.

    html = render(cap, jobs=1)

contents.gather collects it from the core (checks, diff, read); page.html.j2 lays it out, rendered
by Jinja2 with autoescape on, so names from a capture are text whatever they hold; code and diffs
are highlighted by pygments, which escapes them itself.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any


def render(cap: Any, jobs: int = 1) -> str:
    import jinja2

    from graphtrain_inspect.inspector.cli.html_report import contents, excerpts

    here = files(__name__)
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["safe_html"] = lambda html: jinja2.utils.markupsafe.Markup(html)  # pygments output only
    template = env.from_string(here.joinpath("page.html.j2").read_text(encoding="utf-8"))
    data = contents.gather(cap, jobs)
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
