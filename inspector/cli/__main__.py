"""`python -m graphtrain_inspect.inspector.cli ...`: the same as the `graphtrain-inspect` command.

`python -m` puts the current directory first on `sys.path`; the command does not search it for its
own modules (a `rapidfuzz.py` in a capture one runs replay inside would be imported as the tool's),
so that entry is taken off before anything else is imported, as the console script has it."""

import os
import sys

if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from graphtrain_inspect.inspector.cli.main import main

sys.exit(main())
