"""The tokens each text encoder cuts, as recorded per hop, against a count taken inside the
pipeline's own tokenizer calls, for the eight tiny diffusers families loaded from their saved
folders (lmms_genbench/smoke/pipelines.py).

The pipelines rewrite prompts before tokenizing (Lumina 2 prepends its system prompt, Sana its
instruction, PixArt lower-cases and cleans): the recorded cut must be the cut of that text, at
the length the pipeline asked for. Plumbing on tiny random-weight replicas only. Here two quick
families and the edge cases; the other six: tests/e2e/test_pipeline_cuts_e2e.py.
"""

from __future__ import annotations

import logging

import pytest

from lmms_genbench.generators.diffusers_backend import DiffusersGenerator
from lmms_genbench.smoke.pipelines import FAMILIES, tiny_family_path

from tests.support.pipeline_cuts import LONG, QUICK, WORDS, check_recorded_cut, spy_tokenizer_calls


@pytest.fixture
def tokenizer_calls(monkeypatch):
    return spy_tokenizer_calls(monkeypatch)


@pytest.mark.parametrize("family", [f for f in FAMILIES if f in QUICK])
def test_the_recorded_cut_is_the_cut_inside_the_pipeline(family, tokenizer_calls):
    check_recorded_cut(family, tokenizer_calls)


def test_lumina2_counts_its_system_prompt(tokenizer_calls):
    """Lumina 2 tokenizes ``<system prompt> <Prompt Start> <prompt>``: a prompt that fits alone
    may be cut once the prefix is in front; re-tokenizing the prompt alone would miss it."""
    generator = DiffusersGenerator(pretrained=str(tiny_family_path("lumina2")), device="cpu", dtype="float32",
                                   steps=1, width=32, height=32)
    ((encoder, budget),) = generator.text_budget.items()
    fits_alone = " ".join((WORDS * 40)[: budget - 5])
    assert generator.text_cuts.__self__ is generator
    generator.generate([fits_alone], [0])
    (cut,) = generator.text_cuts([fits_alone])
    assert cut[encoder] > 0
    generator._counted = {}  # what counting the prompt alone says
    assert generator.text_cuts([fits_alone])[0][encoder] == 0


def test_counting_prints_no_transformers_length_warning(caplog):
    generator = DiffusersGenerator(pretrained=str(tiny_family_path("sd3")), device="cpu", dtype="float32", steps=1,
                                   width=32, height=32)
    with caplog.at_level(logging.WARNING):
        generator.generate([LONG], [0])
        generator.text_cuts([LONG])
        generator._counted = {}
        generator.text_cuts([LONG])  # the fallback, counting outside the pipeline
    assert not [r for r in caplog.records if "Token indices sequence length" in r.getMessage()]
