"""Argument errors: the error first, then a short usage, then where the full help is.

argparse prints the whole usage (for `check`, eight lines naming every check id) before the
one line that says what was wrong; a user reads the first line."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class ErrorFirstParser(argparse.ArgumentParser):
    """An ArgumentParser (and, through add_subparsers, every subcommand's) whose errors end the
    command with exit status 2 as argparse's do, worded error first."""

    def short_usage(self) -> str:
        positionals = [str(a.metavar or a.dest) for a in self._actions if not a.option_strings]
        return " ".join([f"usage: {self.prog} [options]", *(f"[{p}]" for p in positionals)])

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: {message}\n{self.short_usage()}  ({self.prog} --help lists the options)\n")
        sys.exit(2)
