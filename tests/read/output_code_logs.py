"""Small hand-made TORCH_TRACE logs holding Inductor output code, as torch writes them.

torch's records are glog lines with a top-level kind (`inductor_output_code`) or an `artifact`
(`inductor_post_grad_graph`, `inductor_provenance_tracking_node_mappings`), filed under a compile
id, payload lines tab-prefixed, `has_payload` the md5 of the payload.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

CPP_KERNEL = """cpp_fused_add_mul_relu_{n} = async_compile.cpp_pybinding(['const float*', 'const float*', 'float*'], \
r\'\'\'
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0,
                       const float* in_ptr1,
                       float* out_ptr0)
{{
    for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(16L))
    {{
        auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
        auto tmp4 = static_cast<float>({lit});
        auto tmp6 = tmp0 * at::vec::Vectorized<float>(tmp4);
        tmp6.store(out_ptr0 + static_cast<int64_t>(x0));
    }}
}}
\'\'\')
"""

WRAPPER = """# AOT ID: ['{aot}_inference']
from torch import device, empty_strided
from torch._inductor.async_compile import AsyncCompile
async_compile = AsyncCompile()

{kernels}

async_compile.wait(globals())
del async_compile

def call(args):
    arg0_1, arg1_1 = args
    args.clear()
{body}
    return (buf0, )
"""

CPU_BODY = """    buf0 = empty_strided_cpu((8, 4), (4, 1), torch.float32)
    cpp_fused_add_mul_relu_{n}(arg0_1, arg1_1, buf0)"""

CUDA_BODY = """    with torch.cuda._DeviceGuard({dev}):
        torch.cuda.set_device({dev})
        buf0 = empty_strided_cuda((8, 4), (4, 1), torch.float32)
        stream{dev} = get_raw_stream({dev})
        cpp_fused_add_mul_relu_{n}(arg0_1, arg1_1, buf0, stream=stream{dev})
        torch.ops._c10d_functional.all_reduce_.default(buf0, 'sum', '{group}')"""

POST_GRAD = """class GraphModule(torch.nn.Module):
    def forward(self, arg0_1: "f32[8, 4]{dev}", arg1_1: "f32[8, 4]{dev}"):
        relu: "f32[8, 4]{dev}" = torch.ops.aten.relu.default(arg0_1)
        mul: "f32[8, 4]{dev}" = torch.ops.aten.mul.Tensor(relu, {lit})
        return (mul,)
"""


def wrapper(
    lit: str = "3.0",
    n: int = 0,
    aot: int = 0,
    cuda_dev: int | None = None,
    group: str = "0",
    extra_kernel: bool = False,
) -> str:
    kernels = CPP_KERNEL.format(n=n, lit=lit)
    if extra_kernel:
        kernels += "\n" + CPP_KERNEL.format(n=n + 1, lit="1.0")
    body = CPU_BODY.format(n=n) if cuda_dev is None else CUDA_BODY.format(n=n, dev=cuda_dev, group=group)
    return WRAPPER.format(aot=aot, kernels=kernels, body=body)


def post_grad(lit: str = "3", dev: str = "") -> str:
    return POST_GRAD.format(lit=lit, dev=dev)


def record(
    kind: str,
    payload: str,
    *,
    rank: int,
    cid: tuple[int, int] | None = (0, 0),
    meta: dict | None = None,
    artifact: bool = False,
) -> str:
    lines = payload.split("\n")
    md5 = hashlib.md5("\n".join(lines).encode()).hexdigest()
    env: dict[str, Any] = {}
    if artifact:
        env["artifact"] = {"name": kind, "encoding": "json" if "provenance" in kind else "string"}
    else:
        env[kind] = meta or {}
    env["rank"] = rank
    if cid is not None:
        env.update({"frame_id": cid[0], "frame_compile_id": cid[1], "attempt": 0})
    env["has_payload"] = md5
    head = f"V1124 03:04:38.336000 4242 torch/_inductor/graph.py:2745] {json.dumps(env)}\n"
    return head + "".join(f"\t{l}\n" for l in lines)


def torch_log(directory: Path, rank: int, compiles: list[dict[str, Any]]) -> Path:
    """One rank's log: per compile, its post-grad graph, output code and (optionally) provenance."""
    parts = []
    for i, c in enumerate(compiles):
        cid = c.get("cid", (i, 0))
        parts.append(record("inductor_post_grad_graph", c["graph"], rank=rank, cid=cid, artifact=True))
        parts.append(
            record(
                "inductor_output_code",
                c["code"],
                rank=rank,
                cid=cid,
                meta={"filename": f"/tmp/torchinductor_u/ab/c{i}.py"},
            )
        )
        if c.get("provenance") is not None:
            parts.append(
                record(
                    "inductor_provenance_tracking_node_mappings",
                    json.dumps(c["provenance"]),
                    rank=rank,
                    cid=cid,
                    artifact=True,
                )
            )
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"dedicated_log_torch_trace_rank_{rank}_abc.log"
    path.write_text("".join(parts))
    return path
