"""A torchtitan config of our own, for `--module graphtrain_inspect.samples.torchtitan_configs`
(torchtitan's ConfigManager takes a fully qualified module): graph_trainer's qwen3 MoE debug model
on SDPA attention.

graph_trainer's `graph_trainer_qwen3_debugmodel_moe` uses FlexAttention, whose backward torch
does not implement on CPU; this is the same config with the attention backend graph_trainer's
own `graph_trainer_llama3_debugmodel_sdpa` uses for the same reason (its model registry takes
`attn_backend`). Nothing else differs.
"""

from __future__ import annotations

from torchtitan.experiments.graph_trainer.qwen3 import model_registry
from torchtitan.experiments.graph_trainer.qwen3.config_registry import graph_trainer_qwen3_debugmodel_moe


def graph_trainer_qwen3_debugmodel_moe_sdpa():
    config = graph_trainer_qwen3_debugmodel_moe()
    config.model_spec = model_registry("debugmodel_moe", attn_backend="sdpa")
    return config
