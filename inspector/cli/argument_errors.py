"""Argument errors: the error first, then a short usage, then where the full help is.

argparse prints the whole usage (for `check`, eight lines naming every check id) before the
one line that says what was wrong; a user reads the first line."""

from __future__ import annotations

import argparse
import difflib
import sys
from typing import Any, NoReturn


def nearest(word: str, choices: list[str]) -> str | None:
    """The choice a typo most likely meant (difflib's closest above 0.6), or None."""
    found = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return found[0] if found else None


class ErrorFirstParser(argparse.ArgumentParser):
    """An ArgumentParser (and, through add_subparsers, every subcommand's) whose errors end the
    command with exit status 2 as argparse's do, worded error first."""

    def short_usage(self) -> str:
        positionals = [str(a.metavar or a.dest) for a in self._actions if not a.option_strings]
        return " ".join([f"usage: {self.prog} [options]", *(f"[{p}]" for p in positionals)])

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # argparse's own test of a choice, with the nearest choice named: `graphtrain-inspect chek`
        choices = action.choices
        if choices is not None and isinstance(value, str) and value not in choices:
            guess = nearest(value, [str(c) for c in choices])
            if guess is not None:
                name = argparse._get_action_name(action) or "argument"
                self.error(f"argument {name}: invalid choice: {value!r} (did you mean {guess!r}?)")
        super()._check_value(action, value)

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: {message}\n{self.short_usage()}  ({self.prog} --help lists the options)\n")
        sys.exit(2)
