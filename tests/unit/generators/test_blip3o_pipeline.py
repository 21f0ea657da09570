"""unified=blip3o's decoder against the Hub's own ``pipeline_llava_gen.py`` (a public third-party copy,
run as inference.py loads it) at decoder guidance 3.0, 1.0, 0.5 and 0.0 on the tiny parity checkpoint:
tests/support/data/parity/blip3o/expected_pipeline.json (README.md there, "The decoder pipeline", says
how it was run and which of its lines were compared).

The pipeline guides only above 1 (``do_classifier_free_guidance = guidance_scale > 1.0``): at or below,
" " is never encoded, so the decoder's starting noise is the draw right after the prompt's DiT noise,
and the UNet runs the conditional row alone whatever the scale. float32 on both sides.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from lmms_genbench.generators.unified import build_unified
from tests.support.threads import single_thread

DATA = Path(__file__).resolve().parents[2] / "support" / "data" / "parity" / "blip3o"
PIPELINE = json.loads((DATA / "expected_pipeline.json").read_text(encoding="utf-8"))
NOISE_ATOL = 1e-6  # the same float32 normal draws (printed to JSON and back)


@pytest.fixture(scope="module")
def blip3o():
    with single_thread():
        yield build_unified("blip3o", pretrained=str(DATA / "BLIP3o-Model-4B"),
                            processor=str(DATA / "Qwen2.5-VL-7B-Instruct"), device="cpu", dtype="float32",
                            image_size=PIPELINE["height"])


@pytest.mark.parametrize("guidance", sorted(PIPELINE["by_guidance"], key=float, reverse=True))
def test_pixels_and_random_stream_are_the_pipelines(blip3o, monkeypatch, guidance):
    rec = PIPELINE["by_guidance"][guidance]
    draws, randn = [], torch.randn

    def spy(*args, **kwargs):  # every normal draw in order, as recorded around the pipeline
        out = randn(*args, **kwargs)
        draws.append((out.numel(), out.flatten()[:4].float().tolist()))
        return out

    monkeypatch.setattr(blip3o, "decoder_guidance", float(guidance))
    monkeypatch.setattr(torch, "randn", spy)
    with single_thread():
        image = blip3o.generate([PIPELINE["caption"]], [PIPELINE["seed"]])[0]
    monkeypatch.undo()
    theirs = [(int(np.prod(d["shape"])), d["first4"]) for d in rec["random_draws"]]
    assert [n for n, _ in draws] == [n for n, _ in theirs]  # prompt's DiT noise, " "'s (only above 1), decoder's
    for (_, ours_first), (_, their_first) in zip(draws, theirs):
        np.testing.assert_allclose(ours_first, their_first, atol=NOISE_ATOL, rtol=0)
    pixels = np.asarray(image).astype(int)
    expected = np.array(rec["pixels"]).reshape(rec["pixels_shape"])
    assert np.abs(pixels - expected).max() <= 1  # uint8 rounding of float32 pixels (measured: equal)


def test_the_recorded_pipeline_ignores_the_scale_at_or_below_one():
    # the record itself: 1.0, 0.5 and 0.0 are one image, 3.0 another
    shas = {g: r["pixels_sha256"] for g, r in PIPELINE["by_guidance"].items()}
    assert shas["1.0"] == shas["0.5"] == shas["0.0"] != shas["3.0"]
    assert [len(r["encoded"]) for g, r in sorted(PIPELINE["by_guidance"].items())] == [1, 1, 1, 2]
