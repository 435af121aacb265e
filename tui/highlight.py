"""Syntax colours for one line of FX code at a time, from the app's theme.

Graph code is highlighted line by line (a view renders only the lines on screen) by one regular
expression made for FX code (pygments' Python lexer gives the same classes, ten times slower),
with styles taken from the theme's CSS variables, so every Textual theme reads well.
`Palette.for_app(app)` is cached per theme. `paint` turns a line and its styled ranges into
segments directly (no rich Text per line).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rich.segment import Segment
from rich.style import Style


@dataclass(frozen=True)
class Palette:
    text: Style
    comment: Style
    string: Style
    number: Style
    constant: Style
    keyword: Style
    builtin: Style
    klass: Style
    function: Style
    operator: Style
    gutter: Style
    cursor: Style
    match: Style
    node: Style  # the node a jump landed on
    added: Style
    removed: Style
    added_chars: Style
    removed_chars: Style
    fold: Style
    header: Style

    def token(self, key: str) -> Style:
        return getattr(self, "klass" if key == "class" else key)

    @classmethod
    def for_app(cls, app: Any) -> "Palette":
        variables = app.get_css_variables()
        return _palette(app.current_theme.name, tuple(sorted(variables.items())))


def _c(variables: dict[str, str], *names: str, default: str = "default") -> str:
    """The first of `names` that is a colour, alpha blended onto the background, as #rrggbb."""
    from textual.color import Color, ColorParseError

    try:
        back = Color.parse(variables.get("background") or "#000000")
    except ColorParseError:
        back = Color(0, 0, 0)
    for n in names:
        v = variables.get(n)
        if not v:
            continue
        try:
            c = Color.parse(str(v))
        except ColorParseError:
            continue
        if c.a < 1:
            c = back.blend(c.with_alpha(1.0), c.a)
        return c.hex6
    return default


@lru_cache(maxsize=16)
def _palette(theme: str, items: tuple) -> Palette:
    v = dict(items)

    def bg(*names: str) -> Style:
        return Style(bgcolor=_c(v, *names))

    return Palette(
        text=Style(color=_c(v, "foreground")),
        comment=Style(color=_c(v, "text-muted", "foreground-darken-2", "foreground"), italic=True),
        string=Style(color=_c(v, "text-success", "success")),
        number=Style(color=_c(v, "text-warning", "warning")),
        constant=Style(color=_c(v, "text-accent", "accent"), bold=True),
        keyword=Style(color=_c(v, "text-accent", "accent")),
        builtin=Style(color=_c(v, "text-accent", "accent")),
        klass=Style(color=_c(v, "text-warning", "warning"), bold=True),
        function=Style(color=_c(v, "text-primary", "primary")),
        operator=Style(color=_c(v, "foreground")),
        gutter=Style(color=_c(v, "text-muted", "foreground-darken-3", "foreground"), dim=True),
        cursor=bg("block-cursor-blurred-background", "boost", "surface-lighten-1"),
        match=Style(bgcolor=_c(v, "warning-muted", "warning"), underline=True),
        node=Style(bgcolor=_c(v, "primary-muted", "primary"), bold=True),
        added=bg("success-muted", "success-darken-3"),
        removed=bg("error-muted", "error-darken-3"),
        added_chars=Style(bgcolor=_c(v, "success-darken-1", "success"), bold=True),
        removed_chars=Style(bgcolor=_c(v, "error-darken-1", "error"), bold=True),
        fold=Style(color=_c(v, "text-secondary", "secondary"), italic=True),
        header=Style(color=_c(v, "text-primary", "primary"), bold=True),
    )


# One pass of one regular expression per line: FX code is a small part of Python (assignments
# with a type-annotation string, calls of dotted targets, comments), and pygments' full lexer
# costs ten times more per line than the screen can afford at 50,000 lines.
_TOKEN_RE = re.compile(
    r"""(?P<comment>\#.*$)"""
    r"""|(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')"""
    r"""|(?P<keyword>\b(?:class|def|return|lambda|and|or|not|in|is|if|else|for|while|with|as|import|from)\b)"""
    r"""|(?P<constant>\b(?:None|True|False|self)\b)"""
    r"""|(?P<builtin>\b(?:torch|operator|device|getattr|len|int|float|bool|slice|range)\b(?!\s*[:=]))"""
    r"""|(?P<number>(?<![\w.])-?\d+(?:\.\d*)?(?:e[+-]?\d+)?\b|\binf\b|\bnan\b)"""
    r"""|(?P<function>\b[A-Za-z_]\w*(?=\())"""
    r"""|(?P<klass>(?<=^class )[A-Za-z_<][\w<>]*)""",
    re.M,
)


@lru_cache(maxsize=16384)
def token_spans(line: str) -> tuple[tuple[int, int, str], ...]:
    """(start, end, palette key) of the highlighted tokens of one line of FX code."""
    out = []
    for m in _TOKEN_RE.finditer(line):
        key = m.lastgroup
        if key is not None:
            out.append((m.start(), m.end(), "class" if key == "klass" else key))
    return tuple(out)


def paint(text: str, base: Style, layers: list[list[tuple[int, int, Style]]]) -> list[Segment]:
    """Segments of `text`: `base` everywhere, then each layer's (start, end, style) ranges on top,
    later layers over earlier ones (tokens, then diff marks, then search matches, then the node)."""
    n = len(text)
    cuts = {0, n}
    ranges = []
    for depth, layer in enumerate(layers):
        for s, e, st in layer:
            s, e = max(0, s), min(n, e)
            if e > s:
                cuts.add(s)
                cuts.add(e)
                ranges.append((s, e, depth, st))
    if not ranges:
        return [Segment(text, base)] if text else []
    points = sorted(cuts)
    out = []
    combine = Style.combine
    for a, b in zip(points, points[1:]):
        styles = [st for s, e, d, st in sorted((r for r in ranges if r[0] <= a and r[1] >= b), key=lambda r: r[2])]
        out.append(Segment(text[a:b], combine([base, *styles]) if styles else base))
    return out
