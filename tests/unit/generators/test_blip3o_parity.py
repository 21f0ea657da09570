"""BLIP3-o through ``unified=blip3o`` reproduces the authors' code (JiuhaiChen/BLIP3o) on a tiny
random checkpoint in their published layout: tests/support/data/parity/blip3o/ (its README says
how the recorded numbers were made)."""

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from lmms_genbench.generators.unified import build_unified
from tests.support.threads import single_thread

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

DATA = Path(__file__).resolve().parents[2] / "support" / "data" / "parity" / "blip3o"
EXPECTED = json.loads((DATA / "expected.json").read_text(encoding="utf-8"))
#: float32 on both sides; the sums run in another order (transformers 5 vs 4.51, diffusers 0.42 vs 0.31)
LOGIT_ATOL, FEATURE_ATOL = 1e-4, 1e-3


@pytest.fixture(scope="module")
def blip3o():
    with single_thread():  # tiny ops: threads only contend (a draw takes 2 s, not 80)
        # what unified=blip3o,unified.pretrained=<folder>,unified.processor=<folder>,... builds
        yield build_unified("blip3o", pretrained=str(DATA / "BLIP3o-Model-4B"),
                            processor=str(DATA / "Qwen2.5-VL-7B-Instruct"), device="cpu", dtype="float32",
                            image_size=EXPECTED["draw"]["height"])


def _inputs(model):
    from lmms_genbench.generators.unified.blip3o.model import qwen_resize

    rec = EXPECTED["describe"]
    image = Image.open(DATA / "input.png")
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": rec["prompt"]}]}]
    text = model.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    resized = qwen_resize(image)
    return text, resized, model.processor(text=[text], images=[resized], return_tensors="pt")


def test_understanding_reads_the_image_and_prompt_as_the_authors_demo(blip3o):
    rec = EXPECTED["describe"]
    text, resized, inputs = _inputs(blip3o)
    assert text == rec["chat_text"]
    assert list(resized.size) == rec["resized_by_qwen_vl_utils"]  # 90 x 61 -> 84 x 56 (qwen_vl_utils)
    assert inputs.input_ids[0].tolist() == rec["input_ids"]
    assert inputs.image_grid_thw.tolist() == rec["image_grid_thw"]
    with torch.inference_mode():
        logits = blip3o.lm(**inputs).logits[0, -1].float()
    np.testing.assert_allclose(logits[:16].numpy(), rec["last_logits_first16"], atol=LOGIT_ATOL, rtol=0)
    assert torch.topk(logits, 5).indices.tolist() == rec["last_logits_top5"]


def test_greedy_description_matches_the_authors_token_for_token(blip3o):
    rec = EXPECTED["describe"]
    _, _, inputs = _inputs(blip3o)
    with torch.inference_mode():
        out = blip3o.lm.generate(**inputs, max_new_tokens=len(rec["greedy_ids"]), do_sample=False)
    assert out[0, inputs.input_ids.shape[1]:].tolist() == rec["greedy_ids"]
    # and through describe(), as the cycle calls it
    [text] = blip3o.describe([Image.open(DATA / "input.png")], rec["prompt"],
                             {"max_new_tokens": len(rec["greedy_ids"]), "temperature": 0})
    assert text == blip3o.tokenizer.decode(rec["greedy_ids"], skip_special_tokens=True).strip()


def test_dit_features_match_the_authors_generate_image(blip3o):
    from lmms_genbench.generators.unified.blip3o.model import (
        DRAW_INSTRUCTION,
        QWEN_CONVERSATION,
    )

    rec = EXPECTED["draw"]
    text = QWEN_CONVERSATION.format(DRAW_INSTRUCTION.format(rec["caption"]))
    assert text == rec["formatted"]
    assert blip3o.tokenizer([text]).input_ids[0] == rec["prompt_ids"]
    with torch.inference_mode():
        features = blip3o.features(text, torch.Generator().manual_seed(rec["seed"]))
    assert list(features.shape) == rec["features_shape"]
    np.testing.assert_allclose(features[0, 0, :8].numpy(), rec["features_first8"], atol=FEATURE_ATOL, rtol=0)
    np.testing.assert_allclose(features[0, 5, :8].numpy(), rec["features_row5_first8"], atol=FEATURE_ATOL, rtol=0)
    assert float(features.double().abs().sum()) == pytest.approx(rec["features_abs_sum"], rel=1e-5)


def test_drawing_matches_the_authors_pixels_whatever_the_batch(blip3o):
    rec = EXPECTED["draw"]
    # the recorded prompt second in a batch: each image depends on its own prompt and seed only
    _, image = blip3o.generate(["a green field", rec["caption"]], [7, rec["seed"]])
    pixels = np.asarray(image).astype(int)
    expected = np.array(rec["pixels"]).reshape(rec["pixels_shape"])
    assert pixels.shape == expected.shape
    assert np.abs(pixels - expected).max() <= 1  # uint8 rounding of float32 pixels


def test_the_checkpoint_folder_is_the_published_layout():
    folder = DATA / "BLIP3o-Model-4B"
    for name in ("config.json", "model.safetensors", "tokenizer_config.json", "vocab.json", "merges.txt",
                 "diffusion-decoder/model_index.json", "diffusion-decoder/scheduler/scheduler_config.json",
                 "diffusion-decoder/unet/diffusion_pytorch_model.bf16.safetensors",
                 "diffusion-decoder/vae/diffusion_pytorch_model.bf16.safetensors"):
        assert (folder / name).is_file(), name


def test_plan_names_the_model_without_loading_and_arguments_are_checked_first(tmp_path):
    from lmms_genbench.core.args import ArgumentError
    from lmms_genbench.core.failures import GeneratorConfigError
    from lmms_genbench.generators.unified import plan_unified

    plan = plan_unified("blip3o", {"pretrained": "BLIP3o/BLIP3o-Model-4B", "device": "cpu"})
    assert plan.name.startswith("blip3o-blip3o-blip3o-model-4b-") and plan.batch_size == 1
    other = plan_unified("blip3o", {"pretrained": "BLIP3o/BLIP3o-Model-4B", "device": "cpu", "decoder_steps": 25})
    assert other.name != plan.name  # every setting that changes an image is in the name
    with pytest.raises(ArgumentError, match="image_size"):
        build_unified("blip3o", pretrained=str(tmp_path), device="cpu", image_size=1020)
    with pytest.raises(GeneratorConfigError, match="lacks config.json"):
        build_unified("blip3o", pretrained=str(tmp_path), device="cpu", dtype="float32")


# -- the decoder at guidance 1 or below (pipeline_llava_gen.py, an EMU2 pipeline:
# ``do_classifier_free_guidance = guidance_scale > 1.0``): " " is not encoded, so its DiT noise is
# never drawn and the decoder's starting noise is the draw right after the prompt's; the UNet runs
# the conditional row alone and the scale has no effect. Three steps each, to stay fast.

def _draw_spied(model, monkeypatch, guidance):
    before = (model.decoder_guidance, model.decoder_steps, model.dit_steps)
    model.decoder_guidance, model.decoder_steps, model.dit_steps = guidance, 3, 3
    seen = {"features": [], "unet_rows": [], "state": None}
    features, decode, unet = model.features, model.decode_features, model.unet.forward

    def spy_features(text, generator):
        seen["features"].append(text)
        return features(text, generator)

    def spy_decode(cond, null, generator):
        seen["state"] = generator.get_state()
        return decode(cond, null, generator)

    def spy_unet(sample, *args, **kwargs):
        seen["unet_rows"].append(sample.shape[0])
        return unet(sample, *args, **kwargs)

    monkeypatch.setattr(model, "features", spy_features)
    monkeypatch.setattr(model, "decode_features", spy_decode)
    monkeypatch.setattr(model.unet, "forward", spy_unet)
    with single_thread():
        image = model.generate(["a red cat"], [7])[0]
    monkeypatch.undo()
    model.decoder_guidance, model.decoder_steps, model.dit_steps = before
    return image, seen


def test_guidance_at_or_below_one_is_the_conditional_branch_alone(blip3o, monkeypatch):
    from lmms_genbench.generators.unified.blip3o.model import DRAW_INSTRUCTION, QWEN_CONVERSATION

    prompt = QWEN_CONVERSATION.format(DRAW_INSTRUCTION.format("a red cat"))
    at_one, seen = _draw_spied(blip3o, monkeypatch, 1.0)
    assert seen["features"] == [prompt]  # " " is not encoded
    assert set(seen["unet_rows"]) == {1}
    # the decoder's noise is drawn right after the prompt's DiT noise
    reference, steps = torch.Generator().manual_seed(7), blip3o.dit_steps
    blip3o.dit_steps = 3
    try:
        with single_thread(), torch.inference_mode():
            blip3o.features(prompt, reference)
    finally:
        blip3o.dit_steps = steps
    assert torch.equal(seen["state"], reference.get_state())

    below, seen_below = _draw_spied(blip3o, monkeypatch, 0.5)
    assert seen_below["features"] == [prompt] and set(seen_below["unet_rows"]) == {1}
    assert np.array_equal(np.asarray(below), np.asarray(at_one))  # the scale has no effect at or below 1


def test_guidance_above_one_encodes_the_blank_prompt_and_guides(blip3o, monkeypatch):
    from lmms_genbench.generators.unified.blip3o.model import NEGATIVE_PROMPT

    _, seen = _draw_spied(blip3o, monkeypatch, 3.0)
    assert seen["features"][1] == NEGATIVE_PROMPT and len(seen["features"]) == 2
    assert set(seen["unet_rows"]) == {2}
