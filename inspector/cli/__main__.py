"""`python -m graphtrain_inspect.inspector.cli ...`: the same as the `graphtrain-inspect` command."""

import sys

from graphtrain_inspect.inspector.cli.main import main

sys.exit(main())
