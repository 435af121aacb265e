"""Start a capture in this process from the variables the launcher set."""

from __future__ import annotations

import os

from graphtrain_inspect.capture import session


def start_from_env() -> None:
    directory = os.environ.get(session.ENV_DIR)
    if not directory:
        return
    from graphtrain_inspect.capture import nodes

    if not nodes.records_here(os.environ):
        return  # capture --ranks: a rank not chosen runs untouched (no hook, no file)
    nodes.announce(directory, os.environ)
    passes = [p for p in os.environ.get(session.ENV_PASSES, "").splitlines() if p.strip()]
    inductor = os.environ.get(session.ENV_INDUCTOR, "1") == "1"
    sources = ("api", *(("named",) if passes else ()), *(("inductor",) if inductor else ()))
    from graphtrain_inspect.capture import fake_world

    if fake_world.active():  # capture --simulate-world: before the script can import torch.distributed
        fake_world.install()
    from graphtrain_inspect.capture import child_exits

    child_exits.install(directory)  # a parent of ranks (torchrun) records how each one ended
    # The session first, so that a hook failing to install is recorded in the capture.
    session.start(directory, blobs=os.environ.get(session.ENV_BLOBS, "1") == "1", sources=sources)
    from graphtrain_inspect.capture import failure

    failure.install()  # an exception that ends the program is recorded (gti_failure)
    from graphtrain_inspect.capture import import_hooks, rank_table

    import_hooks.when_imported("torch.distributed.device_mesh", rank_table.register_mesh_hook)
    from graphtrain_inspect.capture import framework_passes

    framework_passes.install()  # a graph trainer's own pass lists, named or not
    if passes:
        from graphtrain_inspect.capture import named_passes

        named_passes.install(passes)
    if inductor:
        from graphtrain_inspect.capture import inductor_hooks

        inductor_hooks.install()
        from graphtrain_inspect.capture import output_code

        if os.environ.get(output_code.ENV_OUTPUT_CODE, "1") != "0":  # "0": passes only (benchmarks)
            output_code.install()
            from graphtrain_inspect.capture import cache_keys

            cache_keys.install()  # each compile's FX graph cache key, on its gti_codegen
