"""Generated code of two ranks (or two compiles) made comparable, and diffed.

What differs between ranks' generated code for one rank-agnostic program, and is rewritten to one
form before comparing:
* kernel names: Inductor numbers kernels per process (`cpp_fused_add_mul_relu_0`,
  `triton_poi_fused_add_3`), so the same kernel gets another number after another compile: each
  kernel defined in the wrapper becomes its name without the number plus its ordinal in the file
  (`cpp_fused_add_mul_relu_#0`);
* the rank's own device index (`device(type='cuda', index=1)`, a Triton kernel's
  `DeviceProperties(type='cuda', index=1, ...)`, `set_device(1)`, `_DeviceGuard(1)`,
  `get_raw_stream(1)`, `'cuda:1'` on the rank whose device is cuda:1): `<own>`; any other index is
  kept, so a pinned foreign device still shows;
* stream variables (`stream1`): `stream#`;
* process-group names in collective calls: the rank-invariant key of `diff.normalize.RankContext`;
* cache paths (`/tmp/torchinductor_<user>/...`) and the AOT id comment.

`literal_skeleton` splits a line into its numeric literals and the rest, for the checks: two
ranks' lines with one skeleton and different literals are a literal that differs across ranks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from graphtrain_inspect.inspector.diff.graph_diff import text_diff
from graphtrain_inspect.inspector.diff.normalize import OWN_DEVICE, RankContext
from graphtrain_inspect.inspector.read.graphmodel import split_device
from graphtrain_inspect.inspector.read.output_code import Kernel, kernels_of

_PATH = re.compile(r"/tmp/torchinductor_[^/\s'\"]+/[^\s'\"]*")
_AOT_ID = re.compile(r"^# AOT ID: .*$")
_STREAM = re.compile(r"\bstream\d+\b")
_NUMBERED = re.compile(r"^(?P<stem>.*?)_?(?P<n>\d+)$")
_QUOTED = re.compile(r"'([^'\\]*)'|\"([^\"\\]*)\"")
_COLLECTIVE_LINE = re.compile(
    r"c10d|_functional|group_name|symm_mem|all_reduce|all_gather|reduce_scatter|all_to_all|broadcast"
)
# numeric literals: 3, 3.0, 1e-05, 16L, 0.5f, 0x1F; not inside identifiers (tmp4, buf0, x0)
NUMBER = re.compile(
    r"(?<![\w.])(?:0x[0-9a-fA-F]+|\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+(?:[eE][+-]?\d+)?)(?:[uU]?[lL]{0,2}|[fF])?(?![\w.])"
)

# what pins a device index in Inductor's wrappers (C++ and Python)
DEVICE_PINS = (
    ("device_index", re.compile(r"device\(type='(?P<type>\w+)', index=(?P<idx>\d+)\)")),
    # a Triton kernel's compile-time device (`triton_meta['device']`): compiled for and loaded on it
    ("kernel_device", re.compile(r"DeviceProperties\(type='(?P<type>\w+)', index=(?P<idx>\d+)\b")),
    ("set_device", re.compile(r"\b(?P<type>cuda|xpu)\.set_device\((?P<idx>\d+)\)")),
    ("device_guard", re.compile(r"\b(?P<type>cuda|xpu)?\.?_DeviceGuard\((?P<idx>\d+)\)")),
    ("raw_stream", re.compile(r"\bget_raw_stream\((?P<idx>\d+)\)")),
    ("device_string", re.compile(r"['\"](?P<type>cuda|xpu|mtia|hpu):(?P<idx>\d+)['\"]")),
    ("aoti_device", re.compile(r"\bAOTIGuard\w*\((?P<idx>\d+)\)|\bcudaSetDevice\((?P<idx2>\d+)\)")),
)


def own_index(ctx: RankContext | None) -> int | None:
    """The rank's own accelerator index (from its device, else its local rank), or None."""
    if ctx is None:
        return None
    typ, idx = split_device(ctx.own_device)
    if idx is not None:
        return idx
    if typ in ("cpu", "meta"):
        return None
    return ctx.local_rank


def kernel_renames(code: str, kernels: list[Kernel] | None = None) -> dict[str, str]:
    """Defined kernel name -> its name without Inductor's counter, plus its ordinal in the file."""
    out: dict[str, str] = {}
    for i, k in enumerate(kernels if kernels is not None else kernels_of(code)):
        m = _NUMBERED.match(k.name)
        stem = m.group("stem") if m else k.name
        out[k.name] = f"{stem}_#{i}"
    return out


# the arguments of a Triton kernel's `@triton_heuristics.*(...)` decorator that are autotuning
# hints: made from the compiling rank's sizes (a dynamic dimension's hint), they steer which
# launch config is tried, never what the kernel computes
_AUTOTUNE_HINTS = ("size_hints=", "inductor_meta=")


def autotune_hint(line: str) -> bool:
    """Whether the line is an autotuning hint of a Triton kernel's heuristics decorator."""
    return line.lstrip().startswith(_AUTOTUNE_HINTS)


def pinned_indices(line: str) -> list[tuple[str, int]]:
    """(what, index) for every device index the line pins."""
    return [(what, idx) for what, idx, _, _ in pinned_spans(line)]


def pinned_spans(line: str) -> list[tuple[str, int, int, int]]:
    """(what, index, start, end) for every device index the line pins, with where it is."""
    out = []
    for what, rx in DEVICE_PINS:
        for m in rx.finditer(line):
            idx = (
                m.group("idx") if "idx" in rx.groupindex and m.group("idx") is not None else (m.groupdict().get("idx2"))
            )
            if idx is not None:
                out.append((what, int(idx), m.start(), m.end()))
    return out


@dataclass
class CodeNormalizer:
    """Rewrites one rank's generated code to the rank-invariant form (see the module docstring)."""

    ctx: RankContext | None = None

    def lines(self, code: str) -> list[str]:
        kernels = kernels_of(code)
        renames = kernel_renames(code, kernels)
        name_rx = (
            re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(renames, key=len, reverse=True)) + r")\b")
            if renames
            else None
        )
        own = own_index(self.ctx)
        groups = self.ctx.group_keys if self.ctx is not None else {}
        out = []
        for line in code.split("\n"):
            if name_rx is not None and any(n in line for n in renames):
                line = name_rx.sub(lambda m: renames[m.group(1)], line)
            if "/tmp/torchinductor_" in line:
                line = _PATH.sub("<path>", line)
            if line.startswith("# AOT ID:"):
                line = "# AOT ID: <id>"
            if "stream" in line:
                line = _STREAM.sub("stream#", line)
            if own is not None:
                line = _own_device(line, own)
            if groups and _COLLECTIVE_LINE.search(line):
                line = _QUOTED.sub(lambda m: _group(m, groups), line)
            out.append(line)
        return out


def _group(m: re.Match, groups: dict[str, str]) -> str:
    text = m.group(1) if m.group(1) is not None else m.group(2)
    key = groups.get(text)
    return m.group(0) if key is None else f"'<group:{key}>'"


def _own_device(line: str, own: int) -> str:
    s = str(own)
    if s not in line:
        return line
    line = re.sub(rf"(\(type='\w+', index=){s}(?![\d.])", rf"\g<1>{OWN_DEVICE}", line)
    line = re.sub(rf"(\bset_device\(|_DeviceGuard\(|\bget_raw_stream\(){s}\)", rf"\g<1>{OWN_DEVICE})", line)
    # quoted device strings, and the `cuda:0` of FX value annotations in kernels' comments
    line = re.sub(rf"(\b(?:cuda|xpu|mtia|hpu):){s}(?![\d.])", rf"\g<1>{OWN_DEVICE}", line)
    return line


def literal_skeleton(line: str) -> tuple[str, list[str]]:
    """(the line with every numeric literal replaced by `#`, the literals in order)."""
    lits = NUMBER.findall(line)
    return (NUMBER.sub("#", line) if lits else line), lits


def literal_span(line: str, j: int) -> tuple[int, int] | None:
    """(start, end) of the j-th numeric literal of the line (in `literal_skeleton`'s order)."""
    for n, m in enumerate(NUMBER.finditer(line)):
        if n == j:
            return m.span()
    return None


def literal_value(text: str) -> int | float | None:
    t = text.rstrip("lLuUfF") if not text.lower().startswith("0x") else text
    try:
        if t.lower().startswith("0x"):
            return int(t, 16)
        if any(c in t for c in ".eE"):
            return float(t)
        return int(t)
    except ValueError:
        return None


def diff_code(
    a: str,
    b: str,
    a_ctx: RankContext | None,
    b_ctx: RankContext | None,
    a_label: str = "a",
    b_label: str = "b",
    context: int = 3,
) -> list[str]:
    """Unified diff of two pieces of generated code after normalization: empty when they agree."""
    return text_diff(CodeNormalizer(a_ctx).lines(a), CodeNormalizer(b_ctx).lines(b), a_label, b_label, context=context)
