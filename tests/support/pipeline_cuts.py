"""The tokens each text encoder of a diffusers pipeline cuts, counted inside the pipeline's own
tokenizer calls (a spy on transformers' tokenizer ``__call__``), against what
``DiffusersGenerator`` records per hop: tests/unit/generators/test_pipeline_cuts.py (two quick
families and the edge cases) and tests/e2e/test_pipeline_cuts_e2e.py (the other families)."""

import transformers

from lmms_genbench.generators.diffusers_backend import DiffusersGenerator
from lmms_genbench.smoke.pipelines import tiny_family_path

from tests.support.pipeline_families import SIZES

WORDS = "a red cat sits on a blue rug beside the window in the morning light".split()
LONG = " ".join(WORDS * 50)  # 750 words: past every encoder's budget (512 at most)
SHORT = " ".join(WORDS[:8])
#: in the default run (the rest with --e2e: about 5 s each on a CPU)
QUICK = ("sd3", "pixart_sigma")


def spy_tokenizer_calls(monkeypatch):
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


def check_recorded_cut(family, tokenizer_calls):
    """Draw three prompts with ``family``: the cut recorded per encoder is the cut the pipeline made."""
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
