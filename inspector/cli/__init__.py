"""cli: the `graphtrain-inspect` command, one module per subcommand (ls, diff, check, replay, tui).

Commands call the stages (read, diff, checks, replay); nothing below imports cli. `tui.py` is the
launcher of the Textual app and the only place the inspector reaches the tui package (lazily, when
that command runs).

May import (of ours): `capture.shared`, `capture`, `inspector.errors`, `inspector.read`,
`inspector.diff`, `inspector.checks`, `inspector.replay`; `tui` only lazily, from `tui.py`.
"""

from graphtrain_inspect.inspector.cli.main import main

__all__ = ["main"]
