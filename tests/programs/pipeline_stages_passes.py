"""The pass of tests.programs.pipeline_stages (its own module: capture wraps it by this name)."""


def remove_dead_code(gm, example_inputs):
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


PIPELINE = [remove_dead_code]
