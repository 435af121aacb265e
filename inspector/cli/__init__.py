"""cli: the `graphtrain-inspect` command, one module per subcommand (ls, diff, check, replay, tui).

Commands call the stages (read, diff, checks, replay); nothing below imports cli. `tui.py` is the
launcher of the Textual app and the only place the inspector reaches the tui package (lazily, when
that command runs).
"""

from graphtrain_inspect.inspector.cli.main import main

__all__ = ["main"]
