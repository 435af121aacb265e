"""The sample's graph passes: plain ``(gm, example_inputs) -> gm`` functions,
one per module.  The order lives in ``graphtrain_inspect.samples.pipeline.PIPELINE``."""
