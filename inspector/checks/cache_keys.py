"""Each compile's FX graph cache key as the capture recorded it (`gti_codegen.cache_key`), looked
up by key and by the pipeline whose graph the compile lowered: what cache-shared-code compares, and
what rank-baked-constant's grading asks (a pass's rank literal in a compile keyed per rank).
"""

from __future__ import annotations

from graphtrain_inspect.inspector.checks.context import CheckContext
from graphtrain_inspect.inspector.read.output_code import OutputCode, compile_keys, pipeline_of


def by_cache_key(ctx: CheckContext) -> dict[str, dict[int, OutputCode]]:
    """Cache key -> {rank: the first code that rank compiled under it}, in compile order (cached)."""
    got = getattr(ctx, "_cache_keys", None)
    if got is not None:
        return got
    out: dict[str, dict[int, OutputCode]] = {}
    for per_rank in compile_keys(ctx.cap).values():
        for r, oc in sorted(per_rank.items()):
            if oc.cache_key is not None:
                out.setdefault(oc.cache_key, {}).setdefault(r, oc)
    ctx._cache_keys = out  # type: ignore[attr-defined]  # a per-context cache kept on the context
    return out


def undetermined_keys(ctx: CheckContext) -> dict[str, int]:
    """Keys under which one rank compiled two different codes, each with that rank: there the key
    does not determine the code (torch's cache tells such entries apart by more than the key, the
    guards it evaluates on lookup), so two ranks' codes under it say nothing of sharing."""
    seen: dict[tuple[str, int], set[str]] = {}
    for per_rank in compile_keys(ctx.cap).values():
        for r, oc in per_rank.items():
            if oc.cache_key is not None:
                seen.setdefault((oc.cache_key, r), set()).add(oc.oid)
    out: dict[str, int] = {}
    for (key, r), oids in sorted(seen.items()):
        if len(oids) > 1:
            out.setdefault(key, r)
    return out


def keyed_per_rank(ctx: CheckContext, pipeline: str | None, ranks: list[int]) -> bool:
    """Whether the compile whose post-grad passes make `pipeline` filed each of `ranks`' code under
    a key of its own: every rank has a key, and no two share one (the key holds the rank)."""
    if not pipeline or len(ranks) < 2:
        return False
    keys = _keys_by_pipeline(ctx).get(pipeline, {})
    got = [keys.get(r) for r in ranks]
    return None not in got and len(set(got)) == len(ranks)


def _keys_by_pipeline(ctx: CheckContext) -> dict[str, dict[int, str]]:
    """Pipeline key -> {rank: the cache key of the code made from that pipeline's graph} (cached)."""
    got = getattr(ctx, "_cache_keys_by_pipeline", None)
    if got is not None:
        return got
    out: dict[str, dict[int, str]] = {}
    for key, per_rank in by_cache_key(ctx).items():
        for r, oc in per_rank.items():
            pl = pipeline_of(ctx.cap, oc)
            if pl is not None:
                out.setdefault(pl.key, {}).setdefault(r, key)
    ctx._cache_keys_by_pipeline = out  # type: ignore[attr-defined]  # a per-context cache kept on the context
    return out
