"""Passes a graph trainer applies that the user never named: recorded by name all the same.

torchtitan's graph_trainer applies every pass list through one function,
`torchtitan.experiments.graph_trainer.passes.apply_graph_passes(gm, example_inputs, passes, ...)`,
whatever built the list: its default pipeline, `compile_time_passes`, or a pipeline of the
user's own registered with `register_pass_pipeline` and chosen with `--compile.pass_pipeline`.
Wrapping that one function records each pass of the list it is handed (as `--pass` would,
`source` "named", `target` naming this hook), so a pass of the user's own is never missed and a
literal it inserts is never blamed on the model code. Passes already wrapped by `--pass` are
left as they are. Installed as a post-import hook: nothing here imports torchtitan.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from graphtrain_inspect.capture import import_hooks
from graphtrain_inspect.capture.wrap import rebind_references, wrap_pass_list

GRAPH_TRAINER_PASSES = "torchtitan.experiments.graph_trainer.passes"
TARGET = f"{GRAPH_TRAINER_PASSES}:apply_graph_passes"


def install() -> None:
    import_hooks.when_imported(GRAPH_TRAINER_PASSES, _hook_graph_trainer)


def _hook_graph_trainer(module: Any) -> None:
    original = getattr(module, "apply_graph_passes", None)
    if original is None or getattr(original, "_gti_original", None) is not None:
        return
    wrapper = _applying(original)
    module.apply_graph_passes = wrapper
    rebind_references(original, wrapper)  # `from .passes import apply_graph_passes` elsewhere


def _applying(original: Callable) -> Callable:
    @functools.wraps(original)
    def apply_graph_passes(gm: Any, example_inputs: Any, passes: Any, *args: Any, **kwargs: Any) -> Any:
        # a copy: the caller's list stays as it gave it
        return original(gm, example_inputs, wrap_pass_list(list(passes), target=TARGET), *args, **kwargs)

    apply_graph_passes._gti_original = original  # type: ignore[attr-defined]  # a marker on the function object
    return apply_graph_passes
