"""torchtitan's graph_trainer under `graphtrain-inspect capture`: the command, and what it needs.

    python -m graphtrain_inspect.samples.torchtitan --model llama3 --world 8 --out DIR
    python -m graphtrain_inspect.samples.torchtitan --model moe --world 64 --out DIR
    python -m graphtrain_inspect.samples.torchtitan --model llama3 --world 2 --real --out DIR   # 2 gloo ranks
    ... --bug tp-coordinate | ep-divergent     # a planted bug in a pass of our own (torchtitan_passes)
    ... --dry-run                              # print the command only

Needs the `torchtitan` extra (`pip install -e '.[torchtitan]'`). Makes what torchtitan's debug
configs read from its source tree, which its wheel does not ship (a byte-level BPE tokenizer of
512 tokens and a small text set in the layout of its `c4_test`), in `--assets` (made once, the
same bytes every time: nothing is downloaded), then prints and runs

    graphtrain-inspect capture --out DIR --simulate-world N --stop-after-passes \\
        --pass torchtitan.experiments.graph_trainer.passes:compile_time_passes \\
        -- python -m graphtrain_inspect.samples.torchtitan_cpu --module graph_trainer.llama3 --config ...

(`torchrun --nproc-per-node N` instead of --simulate-world with --real). Every pass of the list
graph_trainer builds in `compile_time_passes(...)` is recorded under its own name; the ranks stop
at the first call of the graph its last pass returned, before the step runs.

Models: `llama3` is graph_trainer's llama3 debug model with FSDP over `dp_shard` and tensor
parallelism over `tp` (a 2-D mesh, tp = 2); `moe` is its qwen3 MoE debug model with experts over
`ep` (ep = 2, borrowed from dp_shard as torchtitan does) and FSDP.

What cannot run on a CPU (one line each, printed): graph_trainer's default configs use
FlexAttention, whose backward torch does not implement on CPU, so SDPA configs are used
(graph_trainer's own `graph_trainer_llama3_debugmodel_sdpa`; for qwen3 MoE the same change in
samples/torchtitan_configs.py); three passes are disabled with torchtitan's own
`--compile.disable_passes` (see CPU_DISABLED).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import subprocess
import sys

MODELS = {
    # model -> (torchtitan --module, --config)
    "llama3": ("graph_trainer.llama3", "graph_trainer_llama3_debugmodel_sdpa"),
    # graph_trainer's qwen3 MoE debug config on SDPA (samples/torchtitan_configs.py)
    "moe": ("graphtrain_inspect.samples.torchtitan_configs", "graph_trainer_qwen3_debugmodel_moe_sdpa"),
}

# Passes of graph_trainer's pipeline that cannot run on this machine, and why (printed).
CPU_DISABLED = {
    "selective_activation_remat_pass": "fails here: 'does not support RNG ops in recompute regions'",
    "joint_transformer_block_bucketing_reordering_pass": (
        "its runtime estimate asks triton for a GPU driver (0 active drivers on a CPU-only machine)"
    ),
    "cudagraph_pass": "CUDA graphs need the CUDA runtime",
}

# The passes of our own with a planted bug (samples/torchtitan_passes.py): --bug -> (registered
# pipeline, the pass's --pass target)
BUGS = {
    "tp-coordinate": ("gti_bug_tp_coordinate", "graphtrain_inspect.samples.torchtitan_passes:bake_tp_coordinate_pass"),
    "ep-divergent": ("gti_bug_ep_divergent", "graphtrain_inspect.samples.torchtitan_passes:ep_divergent_pass"),
}

PIPELINE_TARGET = "torchtitan.experiments.graph_trainer.passes:compile_time_passes"

ASSETS_VERSION = "1"  # bump when make_assets makes something else
_WORDS = (
    "the a graph pass rank mesh tensor shard expert token layer gradient step loss model data "
    "parallel fsdp group reduce gather scatter all to compile trace node fake process world device "
    "memory bucket overlap schedule pipeline attention norm weight bias router capacity"
).split()


def make_assets(directory: str) -> tuple[str, str]:
    """A tokenizer (`tokenizer.json` + `tokenizer_config.json`, torchtitan's HuggingFace layout)
    and a text set (`c4_test/data.json`, JSON lines with "text", the layout of torchtitan's
    c4_test); made once, deterministic. Returns (tokenizer dir, data set dir)."""
    tok_dir = os.path.join(directory, "tokenizer")
    data_dir = os.path.join(directory, "c4_test")
    stamp = os.path.join(directory, "assets-version")
    try:
        with open(stamp) as f:
            if f.read().strip() == ASSETS_VERSION:
                return tok_dir, data_dir
    except OSError:
        pass
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    rng = random.Random(0)
    lines = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(40, 400))) for _ in range(2000)]
    os.makedirs(tok_dir, exist_ok=True)
    os.makedirs(data_dir, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    # 512 < the debug models' vocabulary (2048): every id is an embedding row
    tok.train_from_iterator(
        lines,
        trainers.BpeTrainer(
            vocab_size=512,
            special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tok.save(os.path.join(tok_dir, "tokenizer.json"))
    with open(os.path.join(tok_dir, "tokenizer_config.json"), "w") as f:
        json.dump(
            {
                "bos_token": "<|begin_of_text|>",
                "eos_token": "<|end_of_text|>",
                "add_bos_token": True,
                "add_eos_token": False,
            },
            f,
        )
    # "data.json": a file name with "test" in it would make `datasets` call the split "test"
    with open(os.path.join(data_dir, "data.json"), "w") as f:
        for line in lines:
            f.write(json.dumps({"text": line}) + "\n")
    with open(stamp, "w") as f:
        f.write(ASSETS_VERSION + "\n")
    return tok_dir, data_dir


def parallelism(model: str, world: int) -> list[str]:
    """torchtitan's degrees for `world` ranks: llama3 on (dp_shard, tp = 2), moe with ep = 2."""
    if world < 2 or world % 2:
        raise SystemExit(f"--world {world}: an even number of ranks, at least 2 (tp or ep is 2)")
    if model == "llama3":
        return [
            "--parallelism.data_parallel_shard_degree",
            str(world // 2),
            "--parallelism.tensor_parallel_degree",
            "2",
        ]
    return ["--parallelism.data_parallel_shard_degree", str(world), "--parallelism.expert_parallel_degree", "2"]


def command(args: argparse.Namespace, tok_dir: str, data_dir: str, python: str, gti: str) -> list[str]:
    module, config = MODELS[args.model]
    cap = [gti, "capture", "--out", args.out, "--pass", PIPELINE_TARGET]
    worker = [python, "-m", "graphtrain_inspect.samples.torchtitan_cpu"]
    disabled = list(CPU_DISABLED)
    tt = [
        "--module",
        module,
        "--config",
        config,
        "--hf_assets_path",
        tok_dir,
        "--dataloader.dataset_path",
        data_dir,
        "--dump_folder",
        os.path.join(args.assets, "outputs"),
        "--training.steps",
        str(args.steps),
        "--training.seq_len",
        "128",
        "--training.local_batch_size",
        "2",
        *parallelism(args.model, args.world),
        "--compile.disable_passes",
        ",".join(disabled),
    ]
    if args.model == "moe":
        # its all-to-all token dispatcher synchronizes with the CPU, which torchtitan refuses
        # under CUDA graphs (on by default); cudagraph_pass is disabled here anyway
        tt.append("--training.disable_cuda_graphs")
    if args.bug:
        pipeline, target = BUGS[args.bug]
        cap += ["--pass", target]
        worker += ["--gti-bug", args.bug]
        tt += ["--compile.pass_pipeline", pipeline]
    if args.real:
        launch = [
            os.path.join(os.path.dirname(python), "torchrun"),
            "--standalone",
            "--nproc-per-node",
            str(args.world),
            "-m",
            "graphtrain_inspect.samples.torchtitan_cpu",
        ] + worker[3:]
        return [*cap, "--", *launch, *tt]
    return [*cap, "--simulate-world", str(args.world), "--stop-after-passes", "--", *worker, *tt]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m graphtrain_inspect.samples.torchtitan", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--model", choices=sorted(MODELS), default="llama3")
    ap.add_argument("--world", type=int, default=8, help="ranks of the job (simulated unless --real)")
    ap.add_argument("--out", required=True, help="the capture directory (graphtrain-inspect capture --out)")
    ap.add_argument(
        "--assets", default="gti-torchtitan-assets", help="where the tokenizer and data set are made (once)"
    )
    ap.add_argument("--bug", choices=sorted(BUGS), help="add a pass of our own with a planted bug to the pipeline")
    ap.add_argument(
        "--real", action="store_true", help="run the ranks with torchrun on gloo instead of simulating them"
    )
    ap.add_argument("--steps", type=int, default=3, help="training steps (a simulated rank stops after its passes)")
    ap.add_argument("--dry-run", action="store_true", help="print the command, run nothing")
    args = ap.parse_args(argv)
    try:
        import torchtitan  # noqa: F401
    except ImportError:
        print(
            "graphtrain_inspect.samples.torchtitan: torchtitan is not installed: pip install -e '.[torchtitan]'",
            file=sys.stderr,
        )
        return 2
    args.assets = os.path.abspath(args.assets)
    tok_dir, data_dir = make_assets(args.assets)
    python = sys.executable
    gti = shutil.which("graphtrain-inspect", path=os.path.dirname(python)) or "graphtrain-inspect"
    cmd = command(args, tok_dir, data_dir, python, gti)
    module, config = MODELS[args.model]
    print(
        f"# {config}: graph_trainer's default {args.model} config uses FlexAttention, whose backward torch "
        "does not implement on CPU"
    )
    for name, why in CPU_DISABLED.items():
        print(f"# disabled on CPU: {name}: {why}")
    # Everything torchtitan reads through HuggingFace stays in --assets: no hub, no home cache.
    env = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": os.path.join(args.assets, "hf")}
    print(" ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()), shlex.join(cmd), flush=True)
    if args.dry_run:
        return 0
    return subprocess.call(cmd, env={**os.environ, **env})


if __name__ == "__main__":
    sys.exit(main())
