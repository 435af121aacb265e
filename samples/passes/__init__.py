"""The sample's graph passes: plain ``(gm, example_inputs) -> gm`` functions,
one per module.  The order lives in ``samples.pipeline.PIPELINE``."""
