"""Process groups, the DeviceMesh and the in-graph collectives of the sample.

Layout (graph-trainer style, experts borrow a data-parallel dimension):

* world 1 or 2 (or any size not divisible by 4): mesh ``("dp",)``.  Every rank
  is data parallel; dense parameters are FSDP-sharded over ``dp`` and the
  experts are expert-parallel over the same ``dp`` dimension.
* world 4 (and multiples of 4): mesh ``("dp", "ep")`` of shape (world/2, 2).
  Dense parameters are FSDP-sharded over all ranks, experts are split over
  ``ep`` and FSDP-sharded over ``dp``.

Collectives are issued with process-group *names* (strings) so that traced
graphs hold plain string literals, and with the autograd-aware functional
collectives so that their backward (reduce-scatter / reverse all-to-all)
lands in the same joint graph.
"""

from __future__ import annotations

import datetime
import os
import socket
import warnings
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

# ---------------------------------------------------------------------------
# functional collectives, feature-detected across torch versions
# ---------------------------------------------------------------------------


def _pick(*names):
    for n in names:
        fn = getattr(funcol, n, None)
        if fn is not None:
            return fn
    raise RuntimeError(f"torch.distributed._functional_collectives lacks all of {names}")


# 2.13 deprecates all_gather_tensor_autograd in favour of all_gather_single_autograd
_all_gather_autograd = _pick("all_gather_single_autograd", "all_gather_tensor_autograd")
_all_to_all_autograd = _pick("all_to_all_single_autograd")
_all_to_all = _pick("all_to_all_single")
_all_reduce = _pick("all_reduce")


def _waited(t: torch.Tensor) -> torch.Tensor:
    """An eager collective's result, waited for at once, as a traced graph does it (make_fx puts
    ``wait_tensor`` right after each collective).

    Why not leave eager results asynchronous (``AsyncCollectiveTensor``, waited on first use):
    on gloo with torch 2.13 that path corrupted the heap in about 1 of 12 two-rank eager runs
    of this sample ("malloc(): unaligned tcache chunk detected", SIGABRT inside ``wait_tensor``
    a few steps in); waiting at once: 0 in 60 (the one failure in those 60 was the teardown abort
    that ``worker_exit`` explains). Eager and traced runs then also do the same thing in the same
    order, which their bitwise loss comparison relies on."""
    if isinstance(t, funcol.AsyncCollectiveTensor):
        return t.wait()
    return t


def all_gather(shard: torch.Tensor, group: str, group_size: int) -> torch.Tensor:
    """FSDP unshard along dim 0 (autograd: backward is a reduce-scatter, sum)."""
    if group_size == 1:
        return shard
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return _waited(_all_gather_autograd(shard, 0, group))


def all_to_all(x, output_splits, input_splits, group: str, *, autograd: bool = True):
    fn = _all_to_all_autograd if autograd else _all_to_all
    return _waited(fn(x, output_splits, input_splits, group))


def all_reduce_sum(x: torch.Tensor, group: str) -> torch.Tensor:
    return _waited(_all_reduce(x, "sum", group))


# ---------------------------------------------------------------------------
# process-group / mesh setup
# ---------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ParallelContext:
    rank: int
    world: int
    local_rank: int
    device: torch.device
    mesh: object  # DeviceMesh
    mesh_dim_names: tuple
    dense_group: str  # FSDP group of dense parameters (all ranks)
    ep_group: str  # expert-parallel all-to-all group
    ep_size: int
    ep_coord: int
    efsdp_group: str | None  # FSDP group of expert parameters
    efsdp_size: int
    efsdp_coord: int
    group_ranks: dict = field(default_factory=dict)  # group name -> global ranks

    def describe(self) -> dict:
        return {
            "rank": self.rank,
            "world": self.world,
            "local_rank": self.local_rank,
            "device": str(self.device),
            "mesh_dim_names": list(self.mesh_dim_names),
            "mesh_shape": list(self.mesh.shape),
            "coordinate": list(self.mesh.get_coordinate() or []),
            "groups": {
                "dense": self.dense_group,
                "ep": self.ep_group,
                "efsdp": self.efsdp_group,
            },
            "group_ranks": {k: list(v) for k, v in self.group_ranks.items()},
        }


def init_parallel(device: str = "cpu") -> ParallelContext:
    """Initialise torch.distributed (torchrun env, or a 1-rank group) and the mesh."""
    from torch.distributed.device_mesh import init_device_mesh

    if "RANK" not in os.environ:  # plain `python -m graphtrain_inspect.samples.train`: a 1-rank group
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))

    if device == "cuda":
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
        backend = "nccl"
    else:
        dev = torch.device("cpu")
        backend = "gloo"
    if not dist.is_initialized():
        kw = {}
        if device == "cuda":
            kw["device_id"] = dev
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=120), **kw)

    if world % 4 == 0:
        shape, names = (world // 2, 2), ("dp", "ep")
    else:
        shape, names = (world,), ("dp",)
    mesh = init_device_mesh(dev.type, shape, mesh_dim_names=names)

    def gname(dim_name):
        return mesh.get_group(dim_name).group_name

    coord = mesh.get_coordinate()
    dense_group = dist.group.WORLD.group_name
    if len(names) == 1:
        ep_group, ep_size, ep_coord = gname("dp"), world, coord[0]
        efsdp_group, efsdp_size, efsdp_coord = None, 1, 0
    else:
        ep_group, ep_size, ep_coord = gname("ep"), shape[1], coord[1]
        efsdp_group, efsdp_size, efsdp_coord = gname("dp"), shape[0], coord[0]

    group_ranks = {}
    for gn in {dense_group, ep_group, efsdp_group} - {None}:
        group_ranks[gn] = _group_ranks(gn)

    return ParallelContext(
        rank=rank,
        world=world,
        local_rank=local_rank,
        device=dev,
        mesh=mesh,
        mesh_dim_names=names,
        dense_group=dense_group,
        ep_group=ep_group,
        ep_size=ep_size,
        ep_coord=ep_coord,
        efsdp_group=efsdp_group,
        efsdp_size=efsdp_size,
        efsdp_coord=efsdp_coord,
        group_ranks=group_ranks,
    )


def _group_ranks(group_name: str) -> list[int]:
    try:
        from torch.distributed.distributed_c10d import _resolve_process_group

        pg = _resolve_process_group(group_name)
        return dist.get_process_group_ranks(pg)
    except Exception:  # noqa: BLE001  # pragma: no cover - private API drift
        return []


# ---------------------------------------------------------------------------
# mesh coordinates: the rank-agnostic way and the rank-baked bug
# ---------------------------------------------------------------------------


def mesh_coordinate(mesh, dim: int, *, baked: bool):
    """The coordinate of this rank on mesh dimension ``dim``.

    Clean: ``mesh._sym_get_coordinate(dim)``; while tracing with
    ``torch.distributed.config.compile_on_one_rank`` this emits
    ``torch.ops.device_mesh._runtime_compute_coordinate_on_dim`` and returns
    an unbacked SymInt, so the graph is the same on every rank.

    ``baked=True`` is the planted ``rank-baked`` bug: ``mesh.get_local_rank``
    returns a Python int that make_fx freezes into the graph as a literal.
    """
    if baked:
        return mesh.get_local_rank(mesh_dim=dim)
    sym = getattr(mesh, "_sym_get_coordinate", None)
    if sym is None:  # pragma: no cover - very old torch
        warnings.warn("DeviceMesh._sym_get_coordinate missing: coordinates will be baked", stacklevel=2)
        return mesh.get_coordinate()[dim]
    return sym(dim)


def compile_on_one_rank_ctx(enable: bool = True):
    """``torch.distributed.config.patch(compile_on_one_rank=...)`` if available."""
    import contextlib

    try:
        import torch.distributed.config as dcfg
    except ImportError:  # pragma: no cover
        return contextlib.nullcontext()
    if not hasattr(dcfg, "compile_on_one_rank"):
        return contextlib.nullcontext()
    patch = getattr(dcfg, "patch", None)
    if patch is not None:
        return patch(compile_on_one_rank=enable)

    @contextlib.contextmanager
    def _ctx():  # pragma: no cover - config module without patch()
        old = dcfg.compile_on_one_rank
        dcfg.compile_on_one_rank = enable
        try:
            yield
        finally:
            dcfg.compile_on_one_rank = old

    return _ctx()
