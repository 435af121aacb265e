"""torch.compile on 2 gloo ranks with Inductor's all-gather bucketing run as a custom post-grad
pass: the bucketed all-gather packs both shards into one buffer and reads this rank's part back at
offset `512 * rank`, a literal the pass writes into the graph after the FX graph cache key was
taken. Models pytorch/pytorch#188332 (Inductor's bucketing wrote the rank into the packed
buffer's offset; ranks sharing the FX graph cache ran each other's code).

    python -m tests.programs.cache_rank_offset          # the bug: the pass's uuid leaves the rank out
    python -m tests.programs.cache_rank_offset --fixed  # the fix: the rank is part of its uuid, so of the key

Under a shared cache (the local ranks share one cache directory by default) rank 1 would load rank
0's code, offset 0, from the bug's one key; the fix gives each rank its own key. Under capture every
rank compiles for itself (the cache stays off, its keys are recorded), so both forms train the same;
on these gloo CPU ranks rank 0's code happens to give rank 1 the right sums even from a warm shared
cache (the upstream report's CUDA ranks failed).
"""

import sys

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch._inductor import config as inductor_config
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files


class BucketAllGathers(CustomGraphPass):
    """Inductor's own all-gather bucketing (one packed all-gather for the step's shards)."""

    def __init__(self, keyed_by_rank: bool) -> None:
        self.keyed_by_rank = keyed_by_rank

    def __call__(self, graph: torch.fx.Graph) -> None:
        from torch._inductor.fx_passes.bucketing import bucket_all_gather

        bucket_all_gather(graph.owning_module)

    def uuid(self) -> bytes:
        code = get_hash_for_files((__file__,))
        # the pass writes this rank's offset into the graph: only a key that holds the rank is safe
        return code + (f"rank {dist.get_rank()}".encode() if self.keyed_by_rank else b"")


def main(fixed: bool) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    inductor_config.post_grad_custom_post_pass = BucketAllGathers(keyed_by_rank=fixed)
    group = dist.group.WORLD
    # this rank's shards of two parameters, 256 elements each: the packed input is 512 per rank
    w1 = torch.full((256,), float(rank + 1))
    w2 = torch.full((256,), float(10 * (rank + 1)))

    @torch.compile
    def step(x, w1, w2):
        a = funcol.all_gather_tensor(w1, 0, group)
        b = funcol.all_gather_tensor(w2, 0, group)
        return x * a.sum() + b.sum()

    x = torch.ones(4)
    out = step(x, w1, w2)
    world = dist.get_world_size()
    full = sum(256 * (r + 1) for r in range(world))
    assert torch.allclose(out, x * full + 10 * full), out
    sys.stdout.write(f"rank {rank} loss {out.sum().item()!r}\n")  # one write: ranks share stdout
    sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    from graphtrain_inspect.samples.worker_exit import end_worker

    main("--fixed" in sys.argv[1:])
    end_worker()  # gloo can abort a finalizing interpreter (worker_exit says why)
