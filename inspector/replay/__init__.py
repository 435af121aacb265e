"""replay: re-run one captured pass on the graph it received, and compare with what training produced.

Owns the plan (plan: which pass application, the trust rule, the verified blob, the rank's
environment; nothing there imports torch or unpickles), the replayer (replayer: loads a
GraphPickler blob, the only place the inspector unpickles), the capture as it would have been
(view), the outcome's words (report) and the REPL (repl).

May import (of ours): `capture.shared`, `capture`, `inspector.errors`, `inspector.read`,
`inspector.diff`, `inspector.checks`. Never cli or tui. torch only inside replayer and where a
graph is loaded.
"""
