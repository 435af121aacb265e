"""The list of checks (`inspector.checks.CHECK_MODULES`) and what each entry must be: adding a
check is its module and one line there, and a test module named after it (or its family)."""

from __future__ import annotations

import os

from graphtrain_inspect.inspector.checks import CHECK_MODULES, CHECKS, check_modules

HERE = os.path.dirname(os.path.abspath(__file__))
# checks tested together, in the test module of the family (named after what they share)
FAMILIES = {
    "codegen_rank_baked": "codegen",
    "codegen_device_baked": "codegen",
    "codegen_stale_symbol": "codegen",
    "codegen_divergent": "codegen",
    # torch.compile's own events, read through checks/compile_findings.py
    "rank_divergent_compile": "compile_findings",
    "compile_failure": "compile_findings",
    "graph_break": "compile_findings",
    "recompile": "compile_findings",
}


def test_each_entry_is_a_check_module():
    modules = check_modules()
    assert list(modules) == list(CHECKS) == [m.replace("_", "-") for m in CHECK_MODULES]
    for name, module in modules.items():
        assert isinstance(module.KIND, str) and module.KIND, name
        assert isinstance(module.DESCRIPTION, str) and module.DESCRIPTION, name
        assert callable(module.run), name


def test_each_check_has_a_test_module_named_after_it_or_its_family():
    missing = [m for m in CHECK_MODULES if not os.path.exists(os.path.join(HERE, f"test_{FAMILIES.get(m, m)}.py"))]
    assert missing == []
