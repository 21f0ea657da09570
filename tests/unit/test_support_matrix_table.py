"""scripts/support_table.py: docs/support.md from the support-matrix results (fast, no model)."""

import json
import re

import pytest

from tests.support.scripts import ROOT, load_script


def _script():
    return load_script("scripts/support_table.py", "support_table")


def _write(folder, role, entries):
    folder.mkdir(exist_ok=True)
    (folder / f"{role}.json").write_text(json.dumps({
        "role": role, "wall_seconds": 12.5, "docs_per_chain": 2, "versions": {"diffusers": "0.42.1"},
        "entries": entries}))


def test_the_table_renders_every_row_and_says_what_it_verifies(tmp_path):
    _write(tmp_path, "generator", {
        "sd3": {"class": "StableDiffusion3Pipeline", "given_as": "generator=diffusers", "size": 32,
                "passed": True, "n_scored": 2, "n_failed": 0},
        "sana": {"class": "SanaPipeline", "given_as": "generator=diffusers", "passed": False,
                 "n_scored": 0, "n_failed": 2}})
    _write(tmp_path, "describer", {
        "vllm": {"class": "vllm", "given_as": "describer=vllm", "passed": False, "skipped": True,
                 "reason": "vLLM does not import"}})
    text = _script().render(tmp_path)
    assert "plumbing on tiny replicas, not real-weight quality" in text
    assert "OPENAI_API_BASE" in text and "OPENAI_BASE_URL" in text
    assert "| `sd3` | `StableDiffusion3Pipeline` | `generator=diffusers` | 32 px | passed (2 scored, 0 failed) |" in text
    assert "FAILED (0 scored, 2 failed)" in text and "skipped: vLLM does not import" in text
    assert "1 of 2 passed" in text and "0 of 1 passed" in text


def test_a_missing_results_file_names_the_test_to_run(tmp_path):
    _write(tmp_path, "generator", {})
    with pytest.raises(SystemExit, match="test_every_describer_class_describes_a_chain"):
        _script().render(tmp_path)


def test_the_committed_table_lists_eight_families_and_five_describer_classes_passing():
    text = (ROOT / "docs" / "support.md").read_text()
    sections = text.split("\n## ")
    generators = next(s for s in sections if s.startswith("Generators"))
    describers = next(s for s in sections if s.startswith("Describers"))
    assert len(re.findall(r"\| passed \(", generators)) >= 8
    assert len(re.findall(r"\| passed \(", describers)) >= 5
    assert "not real-weight quality" in text and "OPENAI_API_BASE" in text
