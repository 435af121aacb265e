"""Property: damage a real capture's log any way a crash, a full disk or a bad copy can, and the
reader never raises and keeps every record before the first damaged byte (tests/reader_mutations.py
says what is compared). The log is rank 0's of the shared sample capture (2 CPU ranks, 7 passes,
45 records, ~2.8 MB); a longer random run is benchmarks/fuzz_reader.py.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphtrain_inspect.capture.shared import logformat
from tests.reader_mutations import GARBAGE, Baseline, mutate

EXAMPLES = int(os.environ.get("GTI_FUZZ_EXAMPLES", "30"))  # more: GTI_FUZZ_EXAMPLES=500, or benchmarks/fuzz_reader.py


@pytest.fixture(scope="module")
def base(sample_capture, tmp_path_factory):
    b = Baseline(str(sample_capture()), rank=0)
    b.work = b.work_dir(str(tmp_path_factory.mktemp("fuzz")))
    return b


def _positions(b: Baseline):
    """Anywhere, or near the start of a record (where damage is most telling)."""
    starts = [r.offset for r in b.records]
    near = st.tuples(st.sampled_from(starts), st.integers(-4, 300)).map(lambda t: max(0, t[0] + t[1]))
    return st.one_of(st.integers(0, len(b.data)), near)


def _lines(b: Baseline):
    """Any line, or a record's envelope line or the line after it."""
    lines = b.data.count(b"\n")
    heads = [b.data.count(b"\n", 0, r.offset) for r in b.records]
    return st.one_of(st.integers(0, lines), st.sampled_from(heads).flatmap(lambda i: st.sampled_from([i, i + 1])))


def _byte_ops(b: Baseline):
    pos = _positions(b)
    garbage = st.one_of(
        st.sampled_from(GARBAGE),
        st.binary(min_size=1, max_size=40),
        st.integers(1 << 16, 1 << 20).map(lambda n: b"x" * n),
    )
    return st.one_of(
        st.tuples(st.just("truncate"), pos),
        st.tuples(st.just("flip"), pos, st.integers(1, 255)),
        st.tuples(st.just("delete_line"), _lines(b)),
        st.tuples(st.just("dup_line"), _lines(b)),
        st.tuples(st.just("insert"), pos, garbage),
    )


SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _assert_ok(res, ops):
    if res.crash is not None:
        raise AssertionError(f"the reader raised on {ops!r}") from res.crash
    assert res.lost == [], (ops, res.damage_at, res.lost)
    assert res.unnamed_errors == [], res.unnamed_errors


def test_damaged_logs_lose_nothing_before_the_damage(base):
    @SETTINGS
    @given(st.data())
    def prop(data):
        ops = data.draw(st.lists(_byte_ops(base), min_size=1, max_size=3))
        damaged = mutate(base.data, ops)
        res = base.check(base.work, damaged, deep=len(damaged) < 4 << 20)
        _assert_ok(res, ops)

    prop()


def test_consistent_json_edits_never_raise(base):
    """Values changed inside JSON payloads with the md5 made to match (a log edited by hand, or a
    writer with another idea of the format): wrong types and shapes are read as well as they can be."""
    values = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False),
        st.text(max_size=8),
        st.just([]),
        st.just({}),
        st.just([1, "x", None]),
        st.just({"n": 5}),
        st.just("../../etc/passwd"),
    )
    json_recs = sum(1 for r in base.records if logformat.KINDS.get(r.kind) == "json")

    @settings(SETTINGS, max_examples=max(1, EXAMPLES * 2 // 3))
    @given(
        st.lists(
            st.tuples(st.just("json"), st.integers(0, json_recs - 1), st.integers(0, 399), values),
            min_size=1,
            max_size=3,
        )
    )
    def prop(ops):
        res = base.check(base.work, mutate(base.data, ops), semantic=False)
        _assert_ok(res, ops)

    prop()
