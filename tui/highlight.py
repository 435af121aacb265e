"""Syntax colours for one line of FX code at a time, from the app's theme.

Graph code is highlighted line by line (a view renders only the lines on screen), with pygments'
Python lexer and styles taken from the theme's CSS variables, so every Textual theme reads well.
`Palette.for_app(app)` is cached per theme.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pygments.lexers.python import PythonLexer
from pygments.token import Comment, Keyword, Name, Number, Operator, String, Token
from rich.style import Style

_LEXER = PythonLexer(stripnl=False, ensurenl=False)

# token type -> palette entry
_TOKEN_KEYS: list[tuple[Any, str]] = [
    (Comment, "comment"),
    (String, "string"),
    (Number, "number"),
    (Keyword.Constant, "constant"),
    (Keyword, "keyword"),
    (Name.Builtin, "builtin"),
    (Name.Class, "class"),
    (Name.Function, "function"),
    (Operator, "operator"),
]


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


@lru_cache(maxsize=8192)
def token_spans(line: str) -> tuple[tuple[int, int, str], ...]:
    """(start, end, palette key) of the highlighted tokens of one line of Python."""
    out = []
    for start, ttype, value in _LEXER.get_tokens_unprocessed(line):
        if not value:
            continue
        key = None
        t = ttype
        while t is not None and t is not Token:
            for tt, k in _TOKEN_KEYS:
                if t is tt:
                    key = k
                    break
            if key is not None:
                break
            t = t.parent
        if key is not None and key != "operator":
            out.append((start, start + len(value), key))
    return tuple(out)
