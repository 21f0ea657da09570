"""The tokens each text encoder cuts, as recorded per hop, against a count taken inside the
pipeline's own tokenizer calls, for the eight tiny diffusers families loaded from their saved
folders (lmms_genbench/smoke/pipelines.py).

The pipelines rewrite prompts before tokenizing (Lumina 2 prepends its system prompt, Sana its
instruction, PixArt lower-cases and cleans): the recorded cut must be the cut of that text, at
the length the pipeline asked for. Plumbing on tiny random-weight replicas only.
"""

from __future__ import annotations

import logging

import pytest
import transformers

from lmms_genbench.generators.diffusers_backend import DiffusersGenerator
from lmms_genbench.smoke.pipelines import FAMILIES, tiny_family_path

SIZES = {"kandinsky3": 64}
WORDS = "a red cat sits on a blue rug beside the window in the morning light".split()
LONG = " ".join(WORDS * 50)  # 750 words: past every encoder's budget (512 at most)
SHORT = " ".join(WORDS[:8])


@pytest.fixture
def tokenizer_calls(monkeypatch):
    """Every tokenizer call the pipeline makes: (tokenizer, texts, kwargs), and its result."""
    seen = []
    real = transformers.PreTrainedTokenizerBase.__call__

    def spy(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        text = args[0] if args else kwargs.get("text")
        seen.append((self, [text] if isinstance(text, str) else list(text or []), kwargs, out))
        return out

    monkeypatch.setattr(transformers.PreTrainedTokenizerBase, "__call__", spy)
    return seen


def _pipeline_count(seen, tokenizer, prompts):
    """Per prompt, the tokens ``tokenizer`` dropped in the pipeline's first truncating call over
    the prompts: the untruncated length of the very text it was given, less what it kept."""
    for tok, texts, kwargs, out in seen:
        if tok is tokenizer and kwargs.get("truncation") and len(texts) == len(prompts) and "max_length" in kwargs:
            full = [len(tok.encode(t, add_special_tokens=kwargs.get("add_special_tokens", True))) for t in texts]
            mask = out.get("attention_mask")  # what it kept: the real tokens, not the padding
            kept = [int(sum(row)) for row in mask] if mask is not None else [len(row) for row in out["input_ids"]]
            return texts, [f - min(k, kwargs["max_length"]) for f, k in zip(full, kept)]
    raise AssertionError("the pipeline made no truncating call over the prompts")


#: in the default run (the rest with --e2e: about 5 s each on a CPU)
QUICK = ("sd3", "pixart_sigma")


@pytest.mark.parametrize("family", [f if f in QUICK else pytest.param(f, marks=pytest.mark.integration)
                                    for f in FAMILIES])
def test_the_recorded_cut_is_the_cut_inside_the_pipeline(family, tokenizer_calls):
    size = SIZES.get(family, 32)
    generator = DiffusersGenerator(pretrained=str(tiny_family_path(family)), device="cpu", dtype="float32", steps=1,
                                   width=size, height=size, batch_size=3)
    prompts = [LONG, SHORT, LONG.upper()]
    tokenizer_calls.clear()  # the probe's calls at load
    generator.generate(prompts, [0, 1, 2])
    recorded = generator.text_cuts(prompts)
    assert recorded[0] and set(recorded[0]) == set(generator.text_budget)
    for encoder in generator.text_budget:
        attr = "tokenizer" + encoder.split(":")[0][len("text_encoder"):]
        texts, counted = _pipeline_count(tokenizer_calls, getattr(generator.pipeline, attr), prompts)
        assert [cut[encoder] for cut in recorded] == counted, (encoder, texts[1][:200])
        assert counted[0] > 0  # the long prompt was cut


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
