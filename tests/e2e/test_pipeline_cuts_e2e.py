"""The recorded cut is the cut inside the pipeline, for the six tiny diffusers families the
default suite leaves out (about 5 s each on a CPU; the two quick ones and the edge cases:
tests/unit/generators/test_pipeline_cuts.py)."""

import pytest

from lmms_genbench.smoke.pipelines import FAMILIES

from tests.support.pipeline_cuts import QUICK, check_recorded_cut, spy_tokenizer_calls


@pytest.mark.parametrize("family", [f for f in FAMILIES if f not in QUICK])
def test_the_recorded_cut_is_the_cut_inside_the_pipeline(family, monkeypatch):
    check_recorded_cut(family, spy_tokenizer_calls(monkeypatch))
