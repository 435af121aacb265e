"""torch.compile's own story, per rank: every compile, and the events torch logged for it.

    story = compile_story(cap)                   # cached on the capture
    for c in story.compiles(0): print(c.label, c.function, c.status)
    for e in story.events(0): print(e.label, e.kind, e.reason, e.frame)
    story.trie(0)                                # the stack trie by compile id, as tlparse draws it

Read from torch's TORCH_TRACE records (nothing of ours): a capture keeps them beside its own logs,
in `DIR/torch_trace/` (`capture --torch-trace`), and a TORCH_TRACE directory or log is read as it
is. What becomes an event:

* `dynamo_graph_break_reason` artifacts: a graph break, its reason, the user frame `file:line`
  and code, and the resume function torch compiled after it (`torch_dynamo_resume_in_<fn>_at_<line>`);
* `compilation_metrics.restart_reasons`: a restart of the analysis (tlparse's `RestartAnalysis`
  rows, labelled `[frame/compile_attempt]`);
* `compilation_metrics.fail_type`: a compile that failed, its reason, user frame and whether it
  fell back to eager (`config_suppress_errors`) or raised;
* `recompile_reasons` artifacts (or `compilation_metrics.recompile_reason`): a recompile, with
  the guard that failed;
* `fx_graph_cache_*` / `aotautograd_cache_*` artifacts: cache hits, misses and bypasses.

A compile is every compile id that has a `dynamo_start` or `compilation_metrics` record, failed
ones included; its times per phase come from `compilation_metrics`. Nothing here imports torch.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graphtrain_inspect.capture.shared import logformat

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.read.capture_reader import Capture

# compilation_metrics fields -> phase name, in seconds or microseconds
_PHASES_S = (
    ("entire_frame_compile_time_s", "total"),
    ("dynamo_time_before_restart_s", "before_restart"),
    ("backend_compile_time_s", "backend"),
    ("inductor_compile_time_s", "inductor"),
    ("code_gen_time_s", "code_gen"),
)
_PHASES_US = (
    ("aot_autograd_cumulative_compile_time_us", "aot_autograd"),
    ("pre_grad_pass_time_us", "pre_grad_passes"),
    ("joint_graph_pass_time_us", "joint_graph_passes"),
    ("post_grad_pass_time_us", "post_grad_passes"),
    ("triton_compile_time_us", "triton"),
)
_CACHE_ARTIFACT_RE = re.compile(r"^(fx_graph|aotautograd)_cache_(hit|miss|bypass)$")
_BREAK_AT_RE = re.compile(r"Graph break in user code at (.+):(\d+)\s*$")
_TB_FILE_RE = re.compile(r'^\s*File "(.+)", line (\d+), in (.+)$')
_CODE_IN_REASON_RE = re.compile(r'# File "(.+)", line (\d+), in ([^,]+), code: (.*)$', re.M)
_GUARD_HEAD_RE = re.compile(r"^\d+/\d+: ")
_RESUME_RE = re.compile(r"^torch_dynamo_resume_in_(.+)_at_(\d+)$")
# restarts torch makes to trace the frame again with something it learned, not because of a break:
# compiler collectives (the ranks' dynamic-shape decisions shared, `CompileCollectiveRestartAnalysis`),
# an nn.Module traced again unspecialized, a float scalar tensorified. torch logs them by the
# exception's class (`str(type(e))`) where they carry no `restart_reason`
RETRACE_RESTARTS = ("CompileCollectiveRestartAnalysis", "UnspecializeRestartAnalysis", "TensorifyScalarRestartAnalysis")


def is_retrace(e: "CompileEvent") -> bool:
    """A restart torch makes to trace again, not one a graph break causes (RETRACE_RESTARTS)."""
    return e.kind == "restart" and any(name in e.detail for name in RETRACE_RESTARTS)


# fail types that are a graph break Dynamo could not take: with fullgraph=True (or where a break
# cannot be resumed) the compile fails instead of breaking
BREAK_FAIL_TYPES = frozenset({"Unsupported", "UncapturedHigherOrderOpError", "UserError"})


@dataclass(frozen=True)
class Frame:
    """A user frame: file, line, function and the code on that line (when torch logged it)."""

    file: str
    line: int | None
    name: str | None = None
    code: str | None = None

    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "fn": self.name, "code": self.code}


@dataclass
class CompileEvent:
    """One thing torch logged about a compile: a break, restart, failure, recompile or cache event."""

    rank: int
    kind: str  # break | restart | failure | recompile | cache
    compile_id: str  # frame/compile ("0/1"; "!0/1/0" under compiled autograd), without the attempt
    attempt: int
    reason: str  # one line
    detail: str = ""  # the whole text torch logged
    frame: Frame | None = None
    resume: str | None = None  # break: the function torch compiled to resume after it
    fail_type: str | None = None
    fell_back: bool | None = None  # failure: ran eagerly (suppress_errors) rather than raised
    guard: str | None = None  # recompile: the guard that failed
    cache: str | None = None  # cache: "fx_graph hit", "aotautograd bypass" ...
    line: int | None = None  # line of the record in its log

    @property
    def label(self) -> str:
        """The compile id as tlparse prints it: [0/0], [0/0_1] for a later attempt."""
        return f"[{self.compile_id}{f'_{self.attempt}' if self.attempt else ''}]"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "rank": self.rank,
            "compile_id": self.compile_id,
            "attempt": self.attempt,
            "label": self.label,
            "reason": self.reason,
            "frame": self.frame.to_json() if self.frame else None,
            "resume": self.resume,
            "fail_type": self.fail_type,
            "fell_back": self.fell_back,
            "guard": self.guard,
            "cache": self.cache,
            "detail": self.detail,
        }


@dataclass
class CompileInfo:
    """One compile id on one rank: the frame compiled, how it ended, its events and times."""

    rank: int
    compile_id: str
    function: str | None = None
    file: str | None = None
    firstlineno: int | None = None
    status: str = "missing"  # ok | restarted | failed | empty | missing (no compilation_metrics)
    stack: list[Frame] = field(default_factory=list)  # dynamo_start: the user stack, outermost first
    times: dict[str, float] = field(default_factory=dict)  # phase -> seconds
    cache: dict[str, int] = field(default_factory=dict)  # "fx_graph hit" -> count
    events: list[CompileEvent] = field(default_factory=list)
    ops: int | None = None  # graph_op_count
    order: int = 0  # first appearance in the log

    @property
    def label(self) -> str:
        return f"[{self.compile_id}]"

    @property
    def frame(self) -> Frame | None:
        return Frame(self.file, self.firstlineno, self.function) if self.file else None

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "compile_id": self.compile_id,
            "function": self.function,
            "file": self.file,
            "line": self.firstlineno,
            "status": self.status,
            "ops": self.ops,
            "times_s": dict(self.times),
            "cache": dict(self.cache),
            "stack": [f.to_json() for f in self.stack],
            "events": [e.to_json() for e in self.events],
        }


@dataclass
class CompileStory:
    """Every rank's compiles, in the order torch started them."""

    source: str | None  # the directory or log the records came from; None when there are none
    by_rank: dict[int, list[CompileInfo]] = field(default_factory=dict)
    note: str | None = None  # why there is nothing to read, when there is nothing

    def compiles(self, rank: int) -> list[CompileInfo]:
        return self.by_rank.get(rank, [])

    def compile(self, rank: int, compile_id: str) -> CompileInfo | None:
        base = base_compile_id(compile_id)
        return next((c for c in self.compiles(rank) if c.compile_id == base), None)

    def events(self, rank: int | None = None, kinds: tuple[str, ...] | None = None) -> list[CompileEvent]:
        out: list[CompileEvent] = []
        for r in [rank] if rank is not None else sorted(self.by_rank):
            for c in self.compiles(r):
                out.extend(e for e in c.events if kinds is None or e.kind in kinds)
        return out

    def counts(self, rank: int) -> dict[str, int]:
        c: dict[str, int] = {"compiles": len(self.compiles(rank))}
        for e in self.events(rank):
            c[e.kind] = c.get(e.kind, 0) + 1
        return c

    def trie(self, rank: int) -> list[tuple[int, Frame, list[CompileInfo]]]:
        """The stack trie (tlparse's): rows (depth, frame, compiles whose stack ends there). A
        chain of frames shared by every stack below it stays at one depth; where stacks part, each
        branch goes one level deeper, and so do the frames under a branch."""
        root: dict[str, Any] = {"children": {}, "compiles": []}
        for c in self.compiles(rank):
            node = root
            for f in c.stack or ([c.frame] if c.frame else []):
                key = (f.file, f.line, f.name)
                node = node["children"].setdefault(key, {"frame": f, "children": {}, "compiles": []})
            node["compiles"].append(c)
        rows: list[tuple[int, Frame, list[CompileInfo]]] = []

        # depth first, without recursion: a stack is as deep as the program's (a recursive model)
        todo: list[tuple[dict[str, Any], int, bool]] = [(root, 0, False)]  # (node, its depth, its parent branched)
        while todo:
            node, depth, nested = todo.pop()
            kids = list(node["children"].values())
            inner = depth + 1 if len(kids) > 1 or nested else depth
            if node is not root:
                rows.append((depth, node["frame"], node["compiles"]))
            todo.extend((k, inner, len(kids) > 1) for k in reversed(kids))
        return rows

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "note": self.note,
            "ranks": {str(r): [c.to_json() for c in cs] for r, cs in sorted(self.by_rank.items())},
        }


def missing_note(cap: "Capture") -> str | None:
    """Why a capture that compiled has no compile events to show (torch's logs were not kept
    beside it), or None: said by `ls` and, as a check not run, by `check`."""
    if compile_story(cap).source is not None or cap.kind != "capture":
        return None
    if any(p.compile_id for r in cap.ranks for p in cap.passes(r)):
        return "torch's TORCH_TRACE logs are not in this capture (capture --torch-trace keeps them in DIR/torch_trace)"
    return None


def capture_compiles(cap: "Capture") -> CompileStory:
    """The compiles a capture's own records show, for a capture without torch's logs: per rank,
    each compile id its passes and generated code were recorded under, in order, and a recompile
    where a frame's compile number is above 0 (`0/1`). No breaks, failures or guards (those are
    in torch's logs only: capture --torch-trace); enough to see ranks that compiled differently.
    Cached."""
    cached = getattr(cap, "_capture_compiles", None)
    if cached is not None:
        return cached
    from graphtrain_inspect.inspector.read.output_code import output_codes

    story = CompileStory("the capture's compile ids", note="graph breaks, failures and guards: capture --torch-trace")
    for rank in cap.ranks if cap.kind == "capture" else ():
        ids: dict[str, None] = {}
        for p in cap.passes(rank):
            if p.compile_id:
                ids.setdefault(base_compile_id(p.compile_id), None)
        for oc in output_codes(cap, rank):
            if oc.compile_id:
                ids.setdefault(base_compile_id(oc.compile_id), None)
        infos = []
        for i, cid in enumerate(ids):
            c = CompileInfo(rank, cid, status="ok", order=i)
            m = re.fullmatch(r"(\d+)/(\d+)", cid)
            if m and int(m.group(2)) > 0:
                c.events.append(
                    CompileEvent(
                        rank,
                        "recompile",
                        cid,
                        0,
                        f"frame {m.group(1)} compiled again "
                        "(the failed guard is in torch's logs: capture --torch-trace)",
                    )
                )
            infos.append(c)
        if infos:
            story.by_rank[rank] = infos
    cap._capture_compiles = story  # type: ignore[attr-defined]  # a per-capture cache kept on the capture
    return story


def base_compile_id(cid: str) -> str:
    """The compile id without its attempt: "0/0_1" -> "0/0"."""
    return re.sub(r"_\d+$", "", cid)


def compile_story(cap: "Capture") -> CompileStory:
    """The compile story of a capture (from `DIR/torch_trace/`) or of torch's logs; cached."""
    cached = getattr(cap, "_compile_story", None)
    if cached is not None:
        return cached
    story = _read_story(cap)
    cap._compile_story = story  # type: ignore[attr-defined]  # a per-capture cache kept on the capture
    return story


def _read_story(cap: "Capture") -> CompileStory:
    from graphtrain_inspect.inspector.errors import CaptureUnreadable
    from graphtrain_inspect.inspector.read.capture_index import open_capture

    if cap.kind == "torch_trace":
        src = cap
    elif cap.torch_trace_dir:
        try:
            src = open_capture(cap.torch_trace_dir, source="torch")
        except CaptureUnreadable as e:
            return CompileStory(None, note=f"torch's logs beside the capture do not read: {e}")
        cap._compile_story_src = src  # type: ignore[attr-defined]  # kept open with the capture
    else:
        return CompileStory(None, note="no torch TORCH_TRACE logs in this capture (capture --torch-trace records them)")
    story = CompileStory(src.path)
    for rank in src.ranks:
        story.by_rank[rank] = _read_rank(src, rank)
    return story


def _read_rank(src: "Capture", rank: int) -> list[CompileInfo]:
    log = src.log_file(rank)
    if log is None:
        return []
    strings: dict[int, str] = {}  # torch interns file names: {"str": [path, index]}
    compiles: dict[str, CompileInfo] = {}
    breaks: list[CompileEvent] = []

    def info(cid: str) -> CompileInfo:
        c = compiles.get(cid)
        if c is None:
            c = compiles[cid] = CompileInfo(rank, cid, order=len(compiles))
        return c

    for rec in log.records:
        kind = rec.kind
        if kind in logformat.SKIMMED_KINDS:
            continue  # no compile event (and its envelope is not decoded for nothing)
        if kind == "str":
            v = rec.env.get("str")
            if isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and type(v[1]) is int:
                strings[v[1]] = v[0]
            continue
        full = rec.compile_id
        if full is None:
            continue
        cid, attempt = base_compile_id(full), _int(rec.env.get("attempt")) or 0
        line = log.line_of(rec.offset)
        if kind == "dynamo_start":
            c = info(cid)
            stack = rec.meta.get("stack")
            if isinstance(stack, list) and not c.stack:
                c.stack = [f for f in (_stack_frame(s, strings) for s in stack) if f is not None]
        elif kind == "compilation_metrics":
            _metrics(info(cid), rec.meta, attempt, line)
        elif kind == "dynamo_graph_break_reason":
            text = log.payload(rec)
            if isinstance(text, str):
                ev = _break_event(rank, cid, attempt, text, line)
                info(cid).events.append(ev)
                breaks.append(ev)
        elif kind == "recompile_reasons":
            guards = _text_or_json_lines(log, rec)
            c = info(cid)
            c.events.append(
                CompileEvent(
                    rank,
                    "recompile",
                    cid,
                    attempt,
                    _guard_line(guards),
                    "\n".join(guards),
                    frame=_last_tb_frame(guards[0].splitlines()) if guards else None,
                    guard=_guard_line(guards),
                    line=line,
                )
            )
        elif (m := _CACHE_ARTIFACT_RE.match(kind)) and "artifact" in rec.env:
            which = f"{m.group(1)} {m.group(2)}"
            c = info(cid)
            c.cache[which] = c.cache.get(which, 0) + 1
            v = log.payload(rec)
            why = v.get("cache_bypass_reason") if isinstance(v, dict) else None
            reason = which + (f": {_first_line(str(why))}" if why else "")
            c.events.append(CompileEvent(rank, "cache", cid, attempt, reason, str(why or ""), cache=which, line=line))
    out = sorted(compiles.values(), key=lambda c: c.order)
    for c in out:
        if c.frame is None and c.stack:
            last = c.stack[-1]
            c.function, c.file, c.firstlineno = last.name, last.file, last.line
        recompile = next((e for e in c.events if e.kind == "recompile"), None)
        if recompile is not None and recompile.frame is None:
            recompile.frame = c.frame
    _link_breaks(out, breaks)
    return out


def _metrics(c: CompileInfo, m: dict[str, Any], attempt: int, line: int) -> None:
    c.function = _s(m.get("co_name")) or c.function
    c.file = _s(m.get("co_filename")) or c.file
    c.firstlineno = _int(m.get("co_firstlineno")) if _int(m.get("co_firstlineno")) is not None else c.firstlineno
    c.ops = _int(m.get("graph_op_count"))
    for key, name in _PHASES_S:
        if type(m.get(key)) in (int, float):
            c.times[name] = float(m[key])
    for key, name in _PHASES_US:
        if type(m.get(key)) in (int, float):
            c.times[name] = m[key] / 1e6
    for key, which in (
        ("inductor_fx_local_cache_hit_count", "fx_graph local hit"),
        ("inductor_fx_local_cache_miss_count", "fx_graph local miss"),
        ("aotautograd_local_cache_hit_count", "aotautograd local hit"),
        ("aotautograd_local_cache_miss_count", "aotautograd local miss"),
    ):
        if _int(m.get(key)):
            c.cache[which] = m[key]
    restarts = m.get("restart_reasons")
    fail_type = _s(m.get("fail_type"))
    if isinstance(restarts, list):
        for r in restarts:
            text = str(r)
            c.events.append(
                CompileEvent(c.rank, "restart", c.compile_id, attempt, _summary(text), text, frame=None, line=line)
            )
    if fail_type:
        reason = _s(m.get("fail_reason")) or ""
        file, lineno = _s(m.get("fail_user_frame_filename")), _int(m.get("fail_user_frame_lineno"))
        code = None
        cm = _CODE_IN_REASON_RE.search(reason)
        if cm and file and cm.group(1) == file and int(cm.group(2)) == lineno:
            code = cm.group(4).strip()
        frame = Frame(file, lineno, _s(m.get("co_name")), code) if file else None
        suppress = m.get("config_suppress_errors")
        c.events.append(
            CompileEvent(
                c.rank,
                "failure",
                c.compile_id,
                attempt,
                f"{fail_type}: {_summary(reason)}" if reason else fail_type,
                reason,
                frame=frame,
                fail_type=fail_type,
                fell_back=suppress if isinstance(suppress, bool) else None,
                line=line,
            )
        )
        c.status = "failed"
    elif isinstance(restarts, list) and restarts:
        c.status = "restarted"
    elif c.ops == 0:
        c.status = "empty"
    else:
        c.status = "ok"
    if not any(e.kind == "recompile" for e in c.events) and _s(m.get("recompile_reason")):
        g = str(m["recompile_reason"])
        c.events.append(
            CompileEvent(c.rank, "recompile", c.compile_id, attempt, _first_line(g), g, guard=_first_line(g), line=line)
        )


def _break_event(rank: int, cid: str, attempt: int, text: str, line: int) -> CompileEvent:
    lines = text.splitlines()
    frame: Frame | None = None
    if lines and (m := _BREAK_AT_RE.match(lines[0].strip())):
        frame = Frame(m.group(1), int(m.group(2)))
    # the user code traceback's last frame: its function and code
    tb_start = next((i for i, l in enumerate(lines) if l.startswith("User code traceback")), None)
    if tb_start is not None:
        end = next((i for i in range(tb_start + 1, len(lines)) if not lines[i].startswith(" ")), len(lines))
        last = _last_tb_frame(lines[tb_start + 1 : end])
        if last is not None and (frame is None or (frame.file, frame.line) == (last.file, last.line)):
            frame = last
    reason_text = text
    rm = re.search(r"Graph Break Reason: (.*)", text, re.S)
    if rm:
        reason_text = rm.group(1).split("\n\nUser code traceback")[0]
    return CompileEvent(rank, "break", cid, attempt, _summary(reason_text), reason_text.strip(), frame=frame, line=line)


def _last_tb_frame(lines: list[str]) -> Frame | None:
    """The last `File "X", line N, in fn` frame of a traceback's lines, with the code line under
    it; None without one."""
    last: Frame | None = None
    for i, l in enumerate(lines):
        fm = _TB_FILE_RE.match(l)
        if fm:
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            code = nxt.strip() if nxt.startswith("    ") and not _TB_FILE_RE.match(nxt) else None
            last = Frame(fm.group(1), int(fm.group(2)), fm.group(3), code)
    return last


def _link_breaks(compiles: list[CompileInfo], breaks: list[CompileEvent]) -> None:
    """A break's resume function: the first later compile of `torch_dynamo_resume_in_<fn>_at_<line>`
    in the break's file at its line. Restarts take the frame of their attempt's break."""
    order = {c.compile_id: c.order for c in compiles}
    for b in breaks:
        if b.frame is None:
            continue
        for c in compiles:
            if order[c.compile_id] <= order.get(b.compile_id, -1) or not c.function:
                continue
            m = _RESUME_RE.match(c.function)
            if (
                m
                and int(m.group(2)) == b.frame.line
                and (c.file is None or c.file == b.frame.file)
                and (b.frame.name in (None, m.group(1)))
            ):
                b.resume = c.function
                break
    for c in compiles:
        for e in c.events:
            if e.kind == "restart" and e.frame is None:
                bk = next(
                    (b for b in c.events if b.kind == "break" and b.attempt < e.attempt and b.frame is not None), None
                )
                e.frame = bk.frame if bk else c.frame
                if bk is not None:
                    e.resume = bk.resume


def _text_or_json_lines(log: Any, rec: Any) -> list[str]:
    """The lines of a payload torch marks "json" but writes as plain text (`recompile_reasons`:
    one guard a line): a JSON list when it parses, else the text's lines. Read undecoded, so
    that a payload that is not JSON is not reported as a damaged record."""
    got = log.payload_text(rec)
    if got is None:
        return []
    text = got[0].decode("utf-8", "replace")
    try:
        import orjson

        v = orjson.loads(got[0])
        if isinstance(v, list):
            return [str(g) for g in v]
        return [str(v)]
    except ValueError:
        # one reason per guard, each starting with the compile id it failed for ("0/0: ..."),
        # followed by lines of its user stack
        out: list[str] = []
        for l in text.splitlines():
            if _GUARD_HEAD_RE.match(l) or not out:
                out.append(l)
            else:
                out[-1] += "\n" + l
        return [g for g in out if g.strip()]


def _stack_frame(s: Any, strings: dict[int, str]) -> Frame | None:
    if not isinstance(s, dict):
        return None
    fn = s.get("filename")
    file = strings.get(fn, f"<file {fn}>") if type(fn) is int else fn if isinstance(fn, str) else "?"
    loc = s.get("loc")
    return Frame(file, _int(s.get("line")), _s(s.get("name")), loc if isinstance(loc, str) and loc else None)


def _summary(text: str) -> str:
    """One line of a reason: torch's graph-break type and its explanation when it has them
    ("Failed to trace builtin operator: Dynamo does not know how ..."), else its first line."""
    lines = [l for l in text.splitlines()]
    for i, l in enumerate(lines):
        if l.strip().startswith("Explanation:") and i > 0:
            head = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            return f"{head}: {l.strip()[len('Explanation:') :].strip()}"
    nonblank = [l.strip() for l in lines if l.strip()]
    if len(nonblank) > 1 and nonblank[0].endswith(":"):  # "backend='x' raised:" / "RuntimeError: ..."
        return f"{nonblank[0]} {nonblank[1]}"
    return _first_line(text)


def _first_line(text: str) -> str:
    return next((l.strip() for l in text.splitlines() if l.strip()), "").strip("'\"")


def _guard_line(guards: list[str]) -> str:
    """The failed guards in one line: torch pads each guard and appends its source line as a
    comment (`mode == 'warmup'            # if mode == ...`): the padding is cut to two spaces."""
    return "; ".join(re.sub(r"\s{3,}", "  ", _first_line(g)) for g in guards) or "?"


def _int(v: Any) -> int | None:
    return v if type(v) is int else None


def _s(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


_TORCH_FILE_RE = re.compile(r"(?:^|[/\\])(?:site|dist)-packages[/\\](torch[/\\].+)$|^(torch[/\\].+)$")


def torch_own(frame: Frame | None) -> str | None:
    """The path inside torch's package of a frame in torch's own code (`torch/distributed/fsdp/
    _fully_shard/_fsdp_common.py`), or None for the user's code (or no frame)."""
    if frame is None or not frame.file:
        return None
    m = _TORCH_FILE_RE.search(frame.file)
    return (m.group(1) or m.group(2)).replace("\\", "/") if m else None


def short_path(path: str, base: str | None = None) -> str:
    """A frame's file as a user reads it: relative to `base` (the working directory) when inside it."""
    base = base or os.getcwd()
    if path.startswith(base.rstrip(os.sep) + os.sep):
        return path[len(base.rstrip(os.sep)) + 1 :]
    return path
