"""`graphtrain-inspect diff DIR --output-code`: Inductor's generated code across ranks or compiles.

* `--output-code --ranks A,B`: each compile's generated code on rank A against rank B, normalized
  (kernel names without Inductor's counter, each rank's own device index, stream numbers, group
  names, cache paths): empty where the ranks agree, so a rank-baked literal shows as one line.
* `--output-code --compiles K1,K2 [--rank R]`: two compiles' code on one rank (keys as `ls` and
  `check` name them: `0/0#0`, `1/0#0`, `#0` for code made outside torch.compile).

`--pipeline KEY` (a compile id or key) keeps only that compile. Exit 0; 2 when DIR cannot be read,
or a rank or compile does not exist.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from graphtrain_inspect.inspector.cli.common import CommandError, diff_title, open_or_fail, rank_pair, write_diffs


def _pick(keys: list[str], want: str | None) -> list[str]:
    if want is None:
        return keys
    return [k for k in keys if k == want or k.split("#")[0] == want]


def run(args: argparse.Namespace, text_lines: Any) -> int:
    from graphtrain_inspect.capture.shared.terminal_text import Style, want_color
    from graphtrain_inspect.inspector.cli.common import print_read_errors
    from graphtrain_inspect.inspector.read.output_code import compile_keys

    cap = open_or_fail(args.dir, args.source)
    st = Style(want_color(args.color))
    out: list[str] = []
    docs: list[dict] = []
    with cap:
        print_read_errors(cap)
        by_key = compile_keys(cap)
        if not by_key:
            raise CommandError(
                f"no generated code in {args.dir} (capture with Inductor hooks on, or TORCH_TRACE a torch.compile run)"
            )
        if args.compiles:
            pairs = [_compile_pair(cap, by_key, args)]
        else:
            pairs = _rank_pairs(cap, by_key, args, st, out, docs)
        _diff_pairs(cap, pairs, args, st, text_lines, out, docs)
    write_diffs(docs, out, args.json)
    return 0


@dataclass
class _Pair:
    """Two pieces of generated code to compare, under `title`."""

    title: str
    ra: int
    a: Any  # OutputCode
    rb: int
    b: Any


def _compile_pair(cap: Any, by_key: dict[str, dict[int, Any]], args: argparse.Namespace) -> _Pair:
    """`--compiles K1,K2`: two compiles' code on one rank."""
    parts = args.compiles.split(",")
    if len(parts) != 2:
        raise CommandError(f"--compiles wants two compile keys like 0/0#0,1/0#0, not {args.compiles!r}")
    rank = args.rank if args.rank is not None else (cap.ranks[0] if cap.ranks else 0)
    got = []
    for k in parts:
        ks = _pick(sorted(by_key), k)
        oc = next((by_key[x][rank] for x in ks if rank in by_key[x]), None)
        if oc is None:
            raise CommandError(
                f"no generated code of compile {k!r} on rank {rank} (compiles: {', '.join(sorted(by_key))})"
            )
        got.append(oc)
    title = diff_title("generated code", f"rank {rank}", f"compile {parts[0]}", f"compile {parts[1]}")
    return _Pair(title, rank, got[0], rank, got[1])


def _rank_pairs(
    cap: Any, by_key: dict[str, dict[int, Any]], args: argparse.Namespace, st: Any, out: list[str], docs: list[dict]
) -> list[_Pair]:
    """`--ranks A,B`: each compile's code on the two ranks (a compile one of them lacks is said so)."""
    ra, rb = rank_pair(cap, args.ranks, args.dir, "--output-code wants --ranks A,B or --compiles K1,K2")
    keys = _pick(list(by_key), args.pipeline)
    if not keys:
        raise CommandError(f"no generated code of compile {args.pipeline!r} (compiles: {', '.join(by_key)})")
    pairs = []
    for k in keys:
        per = by_key[k]
        title = diff_title("generated code", f"compile {k}", f"rank {ra}", f"rank {rb}")
        missing = [r for r in (ra, rb) if r not in per]
        if missing:
            out.append(st(title, "bold", "magenta"))
            out.append(
                st(
                    f"  rank {missing[0]} has no generated code for this compile (compiled elsewhere, or not at all)",
                    "red",
                )
            )
            docs.append({"compile": k, "missing_on": missing})
            continue
        pairs.append(_Pair(title, ra, per[ra], rb, per[rb]))
    return pairs


def _diff_pairs(
    cap: Any, pairs: list[_Pair], args: argparse.Namespace, st: Any, text_lines: Any, out: list[str], docs: list[dict]
) -> None:
    from graphtrain_inspect.inspector.diff.graph_diff import text_diff
    from graphtrain_inspect.inspector.diff.normalize import RankContext
    from graphtrain_inspect.inspector.diff.output_code import CodeNormalizer
    from graphtrain_inspect.inspector.read.output_code import code_text

    ctxs: dict[tuple, RankContext] = {}

    def norm(r: int, oc: Any) -> list[str] | None:
        key = (r, oc.graph)
        if key not in ctxs:
            # the own device of the graph the code was made from (torch's logs: inferred from its inputs)
            ctxs[key] = RankContext.from_table(
                r, cap.rank_table(r), local_rank=cap.local_rank(r), own_device=cap.own_device(r, oc.graph)
            )
        text = code_text(cap, oc)
        return None if text is None else CodeNormalizer(ctxs[key]).lines(text)

    for p in pairs:
        ra, a, rb, b = p.ra, p.a, p.rb, p.b
        out.append(st(p.title, "bold", "magenta"))
        la, lb = norm(ra, a), norm(rb, b)
        if la is None or lb is None:
            out.append(st("  generated code unreadable on one side", "red"))
            continue
        d = text_diff(la, lb, f"rank {ra} {a.oid}", f"rank {rb} {b.oid}", context=args.context)
        docs.append(
            {
                "title": p.title,
                "a": {"rank": ra, "oid": a.oid, "compile_id": a.compile_id},
                "b": {"rank": rb, "oid": b.oid, "compile_id": b.compile_id},
                "empty": not d,
                "diff": d,
            }
        )
        if not d:
            out.append(st("  the generated code agrees (after normalization)", "green"))
            continue
        out.extend(text_lines(la, lb, f"rank {ra} {a.oid}", f"rank {rb} {b.oid}", args, st))
