"""graphtrain_inspect.inspector.read.progressive (the TUI's loader): indexing in steps and following a growing capture
give exactly what `open_capture` gives for the same bytes: passes, graphs, errors with file and
line, whatever the step size, the damage or where the writer was cut off."""

from __future__ import annotations

import shutil

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphtrain_inspect.inspector.errors import CaptureUnreadable
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.progressive import ProgressiveLoader
from tests.tui_support import log_path, record_starts


def signature(cap):
    ranks = []
    for r in cap.ranks:
        passes = [(p.seq, p.name, p.before, p.after, p.status) for p in cap.passes(r)]
        graphs = sorted((g, tuple(sorted(ref.records)), ref.nodes) for g, ref in cap.graphs(r).items())
        codes = [cap.graph_code(r, g) is not None for g, _, _ in graphs]
        ranks.append((r, passes, graphs, codes))
    return ranks, sorted(str(e) for e in cap.all_errors()), cap.manifest, getattr(cap, "statuses", None)


def load(path, step: int):
    loader = ProgressiveLoader(str(path))
    while not loader.done:
        loader.step(step)
    return loader


SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(step=st.integers(min_value=1, max_value=6000))
def test_steps_of_any_size_index_what_open_capture_does(tui_small_capture, step):
    assert signature(load(tui_small_capture, step).snapshot()) == signature(open_capture(str(tui_small_capture)))


@SETTINGS
@given(
    damage=st.sampled_from(["garbage", "blank", "cut", "tab-first", "bad-md5", "unknown-kind", "bad-encoding"]),
    where=st.floats(0.05, 0.95),
    step=st.integers(50, 4000),
)
def test_damaged_logs_give_the_same_errors(tui_small_capture, tmp_path_factory, damage, where, step):
    d = tmp_path_factory.mktemp("dmg") / "c"
    shutil.copytree(tui_small_capture, d)
    p = log_path(d, 1)
    data = p.read_bytes()
    starts = record_starts(data)
    at = starts[max(1, int(len(starts) * where))]
    if damage == "garbage":
        data = data[:at] + b"garbage here\n" + data[at:]
    elif damage == "blank":
        data = data[:at] + b"\n" + data[at:]
    elif damage == "cut":
        data = data[: at + 40]
    elif damage == "tab-first":
        data = b"\tstray payload\n" + data
    elif damage == "unknown-kind":
        data = data[:at] + data[at:].replace(b'"name":"gti_', b'"name":"gti_zz', 1)
    elif damage == "bad-encoding":
        data = data[:at] + data[at:].replace(b'"encoding":"', b'"encoding":"x', 1)
    else:
        i = data.find(b"\n\t", at) + 3
        data = data[:i] + (b"X" if data[i : i + 1] != b"X" else b"Y") + data[i + 1 :]
    p.write_bytes(data)
    a = open_capture(str(d))
    b = load(d, step).snapshot()
    for cap in (a, b):
        for r in cap.ranks:
            cap.log_file(r).verify()  # decode every payload: damage inside one is an error too
    assert signature(b) == signature(a)
    if damage == "blank":  # tlparse skips empty lines wherever they are, and so do the readers
        assert a.all_errors() == []
    else:
        assert any(str(p) in str(e) for e in a.all_errors())


@SETTINGS
@given(cuts=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4), step=st.integers(100, 5000))
def test_a_growing_capture_is_followed_record_by_record(tui_small_capture, tmp_path_factory, cuts, step):
    d = tmp_path_factory.mktemp("grow") / "c"
    shutil.copytree(tui_small_capture, d)
    full = {r: log_path(d, r).read_bytes() for r in (0, 1)}
    # the writer was cut anywhere, mid-record included, and goes on later
    points = sorted(int(c * len(full[0])) for c in cuts)
    for r in (0, 1):
        log_path(d, r).write_bytes(full[r][: points[0]])
    loader = load(d, step)
    for pt in points[1:] + [len(full[0])]:
        for r in (0, 1):
            log_path(d, r).write_bytes(full[r][: min(pt, len(full[r]))] if pt < len(full[0]) else full[r])
        loader.grow()
        while not loader.done:
            loader.step(step)
        try:
            expected = signature(open_capture(str(d)))
        except CaptureUnreadable:  # nothing readable yet: open_capture says so, the loader waits
            assert not any(loader.snapshot().passes(r) for r in loader.snapshot().ranks)
            continue
        assert signature(loader.snapshot()) == expected
    assert [p.status for p in loader.snapshot().passes(0)] == ["ok", "ok", "ok"]


def test_a_rank_log_appearing_later_is_picked_up(tui_small_capture, tmp_path):
    d = tmp_path / "c"
    shutil.copytree(tui_small_capture, d)
    late = log_path(d, 1).read_bytes()
    log_path(d, 1).unlink()
    loader = load(d, 1 << 20)
    assert loader.snapshot().ranks == [0]
    log_path(d, 1).write_bytes(late)
    assert loader.grow()
    while not loader.done:
        loader.step(1 << 20)
    assert signature(loader.snapshot()) == signature(open_capture(str(d)))


def test_a_bundled_gpu_capture_indexed_in_small_steps(bundled_capture):
    path = bundled_capture("h200x2-rank-baked")
    assert signature(load(path, 64 << 10).snapshot()) == signature(open_capture(str(path)))


def test_other_inputs_fall_back_to_open_capture(tui_small_capture):
    one = log_path(tui_small_capture, 0)
    loader = ProgressiveLoader(str(one))
    assert loader.done and loader.snapshot().ranks == [0]
    assert not loader.grow()


def test_a_capture_with_no_logs_yet_waits_for_them(tui_small_capture, tmp_path):
    d = tmp_path / "c"
    shutil.copytree(tui_small_capture, d)
    logs = {r: log_path(d, r).read_bytes() for r in (0, 1)}
    for r in (0, 1):
        log_path(d, r).unlink()
    m = d / "manifest.json"
    m.write_text(m.read_text().replace('"finished"', '"running"'))
    loader = ProgressiveLoader(str(d))  # open_capture would say "not a capture"
    assert loader.done and loader.fallback is None and loader.snapshot().ranks == []
    for r in (0, 1):
        log_path(d, r).write_bytes(logs[r])
    assert loader.grow()
    while not loader.done:
        loader.step(1 << 20)
    assert signature(loader.snapshot()) == signature(open_capture(str(d)))
