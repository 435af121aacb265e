"""`graphtrain-inspect trust DIR`: vouch for a capture, so `replay` loads it without `--trust`.

Signs the capture's manifest and logs with this user's key (capture.shared.signing), as `capture` signs
its own at its end. For a capture someone else made, or one copied from another machine: look at
it first (`ls`, `check`, the TUI never unpickle anything), then trust it. What the capture says
about itself (user, host, command) is printed for that look, and is not what is trusted: the
signature covers the files as they are now, and any later change to them undoes it.
"""

from __future__ import annotations

import argparse
import sys

from graphtrain_inspect.inspector.cli.common import CommandError, open_or_fail


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "dir", metavar="DIR", help="capture directory to sign with your key (replay then loads it without --trust)"
    )


def run(args: argparse.Namespace) -> int:
    from graphtrain_inspect.capture.shared import signing
    from graphtrain_inspect.inspector.replay.plan import capture_dir, manifest_claims

    cap = open_or_fail(args.dir, "capture")
    with cap:
        if cap.kind != "capture":
            raise CommandError(
                f"{args.dir} holds torch's own TORCH_TRACE logs, not a graphtrain-inspect capture: replay "
                "never loads it"
            )
        base = capture_dir(cap)
        claims = manifest_claims(cap)
        command = cap.manifest.get("command_line") if isinstance(cap.manifest, dict) else None
        before = signing.verify(base)
        try:
            kid = signing.sign(base)
        except signing.KeyProblem as e:
            raise CommandError(str(e)) from None
        except OSError as e:
            raise CommandError(f"cannot write the signature into {base}: {e.strerror or e}") from None
    say = lambda s: print(s, file=sys.stderr)  # noqa: E731 - where the other commands' notes go
    say(
        f"graphtrain-inspect trust: {base}: {'signed again' if before.ok else 'signed'} with your key ({kid}); "
        f"replay loads it without --trust until any of its logs or its manifest changes"
    )
    say(f"  {claims}" + (f"; command: {command}" if isinstance(command, str) else ""))
    if not before.ok:
        say(f"  before: {before.why}")
    warn = signing.key_folder_problem()
    if warn:
        say(f"  warning: {warn}")
    return 0
