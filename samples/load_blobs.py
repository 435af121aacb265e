"""Load every GraphPickler blob of a capture back (what replay needs): `python samples/load_blobs.py DIR [--trust]`.

Used by record_gpu_captures.sh to show that the blobs written on the GPU machines load under
the torch that wrote them. Unpickling runs code: as replay, only a capture signed with your key
(capture.shared.signing: your own, or one you signed with `graphtrain-inspect trust DIR`), or `--trust`.
"""

import glob
import sys

from graphtrain_inspect.capture.shared import signing

verdict = signing.verify(sys.argv[1])
if not verdict.ok and "--trust" not in sys.argv[2:]:
    sys.exit(f"load_blobs: {sys.argv[1]} is not loaded: {verdict.why}; pass --trust if you vouch for it")

import torch.distributed._functional_collectives  # ops a graph may call
import torch.distributed.tensor  # makes DeviceMesh an opaque type before the op library below

try:
    import torch.distributed._ops.device_mesh  # noqa: F401 - compile-on-one-rank ops
except ImportError:
    pass
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx._graph_pickler import GraphPickler
from torch.fx.experimental.symbolic_shapes import ShapeEnv

blobs = sorted(glob.glob(sys.argv[1] + "/blobs/*.gpkl"))
nodes = []
for b in blobs:
    with open(b, "rb") as f:
        gm, _ = GraphPickler.loads(f.read(), FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True))
    nodes.append(len(gm.graph.nodes))
print(f"loaded {len(blobs)} blobs; node counts {nodes}")
