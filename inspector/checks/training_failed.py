"""training-failed: the training itself failed on some rank; said first, before anything else.

A run whose training raised or died is still a capture, and its failure is the first thing to
report: every other finding is about graphs that may never have run to the end. One **error**
per root cause:

* an exception (the rank's `gti_failure` record, capture.failure): its type and message, the
  ranks that raised it (the same type and message on several ranks is one finding), and where its
  traceback runs through code the capture recorded: a line of Inductor's generated code (the
  frame's file is a recorded `gti_output_code`: that line, the kernel it calls or defines, and
  the post-grad FX nodes the kernel computes, from `gti_codegen`'s `kernels`), or a line of a
  captured FX graph's generated forward (`<eval_with_key>.N`: the node that line computes and
  the pass that returned the graph). The innermost such frame is the one named;
* a rank that died without a Python exception: killed by a signal ("rank 1 died (SIGKILL)") or
  exited with a non-zero code (how its parent reaped it: manifest `ranks.R.exit`, the status
  files, or `simulated.per_rank`);
* the command failed and no rank says why (a launcher's own failure, or a capture whose ranks
  wrote nothing, from before `gti_failure`).

Consequences are named, not counted as causes: ranks torchrun tore down (SIGTERM) after another
rank failed, and exceptions raised later on other ranks that say a peer is gone (a collective
whose connection closed). An interrupted command (Ctrl-C, SIGTERM to the launcher) is not a
training failure: incomplete-capture says what it cut short.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graphtrain_inspect.inspector.checks import natural_key
from graphtrain_inspect.inspector.checks.findings import Finding
from graphtrain_inspect.inspector.checks.incomplete_capture import expected_ranks

if TYPE_CHECKING:
    from graphtrain_inspect.inspector.checks.context import CheckContext

KIND = "training-failed"
DESCRIPTION = "a rank's training raised or died (the exception, its ranks, the generated line or FX node it points at)"

# The signals a launcher ends the other ranks with once one failed (torchrun: SIGTERM, then SIGKILL
# after its grace period): a rank ended so is a consequence when another rank failed first.
_TEARDOWN = ("SIGTERM", "SIGINT", "SIGHUP")
# An exception that says a collective's peer went away: a consequence of another rank's failure
# when one failed earlier (gloo's "Connection closed by peer", NCCL's aborted communicator...).
_PEER_LOST = (
    "Connection closed by peer",
    "Connection reset by peer",
    "Broken pipe",
    "communicator was aborted",
    "DistBackendError",
    "DistNetworkError",
)
_MESSAGE_CHARS = 300


@dataclass
class _Cause:
    """One root cause, on one or more ranks."""

    key: tuple
    ranks: list[int]
    time: float | None
    text: str  # "raised ValueError" / "died (SIGKILL)" / "exited with code 3 ..."
    evidence: dict[str, Any] = field(default_factory=dict)
    frame: dict[str, Any] | None = None  # the innermost frame in recorded generated code
    innermost: dict[str, Any] | None = None  # the traceback's innermost frame
    user: dict[str, Any] | None = None  # its innermost frame in the program's own files
    said: str = ""  # the exception's message, its first line (after where it was raised)


def _ended(cap: Any, r: int) -> dict[str, Any] | None:
    """{"exit_code", "signal"} of the rank's process, where its parent recorded it."""
    ex = cap.rank_exit(r)
    if ex is not None:
        return ex
    for st in reversed(getattr(cap, "statuses", {}).get(r, ())):
        if type(st.get("exit_code")) is int:
            sig = st.get("signal")
            return {"exit_code": st["exit_code"], "signal": sig if isinstance(sig, str) else None}
    m = cap.manifest if isinstance(cap.manifest, dict) else {}
    sim = m.get("simulated")
    per = sim.get("per_rank") if isinstance(sim, dict) else None
    ent = per.get(str(r)) if isinstance(per, dict) else None
    if isinstance(ent, dict) and type(ent.get("exit_code")) is int:
        sig = ent.get("signal")
        return {"exit_code": ent["exit_code"], "signal": sig if isinstance(sig, str) else None}
    return None


def _short_type(name: str) -> str:
    return name.rsplit(".", 1)[-1] if name.startswith(("builtins.", "torch.")) or "." in name else name


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return (lines[0] if lines else "")[:_MESSAGE_CHARS]


def run(ctx: CheckContext) -> list[Finding]:
    return findings_of(ctx.cap)


def findings_of(cap: Any) -> list[Finding]:
    """The check's findings on a capture (`ls` says them too)."""
    if getattr(cap, "kind", None) != "capture":
        return []
    m = cap.manifest if isinstance(cap.manifest, dict) else {}
    status = m.get("status")
    if status in ("running", "interrupted"):
        return []  # still going, or stopped by its user: not the training's failure
    if status == "finished" and m.get("exit_code") == 0:
        # The command succeeded: no rank's training failed. An exception recorded under a rank
        # then came from a helper process that inherited the rank's environment (a compile
        # worker, a probe run in a subprocess), not from the training.
        return []
    ranks = sorted(set(expected_ranks(cap)) | {r for r in getattr(cap, "statuses", {}) if type(r) is int})
    causes = _raised(cap, ranks)
    raised = {r for c in causes.values() for r in c.ranks}
    for r in ranks:
        ex = _ended(cap, r)
        if r in raised or ex is None or ex["exit_code"] == 0:
            continue
        sig = ex["signal"]
        key = ("died", sig) if sig else ("exited", ex["exit_code"])
        text = f"died ({sig})" if sig else f"exited with code {ex['exit_code']} (no Python exception recorded)"
        causes.setdefault(key, _Cause(key, [], None, text, {"exit": ex})).ranks.append(r)
    consequences = _take_consequences(causes)
    findings = [_finding(c, consequences) for c in causes.values()]
    code = m.get("exit_code")
    if not findings and status == "failed" and type(code) is int and code != 0:
        wrote = [r for r in cap.ranks if cap.records(r)]
        why = "no rank wrote a record" if not wrote else "no rank recorded an exception or a failed exit"
        findings.append(
            Finding(
                kind=KIND,
                severity="error",
                message=f"the command failed (exit {code}) and {why}: see its own output for why",
                evidence={
                    "problem": "command-failed",
                    "exit_code": code,
                    "detail": str(m.get("command_line") or "")[:300],
                },
            )
        )
    return findings


def _raised(cap: Any, ranks: list[int]) -> dict[tuple, _Cause]:
    """One cause per distinct exception (type, first line of its message), with its ranks."""
    causes: dict[tuple, _Cause] = {}
    for r in ranks:
        fails = cap.failures(r) if r in cap.ranks else []
        if not fails:
            continue
        fail = _of_the_rank(cap, r, fails)
        typ = str(fail.get("type") or "Exception")
        msg = _first_line(str(fail.get("message") or ""))
        key = ("raised", typ, msg)
        c = causes.get(key)
        if c is None:
            t = fail.get("time")
            c = causes[key] = _Cause(key, [], t if isinstance(t, (int, float)) else None, f"raised {_short_type(typ)}")
            c.said = msg
            c.evidence = {
                "exception": {"type": typ, "message": str(fail.get("message") or "")[:2000]},
                "traceback": str(fail.get("traceback") or "")[-3000:],
            }
            c.frame = _generated_frame(cap, r, fail)
            frames = [fr for fr in fail.get("frames") or () if isinstance(fr, dict)]
            c.innermost = frames[-1] if frames else None
            c.user = next((fr for fr in reversed(frames) if _user_file(str(fr.get("file") or ""))), None)
        c.ranks.append(r)
    return causes


def _of_the_rank(cap: Any, r: int, fails: list[dict[str, Any]]) -> dict[str, Any]:
    """The failure of the rank's own process: the one whose process its parent saw fail (a helper
    process with the rank's environment, a compile worker, writes to the rank's log too), else
    the first."""
    failed = {st.get("pid") for st in getattr(cap, "statuses", {}).get(r, ()) if st.get("exit_code")}
    m = cap.manifest if isinstance(cap.manifest, dict) else {}
    entry = (m.get("ranks") or {}).get(str(r)) if isinstance(m.get("ranks"), dict) else None
    for p in (entry.get("processes") if isinstance(entry, dict) else None) or ():
        if isinstance(p, dict) and p.get("exit_code"):
            failed.add(p.get("pid"))
    return next((f for f in fails if f.get("pid") in failed), fails[0])


def _take_consequences(causes: dict[tuple, _Cause]) -> dict[int, str]:
    """Take the causes that follow from another out of `causes`; what each of their ranks did."""
    out: dict[int, str] = {}
    firsts = [c for c in causes.values() if not _is_consequence(c, causes)]
    if not firsts:
        return out
    for c in list(causes.values()):
        if c not in firsts:
            for r in c.ranks:
                out[r] = _consequence(c)
            del causes[c.key]
    return out


def _consequence(c: _Cause) -> str:
    """What a consequence did, in a few words: torn down, or lost its peer (and how it said so)."""
    if c.key[0] == "died":
        return f"was torn down ({c.key[1]})"
    return f"raised {_short_type(str(c.key[1]))} ({_peer_lost(c) or 'a lost peer'})"


def _peer_lost(c: _Cause) -> str | None:
    """The words of an exception that say a collective's peer is gone, or None."""
    text = f"{c.key[1]} {c.key[2]}".lower()
    return next((p for p in _PEER_LOST if p.lower() in text), None)


def _is_consequence(c: _Cause, causes: dict[tuple, _Cause]) -> bool:
    """Whether `c` follows from another cause: a teardown signal, or a lost peer after a failure."""
    others = [o for o in causes.values() if o is not c]
    if not others:
        return False
    if c.key[0] == "died" and c.key[1] in _TEARDOWN:
        return any(not (o.key[0] == "died" and o.key[1] in _TEARDOWN) for o in others)
    if c.key[0] == "raised" and _peer_lost(c):
        earlier = [o for o in others if o.key[0] != "raised" or not _peer_lost(o)]
        return any(o.time is None or c.time is None or o.time <= c.time for o in earlier)
    return False


def _finding(c: _Cause, consequences: dict[int, str]) -> Finding:
    who = "rank" if len(c.ranks) == 1 else "ranks"
    ranks_text = ", ".join(map(str, c.ranks))
    msg = f"{who} {ranks_text} {c.text}"  # where it was raised, then what it said: the place stays in view
    ev: dict[str, Any] = {"problem": c.key[0], **c.evidence, "ranks": list(c.ranks)}
    f = Finding(kind=KIND, severity="error", message=msg, ranks=list(c.ranks))
    fr = c.frame
    if fr is not None:
        where = fr.pop("_where")
        f.message += f" {where}"
        ev["where"] = fr
        f.graph, f.node = fr.get("graph"), fr.get("node")
        if fr.get("layer") == "codegen":
            f.layer = "codegen"
            f.pipeline = fr.pop("_pipeline", None)
            f.introduced_seq = f.last_seq = fr.pop("_seq", None)
        if fr.get("pass"):
            f.introduced_by = f.pass_ = fr["pass"]
            f.introduced_seq = f.last_seq = fr.get("seq")
        if fr.get("layer") == "codegen":
            # as the codegen checks give them: the evidence line, and where the TUI's Output code view opens
            ev["line"], ev["code"] = fr.get("line"), fr.get("code")
            if fr.get("kernel"):
                ev["kernel"] = fr["kernel"]
        else:
            ev["detail"] = f"line {fr.get('line')} of the graph's forward: {fr.get('code') or ''}"
    elif c.innermost is not None:
        if c.user is not None:  # where the program raised, as a finding's source line
            u = c.user
            f.source = {"file": u.get("file"), "line": u.get("line"), "code": u.get("code"), "fn": u.get("function")}
        if c.innermost is not c.user:
            fr = c.innermost
            at = f"{os.path.basename(str(fr.get('file')))}:{fr.get('line')} in {fr.get('function')}"
            ev["detail"] = f"raised at {at}: {fr.get('code') or ''}"
    if c.said:
        f.message += f": {c.said}"
    if consequences:
        torn = sorted(consequences)
        ev["consequences"] = {str(r): consequences[r] for r in torn}
        f.message += "; as a consequence " + ", ".join(f"rank {r} {consequences[r]}" for r in torn)
    f.evidence = ev
    return f


def _user_file(path: str) -> bool:
    """Whether a traceback's file is the program's own: not Python's library, an installed package
    or generated code (`<...>`)."""
    return bool(path) and not path.startswith("<") and "/site-packages/" not in path and "/lib/python3" not in path


def _generated_frame(cap: Any, rank: int, fail: dict[str, Any]) -> dict[str, Any] | None:
    """The innermost frame of the traceback in generated code the capture recorded, with what it
    maps to; None when no frame runs recorded code."""
    frames = fail.get("frames")
    if not isinstance(frames, list):
        return None
    for fr in reversed(frames):
        if not isinstance(fr, dict) or type(fr.get("line")) is not int:
            continue
        if isinstance(fr.get("oid"), str):
            hit = _output_code_frame(cap, rank, fr)
            if hit is not None:
                return hit
        if isinstance(fr.get("node"), str) or type(fr.get("pass_seq")) is int:
            return _fx_frame(cap, rank, fr)
    return None


def _base(fr: dict[str, Any]) -> dict[str, Any]:
    return {
        "file": str(fr.get("file") or "")[:500],
        "line": fr["line"],
        "function": str(fr.get("function") or "")[:200],
        "code": str(fr.get("code") or "")[:500],
    }


def _output_code_frame(cap: Any, rank: int, fr: dict[str, Any]) -> dict[str, Any] | None:
    from graphtrain_inspect.inspector.read.output_code import code_text, kernels_of, output_codes, pipeline_of

    oc = next((o for o in output_codes(cap, rank) if o.oid == fr["oid"]), None)
    if oc is None:
        return None
    out = {**_base(fr), "oid": oc.oid, "layer": "codegen", "graph": oc.graph, "compile_id": oc.compile_id}
    pl = pipeline_of(cap, oc)
    if pl is not None and pl.passes:  # placed as the codegen checks place theirs: the pipeline's last state
        out["_pipeline"], out["_seq"] = pl.key, pl.passes[-1].seq
    text = code_text(cap, oc) or ""
    lines = text.splitlines()
    i = fr["line"] - 1
    if 0 <= i < len(lines):
        out["code"] = lines[i].strip()[:500]  # the recorded line (the file may be gone)
    kernels = kernels_of(text) if text else []
    names = [k.name for k in kernels]
    kernel = next((k.name for k in kernels if k.header <= i <= k.last), None)
    if kernel is None and 0 <= i < len(lines):
        called = re.findall(r"\b([A-Za-z_]\w*)\s*(?:\.run)?\(", lines[i])
        kernel = next((n for n in called if n in names or n in oc.origins), None)
    # by name: the kernel's origins are a set in torch (their order is not the graph's)
    nodes = sorted(oc.origins.get(kernel, []), key=natural_key) if kernel else []
    if kernel:
        out["kernel"] = kernel
    if nodes:
        out["nodes"] = nodes[:50]
        out["node"] = nodes[0]
    where = f"at line {fr['line']} of Inductor's generated code"  # "rank 1 raised X at line ..."
    if oc.compile_id:
        where += f" (compile {oc.compile_id})"
    if kernel:
        where += f", kernel {kernel}"
    if nodes:
        where += f" (FX node{'s' if len(nodes) > 1 else ''} {', '.join(nodes[:5])}{', ...' if len(nodes) > 5 else ''})"
    out["_where"] = where
    return out


def _fx_frame(cap: Any, rank: int, fr: dict[str, Any]) -> dict[str, Any]:
    out = _base(fr)
    node = fr.get("node") if isinstance(fr.get("node"), str) else None
    seq = fr.get("pass_seq") if type(fr.get("pass_seq")) is int else None
    p = next((p for p in cap.passes(rank) if p.seq == seq), None) if seq is not None else None
    where = f"in {str(fr.get('file'))[:60]} (an FX graph's generated forward)"
    if p is not None:
        gids = [g for g in (p.after or {}).values() if isinstance(g, str)]
        gid = next((g for g in gids if node is None or cap.node_row(rank, g, "", node)[1] is not None), None)
        out.update(graph=gid, seq=p.seq, **{"pass": p.name})
        where = f"in the forward of the graph pass {p.name} returned"  # "rank 1 raised X in the forward ..."
    if node is not None:
        out["node"] = node
        where += f", FX node {node}"
    out["_where"] = where
    return out


def evidence_lines(f: Finding) -> list[str]:
    """The finding's evidence as lines of text (`check`, `report`, the TUI and SARIF show them)."""
    if f.layer == "codegen":
        from graphtrain_inspect.inspector.checks.codegen_sites import code_evidence_lines

        return code_evidence_lines(f)
    detail = str((f.evidence or {}).get("detail") or "")
    return [detail] if detail else []
