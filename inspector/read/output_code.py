"""Inductor's generated output code per rank: torch's `inductor_output_code` records and ours.

    from graphtrain_inspect.inspector.read.output_code import output_codes, code_text, kernels_of
    for oc in output_codes(cap, rank):          # in log order
        oc.compile_id, oc.graph, oc.bytes       # "0/0", gid of the post-grad graph it was made from
        kernels_of(code_text(cap, oc))          # [Kernel(name, kind, first, last)], in definition order
        training_text(code_text(cap, oc))       # the same lines, Inductor's benchmark harness blanked
        oc.origins                              # {kernel: [post-grad FX node names]} where known
        oc.cache_key                            # the compile's FX graph cache key, where recorded

Two sources, the same records:

* a capture: `gti_output_code` (the wrapper, once per distinct content) and `gti_codegen` (one per
  compile that produced it: the post-grad graph id, the compile id, each kernel's FX nodes).
* torch's TORCH_TRACE logs: `inductor_output_code` (metadata: filename) filed under its compile id;
  its post-grad graph is the `inductor_post_grad_graph` (or `after_post_grad_graph`) record of the
  same compile id just before it, whose graph id the reader gives as `t` + payload md5. Provenance
  (`inductor_provenance_tracking_node_mappings`, written with INDUCTOR_PROVENANCE=1) after it in
  the same compile id gives each kernel's post-grad nodes.

Nothing here imports torch; the code is text, never run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graphtrain_inspect.capture.shared import logformat

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.read.capture_reader import Capture
    from graphtrain_inspect.inspector.read.logscan import Record

TORCH_OUTPUT_CODE = "inductor_output_code"
TORCH_PROVENANCE = "inductor_provenance_tracking_node_mappings"
TORCH_KERNEL_STACKS = "inductor_provenance_tracking_kernel_stack_traces"
_POST_GRAD = ("inductor_post_grad_graph", "after_post_grad_graph")

# `name = async_compile.cpp_pybinding([...], r'''` / `async_compile.triton('name', '''` ...
_KERNEL_DEF = re.compile(rb"^(?P<name>[A-Za-z_]\w*) = async_compile\.(?P<kind>\w+)\(", re.M)


@dataclass
class Kernel:
    """One kernel defined in a wrapper: its name, how it is compiled, and its lines (0-based,
    inclusive: `first` is the definition line, `last` the line closing its source string);
    `header` is the first line of the comments Inductor writes above it (`# kernel path:`,
    `# Topologically Sorted Source Nodes: ..., Original ATen: ...`, `# Source node to ATen node
    mapping:`), `first` where there are none."""

    name: str
    kind: str  # cpp_pybinding, cpp, triton, cuda ...
    first: int
    last: int
    header: int = -1

    def __post_init__(self) -> None:
        if self.header < 0:
            self.header = self.first


@dataclass
class OutputCode:
    """One piece of generated code on one rank, and the compile that produced it."""

    rank: int
    oid: str  # "o" + sha256 of the code [:16] (ours) or "t" + payload md5 [:16] (torch's)
    record: "Record" = field(repr=False)
    compile_id: str | None = None
    graph: str | None = None  # gid of the post-grad FX graph it was generated from
    origins: dict[str, list[str]] = field(default_factory=dict)  # kernel -> post-grad node names
    filename: str | None = None
    source: str = "capture"  # capture | torch
    kernels: int | None = None  # kernel count where the record says (ours), else counted on demand
    cache_key: str | None = None  # the FX graph cache key the compile was filed under (ours, format 4+)

    @property
    def bytes(self) -> int:
        return self.record.payload_bytes


def kernels_of(code: str) -> list[Kernel]:
    """Kernels defined at the top level of a wrapper, in order, each with its line span."""
    data = code.encode("utf-8", "surrogatepass")
    starts = [m for m in _KERNEL_DEF.finditer(data)]
    if not starts:
        return []
    line_starts = [0]
    for i, b in enumerate(data):
        if b == 10:
            line_starts.append(i + 1)
    import bisect

    def seg_of(i: int) -> bytes:
        return data[line_starts[i] : line_starts[i + 1] - 1 if i + 1 < len(line_starts) else len(data)]

    out = []
    for m in starts:
        first = bisect.bisect_right(line_starts, m.start()) - 1
        head = seg_of(first)
        # the kernel's source is a string opened on the definition line (C++: `r'''`, Triton:
        # `async_compile.triton('name', '''`): it ends at the line that closes it
        # (`''')`, Triton's `''', device_str='cuda')`), whatever the source holds (a Triton
        # kernel's decorator closes with a bare `)` line)
        quote = next((q for q in (b"'''", b'"""') if head.count(q) % 2 == 1), None)
        last = first
        i = first + 1
        while i < len(line_starts):
            seg = seg_of(i)
            if quote is not None:
                if seg.startswith(quote):
                    last = i
                    break
            elif seg.startswith((b"''')", b'""")', b"''',", b'""",')) or (seg[:1] == b")" and seg.strip() == b")"):
                last = i
                break
            elif _KERNEL_DEF.match(seg) or seg.startswith((b"async_compile.wait", b"def ", b"class ")):
                last = i - 1
                break
            i += 1
        else:
            last = len(line_starts) - 1
        header = first
        while header > 0 and seg_of(header - 1).startswith(b"#"):
            header -= 1
        out.append(Kernel(m.group("name").decode(), m.group("kind").decode(), first, last, header))
    return out


# the benchmark harness Inductor appends to a wrapper (`config.benchmark_harness`): top-level blocks
# that run only when the file is run as a script, never in training
_HARNESS_HEADS = (
    "\ndef get_args(",
    "\ndef benchmark_compiled_module(",
    '\nif __name__ == "__main__":',
    "\nif __name__ == '__main__':",
)
_TOP_LEVEL = re.compile(r"\n(?=[^\s#])")


def harness_spans(code: str) -> list[tuple[int, int]]:
    """The lines (0-based, inclusive) of each block of Inductor's benchmark harness, in order:
    `get_args`, `benchmark_compiled_module` and the `if __name__ == "__main__":` block calling
    `compiled_module_main`. Each runs only when the wrapper is run as a script: its size hints and
    example inputs are not what training runs. A block ends before the next top-level line; blank
    lines after it are left out. Found by plain string search (a wrapper runs to megabytes)."""
    out: list[tuple[int, int]] = []
    for head in _HARNESS_HEADS:
        at = code.find(head)
        while at >= 0:
            start = at + 1
            eol = code.find("\n", start)
            nxt = _TOP_LEVEL.search(code, eol) if eol >= 0 else None
            body = code[start : nxt.start() if nxt is not None else len(code)].rstrip()
            first = code.count("\n", 0, start)
            out.append((first, first + body.count("\n")))
            at = code.find(head, start)
    return sorted(out)


def training_text(code: str) -> str:
    """The wrapper as training runs it: the lines of Inductor's benchmark harness blanked (line
    numbers kept), so checks of generated code never read its example inputs as code."""
    spans = harness_spans(code)
    if not spans:
        return code
    lines = code.split("\n")
    for first, last in spans:
        lines[first : last + 1] = [""] * (last + 1 - first)
    return "\n".join(lines)


# `#   y_1 => mul_7` / `#   y => add_tensor, view_11` under `# Source node to ATen node mapping:`
_MAPPING_HEAD = "# Source node to ATen node mapping:"
_MAPPING_ROW = re.compile(r"^#\s+(?P<src>[A-Za-z_][\w.]*) => (?P<nodes>[\w, ]+)$")


def kernel_source_nodes(lines: list[str], k: Kernel) -> dict[str, str]:
    """Post-grad node -> the source node (Dynamo's name for the user's expression) it was made
    from, from the comments Inductor writes above the kernel; empty without them."""
    out: dict[str, str] = {}
    inside = False
    for i in range(k.header, k.first):
        line = lines[i] if i < len(lines) else ""
        if line.startswith(_MAPPING_HEAD):
            inside = True
            continue
        if not inside:
            continue
        m = _MAPPING_ROW.match(line)
        if m is None:
            break
        for n in m.group("nodes").split(","):
            if n.strip():
                out.setdefault(n.strip(), m.group("src"))
    return out


def _strip_handle(name: str) -> str:
    """Provenance keys are `kernel:debug_handle`."""
    head, sep, tail = name.rpartition(":")
    return head if sep and tail.isdigit() else name


def origins_from_provenance(mapping: Any) -> dict[str, list[str]]:
    """Kernel -> post-grad node names from torch's provenance mapping (any `*CodeToPost` table)."""
    out: dict[str, list[str]] = {}
    if not isinstance(mapping, dict):
        return out
    for key, table in mapping.items():
        if not (isinstance(key, str) and key.endswith("CodeToPost") and isinstance(table, dict)):
            continue
        for k, nodes in table.items():
            if isinstance(k, str) and isinstance(nodes, list):
                names = out.setdefault(_strip_handle(k), [])
                names.extend(n for n in nodes if isinstance(n, str) and n not in names)
    return out


def _index(cap: "Capture", rank: int) -> list[OutputCode]:
    out: list[OutputCode] = []
    recs = cap.records(rank)
    by_oid: dict[str, "Record"] = {}
    last_post_grad: dict[str | None, str] = {}
    pending_torch: dict[str | None, OutputCode] = {}
    for rec in recs:
        kind = rec.kind
        if kind == logformat.OUTPUT_CODE:
            oid = rec.meta.get("oid")
            if isinstance(oid, str) and oid not in by_oid:
                by_oid[oid] = rec
        elif kind == logformat.CODEGEN:
            v = cap.payload(rank, rec)
            if not isinstance(v, dict) or not isinstance(v.get("oid"), str) or v["oid"] not in by_oid:
                continue
            origins = v.get("kernels")
            out.append(
                OutputCode(
                    rank=rank,
                    oid=v["oid"],
                    record=by_oid[v["oid"]],
                    compile_id=v.get("compile_id") if isinstance(v.get("compile_id"), str) else None,
                    graph=v.get("graph") if isinstance(v.get("graph"), str) else None,
                    origins={
                        k: [n for n in ns if isinstance(n, str)] for k, ns in origins.items() if isinstance(ns, list)
                    }
                    if isinstance(origins, dict)
                    else {},
                    filename=None,
                    source="capture",
                    cache_key=v.get("cache_key") if isinstance(v.get("cache_key"), str) else None,
                )
            )
        elif kind in _POST_GRAD and rec.has_payload and rec.meta.get("encoding", "string") == "string":
            md5 = rec.env.get("has_payload")
            if isinstance(md5, str) and len(md5) >= 16:
                last_post_grad[rec.compile_id] = "t" + md5[:16]
        elif kind == TORCH_OUTPUT_CODE and "artifact" not in rec.env and rec.has_payload:
            md5 = rec.env.get("has_payload")
            oid = "t" + (md5[:16] if isinstance(md5, str) and len(md5) >= 16 else f"{rec.offset:016x}")
            cid = rec.compile_id
            fn = rec.meta.get("filename")
            oc = OutputCode(
                rank=rank,
                oid=oid,
                record=rec,
                compile_id=cid,
                graph=last_post_grad.pop(cid, None),
                filename=fn if isinstance(fn, str) else None,
                source="torch",
            )
            out.append(oc)
            pending_torch[cid] = oc
        elif kind == TORCH_PROVENANCE and rec.compile_id in pending_torch:
            oc = pending_torch.pop(rec.compile_id)
            oc.origins = origins_from_provenance(cap.payload(rank, rec))
    return out


def output_codes(cap: "Capture", rank: int) -> list[OutputCode]:
    """The generated code records of a rank, in log order (cached on the capture)."""
    key = ("output_code", rank, "")
    got = cap._derived.get(key)
    if got is None:
        got = cap._derived[key] = _index(cap, rank)
    return got


def code_text(cap: "Capture", oc: OutputCode) -> str | None:
    """The wrapper code (None when its record does not read: the reading error is on the log)."""
    v = cap.payload(oc.rank, oc.record)
    return v if isinstance(v, str) else None


def kernel_count(cap: "Capture", oc: OutputCode) -> int:
    if oc.kernels is not None:
        return oc.kernels
    text = code_text(cap, oc)
    oc.kernels = len(kernels_of(text)) if text else 0
    return oc.kernels


def pipeline_of(cap: "Capture", oc: OutputCode) -> Any:
    """The rank's pipeline whose passes produced the graph the code was generated from, or None.
    A recompile may produce the very graph its first compile did: the pipeline of the code's own
    compile id is taken first."""
    if oc.graph is None:
        return None
    found = None
    for pl in cap.pipelines(oc.rank):
        if any(oc.graph in p.after.values() or oc.graph == p.before for p in pl.passes):
            if oc.compile_id is None or any(p.compile_id == oc.compile_id for p in pl.passes):
                return pl
            found = found or pl
    return found


def _compile_order(key: str) -> tuple:
    cid, _, k = key.rpartition("#")
    return tuple(int(x) for x in re.findall(r"\d+", cid)), cid, int(k) if k.isdigit() else 0


def compile_keys(cap: "Capture") -> dict[str, dict[int, OutputCode]]:
    """Compile key -> {rank: its code}: the N-th code a rank generated under compile id C is `C#N`
    (code made outside torch.compile, e.g. `compile_fx` in a graph trainer, has none: `#N`)."""
    key = ("output_code_keys", -1, "")
    got = cap._derived.get(key)
    if got is not None:
        return got
    out: dict[str, dict[int, OutputCode]] = {}
    for r in cap.ranks:
        seen: dict[str, int] = {}
        for oc in output_codes(cap, r):
            cid = oc.compile_id or ""
            k = seen.get(cid, 0)
            seen[cid] = k + 1
            out.setdefault(f"{cid}#{k}", {})[r] = oc
    # in compile order (0/0#0, 0/0#1, 1/0#0 ...), not in the order the ranks first had them
    out = dict(sorted(out.items(), key=lambda kv: _compile_order(kv[0])))
    cap._derived[key] = out
    return out
