"""capture/cache_keys.py: each compile's FX graph cache key, computed with torch's own functions
on the compile's arguments, held while the compile runs (for its gti_codegen record), never in
the compile's way. torch's modules are stood in for here; tests/checks/test_cache_shared_code.py
records real keys on 2 gloo ranks."""

from __future__ import annotations

import sys
import types

import pytest

from graphtrain_inspect.capture import cache_keys, session
from graphtrain_inspect.capture.launcher import fx_cache_off


def test_keys_are_asked_for_unless_the_users_own_fx_cache_is_off():
    assert not fx_cache_off({})
    assert not fx_cache_off({"TORCHINDUCTOR_FX_GRAPH_CACHE": "1"})
    assert fx_cache_off({"TORCHINDUCTOR_FX_GRAPH_CACHE": "0"})
    assert fx_cache_off({"TORCHINDUCTOR_FX_GRAPH_CACHE_DEFAULT": "0"})
    assert not fx_cache_off({"TORCHINDUCTOR_FX_GRAPH_CACHE": "1", "TORCHINDUCTOR_FX_GRAPH_CACHE_DEFAULT": "0"})


class _Bypass(Exception):
    pass


class _Session:
    def __init__(self) -> None:
        self.errors: list[tuple[str, BaseException]] = []

    def error(self, where, exc, frame=None):
        self.errors.append((where, exc))


@pytest.fixture
def torch_standins(monkeypatch):
    """torch._inductor's codecache, config and virtualized, and functorch's config, as far as
    cache_keys reads them; `hashed` lists the arguments each key was computed from."""
    hashed: list[tuple] = []

    def compiled_fx_graph_hash(gm, example_inputs, fx_kwargs, inputs_to_check):
        hashed.append((gm, example_inputs, fx_kwargs, inputs_to_check))
        if gm == "uncacheable":
            raise _Bypass("unsupported op")
        if gm == "broken":
            raise RuntimeError("hash failed")
        return f"f{gm}", ["debug"]

    class FxGraphCache:
        @staticmethod
        def _check_can_cache(gm, example_inputs=(), fx_kwargs=None, require_shape_env=True):
            pass

    codecache = types.SimpleNamespace(
        compiled_fx_graph_hash=compiled_fx_graph_hash, FxGraphCache=FxGraphCache, BypassFxGraphCache=_Bypass
    )
    config = types.SimpleNamespace(force_disable_caches=False)
    for name, mod in (
        ("torch._inductor.codecache", codecache),
        ("torch._inductor.config", config),
        ("torch._inductor.virtualized", types.SimpleNamespace(V=types.SimpleNamespace(aot_compilation=False))),
        ("torch._functorch.config", types.SimpleNamespace(bundled_autograd_cache=False)),
    ):
        monkeypatch.setitem(sys.modules, name, mod)
    sess = _Session()
    monkeypatch.setattr(session, "current", lambda: sess)
    return hashed, config, sess


def _hooked():
    seen: list = []

    def fx_codegen_and_compile(gm, example_inputs, inputs_to_check, compile_region_name=None, **graph_kwargs):
        seen.append(cache_keys.pending())  # what the compile's gti_codegen would carry
        return ("compiled", gm)

    module = types.SimpleNamespace(fx_codegen_and_compile=fx_codegen_and_compile)
    cache_keys._hook_compile_fx(module)
    return module, seen


def test_the_key_is_held_while_the_compile_runs_and_the_result_is_untouched(torch_standins):
    hashed, config, sess = torch_standins
    module, seen = _hooked()
    result = module.fx_codegen_and_compile("g1", ["x"], (0,), compile_region_name="r", is_backward=True)
    assert result == ("compiled", "g1") and seen == [{"cache_key": "fg1"}]
    # torch's arguments, as _compile_fx_inner hands them to prepare_key (no region name)
    assert hashed == [("g1", ["x"], {"is_backward": True}, (0,))]
    assert cache_keys.pending() is None  # only while the compile runs
    module.fx_codegen_and_compile("uncacheable", [], ())
    assert seen[-1] == {"cache_bypass": "unsupported op"}
    # where the run's caches are forced off no key is taken, and none is asked for
    config.force_disable_caches = True
    module.fx_codegen_and_compile("g2", [], ())
    assert seen[-1] is None and len(hashed) == 2
    assert sess.errors == []


def test_a_failing_key_is_recorded_and_the_compile_goes_on(torch_standins):
    _, _, sess = torch_standins
    module, seen = _hooked()
    assert module.fx_codegen_and_compile("broken", [], ()) == ("compiled", "broken")
    assert seen == [None]
    assert [(w, str(e)) for w, e in sess.errors] == [("FX graph cache key", "hash failed")]
    hooked = module.fx_codegen_and_compile
    cache_keys._hook_compile_fx(module)  # hooked once only
    assert module.fx_codegen_and_compile is hooked and hooked.__wrapped__ is hooked._gti_original
