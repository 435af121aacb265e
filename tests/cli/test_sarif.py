"""`check --sarif FILE`: SARIF 2.1.0 with the fields the standard requires (checked here without a
schema library: sarif-2.1.0 section 3), each finding a result at its source line, the rule ids the
finding kinds, the levels from the severities."""

from __future__ import annotations

import json
import re
from pathlib import Path

from graphtrain_inspect.inspector.checks import FINDING_KINDS
from tests.capture_utils import ROOT, run_cli

LEVELS = {"none", "note", "warning", "error"}


def validate(doc: dict) -> list[dict]:
    """The structure SARIF 2.1.0 requires (sarifLog, run, tool, toolComponent, result, message,
    location, artifactLocation, region); returns the results."""
    assert doc["version"] == "2.1.0" and isinstance(doc["runs"], list) and doc["runs"]
    assert doc.get("$schema", "").endswith("sarif-2.1.0.json")
    out = []
    for run in doc["runs"]:
        driver = run["tool"]["driver"]
        assert isinstance(driver["name"], str) and driver["name"]
        rules = driver.get("rules", [])
        ids = [r["id"] for r in rules]
        assert len(set(ids)) == len(ids) and all(isinstance(r["shortDescription"]["text"], str) for r in rules)
        for base in (run.get("originalUriBaseIds") or {}).values():
            assert base["uri"].startswith("file:///") and base["uri"].endswith("/")
        for res in run["results"]:
            msg = res["message"]
            assert isinstance(msg.get("text"), str) and msg["text"]
            assert res.get("level", "warning") in LEVELS
            if "ruleIndex" in res:
                assert 0 <= res["ruleIndex"] < len(rules) and rules[res["ruleIndex"]]["id"] == res["ruleId"]
            for loc in res.get("locations", []):
                phys = loc["physicalLocation"]
                uri = phys["artifactLocation"]["uri"]
                assert isinstance(uri, str) and not re.search(r"\s", uri)
                if "uriBaseId" in phys["artifactLocation"]:
                    assert phys["artifactLocation"]["uriBaseId"] in run["originalUriBaseIds"] and not uri.startswith(
                        "/"
                    )
                region = phys.get("region")
                if region is not None:
                    assert isinstance(region["startLine"], int) and region["startLine"] >= 1
            out.append(res)
    return out


def test_sarif_of_the_gpu_fsdp2_planted_capture(bundled_capture, tmp_path):
    path = bundled_capture("h200x2-fsdp2-compile-rank-literal")
    sarif = tmp_path / "out.sarif"
    # each rank compiled for itself: the planted literals are info (notes in SARIF), exit 0
    r = run_cli("check", str(path), "--severity", "info", "--sarif", str(sarif))
    assert r.returncode == 0, r.stderr
    doc = json.loads(sarif.read_text())
    results = validate(doc)
    shown = json.loads(run_cli("check", str(path), "--json").stdout)["findings"]
    level = {"error": "error", "warning": "warning", "info": "note"}
    # the literal (its backward copy and 2 kernel lines its consequences), and torch's own compile
    # events (recorded with --torch-trace), all notes; each message followed by its evidence lines
    assert len(results) == 4
    assert [(x["ruleId"], x["level"], x["message"]["text"].split("\n")[0]) for x in results] == [
        (f["kind"], level[f["severity"]], f["message"]) for f in shown
    ]
    (literal,) = [x for x in results if x["properties"].get("introduced_by") != "dynamo"]
    assert literal["message"]["text"].endswith("\nr0=1, r1=2  = 1 * (rank + 1)")
    related = literal["relatedLocations"]
    assert [r["id"] for r in related] == [1, 2, 3]
    assert [r["message"]["text"].split(":")[0] for r in related] == ["consequence (info rank-baked-constant)"] * 3
    assert len(literal["properties"]["consequences"]) == 3
    assert {r["id"] for r in doc["runs"][0]["tool"]["driver"]["rules"]} == set(FINDING_KINDS)
    for loc in [literal["locations"][0], *related]:
        # recorded on a GPU host under another directory: located in this checkout, at the line
        phys = loc["physicalLocation"]
        assert phys["artifactLocation"] == {"uri": "tests/programs/fsdp2_compile.py", "uriBaseId": "%SRCROOT%"}
        line = (Path(ROOT) / phys["artifactLocation"]["uri"]).read_text().splitlines()[phys["region"]["startLine"] - 1]
        assert "dist.get_rank() + 1" in line
    # generated-code consequences name their kernel and FX node in the properties
    gen = [c for c in literal["properties"]["consequences"] if c["layer"] == "codegen"]
    assert len(gen) == 2 and all(c["evidence"]["kernel"].startswith("triton_") and c["node"] for c in gen)


def test_sarif_levels_and_a_finding_without_source(tmp_path, bundled_capture):
    path = bundled_capture("h200x2-clean")
    sarif = tmp_path / "out.sarif"
    r = run_cli("check", str(path), "--severity", "info", "--sarif", str(sarif))
    assert r.returncode == 0, r.stderr
    results = validate(json.loads(sarif.read_text()))
    assert results and {x["level"] for x in results} == {"note"}


def test_sarif_file_that_cannot_be_written_is_one_line(bundled_capture):
    r = run_cli("check", str(bundled_capture("h200x2-clean")), "--sarif", "/nonexistent-dir/x.sarif")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "cannot write the SARIF file" in r.stderr
