"""Generated code: reading it from torch's logs, normalizing and diffing it (fast, hand-made logs)."""

from __future__ import annotations

from graphtrain_inspect.inspector.diff.normalize import RankContext
from graphtrain_inspect.inspector.diff.output_code import CodeNormalizer, diff_code, literal_skeleton, pinned_indices
from graphtrain_inspect.inspector.read.capture_index import open_capture
from graphtrain_inspect.inspector.read.output_code import code_text, compile_keys, kernels_of, output_codes, pipeline_of
from tests.read.output_code_logs import post_grad, torch_log, wrapper

PROV = {
    "cppCodeToPost": {"cpp_fused_add_mul_relu_0:1": ["mul", "relu"]},
    "postToCppCode": {"mul": ["cpp_fused_add_mul_relu_0:1"]},
    "version": 2.0,
}


def test_kernels_of_finds_each_kernel_and_its_lines():
    code = wrapper(extra_kernel=True)
    ks = kernels_of(code)
    assert [k.name for k in ks] == ["cpp_fused_add_mul_relu_0", "cpp_fused_add_mul_relu_1"]
    lines = code.split("\n")
    for k in ks:
        assert lines[k.first].startswith(k.name + " = async_compile.cpp_pybinding(")
        assert lines[k.last] == "''')"
        assert any("static_cast<float>" in l for l in lines[k.first : k.last + 1])
    assert ks[0].last < ks[1].first


def test_torch_log_output_code_linked_to_post_grad_graph_and_provenance(tmp_path):
    torch_log(
        tmp_path,
        0,
        [
            {"graph": post_grad(), "code": wrapper(), "provenance": PROV},
            {"graph": post_grad("5"), "code": wrapper("5.0", n=1, aot=1)},
        ],
    )
    cap = open_capture(str(tmp_path))
    ocs = output_codes(cap, 0)
    assert [oc.compile_id for oc in ocs] == ["0/0", "1/0"]
    assert ocs[0].source == "torch" and ocs[0].filename == "/tmp/torchinductor_u/ab/c0.py"
    assert ocs[0].origins == {"cpp_fused_add_mul_relu_0": ["mul", "relu"]}
    assert ocs[1].origins == {}
    assert "static_cast<float>(3.0)" in code_text(cap, ocs[0])
    # the post-grad graph is the one the reader made a pipeline stage of, in the same compile
    for oc in ocs:
        pl = pipeline_of(cap, oc)
        assert pl is not None and oc.graph in [g for p in pl.passes for g in p.after.values()]
        assert cap.graph_code(0, oc.graph).count("aten.mul.Tensor") == 1
    assert ocs[0].graph != ocs[1].graph
    assert set(compile_keys(cap)) == {"0/0#0", "1/0#0"}


def test_ranks_of_a_correct_per_rank_compile_diff_empty():
    # each rank's own GPU, its own group name, Inductor's per-process kernel counter and cache path
    a = wrapper(cuda_dev=0, group="3", n=0, aot=0).replace(
        "from torch import", "# kernel path: /tmp/torchinductor_alice/x1/abc.py\nfrom torch import"
    )
    b = wrapper(cuda_dev=1, group="5", n=7, aot=4).replace(
        "from torch import", "# kernel path: /tmp/torchinductor_alice/y2/def.py\nfrom torch import"
    )
    ca = RankContext(0, 0, "cuda:0", {"3": "mesh[2].dp"})
    cb = RankContext(1, 1, "cuda:1", {"5": "mesh[2].dp"})
    assert diff_code(a, b, ca, cb) == []
    # without the rank contexts the same code differs: the normalization is doing the work
    assert diff_code(a, b, None, None) != []


def test_rank_literal_is_the_only_difference():
    d = diff_code(wrapper("3.0"), wrapper("4.0", n=3), RankContext(0, 0, "cpu"), RankContext(1, 1, "cpu"))
    changed = [l for l in d if l[:1] in "+-" and not l.startswith(("+++", "---"))]
    assert changed == ["-        auto tmp4 = static_cast<float>(3.0);", "+        auto tmp4 = static_cast<float>(4.0);"]


def test_a_foreign_device_index_is_not_normalized():
    # rank 1 running code that pins device 0 must still show in the diff
    lines = CodeNormalizer(RankContext(1, 1, "cuda:1")).lines(wrapper(cuda_dev=0))
    assert any("set_device(0)" in l for l in lines)
    assert not any("<own>" in l for l in lines)
    own = CodeNormalizer(RankContext(0, 0, "cuda:0")).lines(wrapper(cuda_dev=0))
    assert any("set_device(<own>)" in l for l in own) and any("get_raw_stream(<own>)" in l for l in own)


def test_pinned_indices_and_literal_skeleton():
    assert pinned_indices("    with torch.cuda._DeviceGuard(1):") == [("device_guard", 1)]
    assert pinned_indices("stream0 = get_raw_stream(0)") == [("raw_stream", 0)]
    assert pinned_indices("x = empty_strided((2,), (1,), device=device(type='cuda', index=3))") == [("device_index", 3)]
    assert pinned_indices("torch.cuda.set_device(2)") == [("set_device", 2)]
    meta = (
        "triton_meta={'signature': {'in_ptr0': '*fp32'}, 'device': DeviceProperties(type='cuda', index=1, "
        "multi_processor_count=132, cc=90), 'constants': {}}"
    )
    assert pinned_indices(meta) == [("kernel_device", 1)]
    assert "index=<own>, multi_processor_count=132" in CodeNormalizer(RankContext(1, 1, "cuda:1")).lines(meta)[0]
    assert "index=1," in CodeNormalizer(RankContext(0, 0, "cuda:0")).lines(meta)[0]
    assert pinned_indices("buf0 = empty_strided_cpu((8, 4), (4, 1), torch.float32)") == []
    sk, lits = literal_skeleton("auto tmp4 = static_cast<float>(3.0); x0 += static_cast<int64_t>(16L); tmp12")
    assert lits == ["3.0", "16L"] and sk == "auto tmp4 = static_cast<float>(#); x0 += static_cast<int64_t>(#); tmp12"


def _our_log(tmp_path, records):
    from graphtrain_inspect.capture.shared import logformat

    header = {
        "format": logformat.FORMAT_NAME,
        "format_version": logformat.FORMAT_VERSION,
        "rank": 0,
        "local_rank": 0,
        "world_size": 1,
        "pid": 1,
        "host": "h",
        "user": "u",
        "argv": [],
        "torch_version": "2.13",
        "python": "3",
        "time": 0.0,
        "sources": ["inductor"],
        "blobs": False,
    }
    data = logformat.encode_record(logformat.HEADER, header, rank=0)
    for kind, payload, meta in records:
        data += logformat.encode_record(kind, payload, rank=0, meta=meta)
    (tmp_path / logformat.log_file_name(0)).write_bytes(data)


def test_captured_records_read_and_bad_ones_are_skipped_not_raised(tmp_path):
    from graphtrain_inspect.capture.shared import logformat
    from graphtrain_inspect.inspector.checks import run_checks

    code = wrapper()
    link = {"oid": "o1", "graph": None, "compile_id": None, "kernels": {"cpp_fused_add_mul_relu_0": ["mul"]}}
    _our_log(
        tmp_path,
        [
            (logformat.OUTPUT_CODE, code, {"oid": "o1"}),
            (logformat.CODEGEN, link, {"oid": "o1"}),
            (logformat.CODEGEN, {**link, "oid": "o-missing"}, {"oid": "o-missing"}),  # names no code
            (logformat.CODEGEN, ["not", "a", "dict"], {}),
            (logformat.CODEGEN, {**link, "kernels": "garbage", "compile_id": 7}, {"oid": "o1"}),
        ],
    )
    cap = open_capture(str(tmp_path))
    ocs = output_codes(cap, 0)
    assert [(oc.oid, oc.compile_id, oc.origins) for oc in ocs] == [
        ("o1", None, {"cpp_fused_add_mul_relu_0": ["mul"]}),
        ("o1", None, {}),
    ]
    assert code_text(cap, ocs[0]) == code
    assert [f for f in run_checks(cap) if f.layer == "codegen"] == []


def test_a_damaged_output_code_record_reads_as_none(tmp_path):
    from graphtrain_inspect.capture.shared import logformat

    _our_log(
        tmp_path,
        [
            (logformat.OUTPUT_CODE, wrapper(), {"oid": "o1"}),
            (logformat.CODEGEN, {"oid": "o1", "kernels": {}}, {"oid": "o1"}),
        ],
    )
    path = tmp_path / logformat.log_file_name(0)
    path.write_bytes(path.read_bytes().replace(b"static_cast<float>(3.0)", b"static_cast<float>(9.0)"))
    cap = open_capture(str(tmp_path))
    (oc,) = output_codes(cap, 0)
    assert code_text(cap, oc) is None
    assert any("md5" in str(e) for e in cap.all_errors())
