"""GenEval entries parsed once into typed records, and numeric input read once (functional/arrays.py)."""

import subprocess
import sys

import numpy as np
import pytest

from lmms_genbench.metrics.functional.drift import mcd
from lmms_genbench.metrics.functional.fid import FrechetStats
from lmms_genbench.metrics.functional.geneval import (
    Detection,
    GenEvalEntry,
    Include,
    evaluate_detections,
    parse_metadata,
    validate_metadata,
)

ENTRY = {
    "tag": "position",
    "prompt": "a photo of a cat below a dog",
    "include": [{"class": "dog", "count": 1}, {"class": "cat", "count": 1, "position": ["below", 0]}],
    "exclude": [{"class": "cup", "count": 1}],
}


def test_an_entry_is_parsed_once_into_frozen_records():
    entry = parse_metadata(ENTRY)
    assert entry.tag == "position"
    assert entry.include[1] == Include("cat", 1, None, ("below", 0))
    assert entry.classes == ["dog", "cat", "cup"] and not entry.needs_color
    assert parse_metadata(entry) is entry  # a parsed entry is not checked again
    assert entry.to_dict() == validate_metadata(ENTRY)
    with pytest.raises(AttributeError):
        entry.tag = "colors"


def test_the_rules_judge_a_parsed_entry_as_its_mapping():
    detections = {"dog": [Detection((0, 0, 50, 50), 0.9)], "cat": [Detection((0, 200, 50, 250), 0.8)]}
    by_entry = evaluate_detections(parse_metadata(ENTRY), detections, image_size=(300, 300))
    by_mapping = evaluate_detections(ENTRY, detections, image_size=(300, 300))
    assert by_entry == by_mapping and by_entry.correct
    assert isinstance(parse_metadata(ENTRY), GenEvalEntry)


def test_half_precision_torch_input_is_read_as_float64():
    """bfloat16 has no numpy dtype: a tensor is widened in torch before it becomes an array
    (before, ``mcd`` and ``FrechetStats.update`` raised TypeError on one)."""
    torch = pytest.importorskip("torch")
    sims = np.array([[1.0, 0.5], [0.5, 0.5]])
    assert mcd(torch.tensor(sims, dtype=torch.bfloat16)) == mcd(sims) == 0.625
    features = np.arange(12.0).reshape(4, 3)
    stats = FrechetStats().update(torch.tensor(features, dtype=torch.bfloat16))
    np.testing.assert_array_equal(stats.mean, features.mean(axis=0))
    with pytest.raises(ValueError, match="features must be an N x D array of numbers, got list"):
        FrechetStats().update([["a", "b"]])


def test_importing_geneval_loads_no_network_scorer_or_engine():
    code = ("import sys, lmms_genbench.metrics.functional.geneval\n"
            "print(' '.join(m for m in sys.modules if m.startswith('lmms_genbench')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    heavy = ("engine", "host", "generators", "models", "scorers", "networks", "smoke")
    assert [m for m in loaded if set(m.split(".")) & set(heavy)] == []
