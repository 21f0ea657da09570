"""unified=vila_u against the authors' own code, output for output, on a tiny random checkpoint.

tests/support/data/parity/vila_u/ holds a tiny VILA-U built from the authors' classes (mit-han-lab/vila-u
at 096623c) in their published layout, and what their code output for it (README.md there says how).
Here it is loaded exactly as a user names it (``unified=vila_u,unified.pretrained=<folder>``).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

from PIL import Image  # noqa: E402

from lmms_genbench.generators.unified.registry import build_unified, plan_unified  # noqa: E402
from lmms_genbench.generators.unified.vila_u.inputs import describe_prompt, token_ids  # noqa: E402
from tests.support.allowances import assert_within_bf16_rounding  # noqa: E402
from tests.support.threads import single_thread  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "support" / "data" / "parity" / "vila_u"
EXPECTED = json.loads((DATA / "expected.json").read_text(encoding="utf-8"))
LOGITS_ATOL = 1e-5  # float32, eager LLaMA + a PyTorch flash-attention stand-in vs transformers 5 sdpa
PIXELS_ATOL = 1e-3  # float32: the recorded pixels are rounded to 4 decimals


def bf16_rounding(draw) -> tuple[float, float]:
    """The scale of bfloat16's own rounding on this decoder: the largest and the mean difference
    between the authors' bfloat16 and float32 pixels of one draw (7.5-8.9 and 1.15-1.22 levels of 255)."""
    diff = np.abs(np.asarray(draw["pixels_bf16"]) - np.asarray(draw["pixels_f32"]))
    return float(diff.max()), float(diff.mean())


def assert_bf16_pixels_match(ours, theirs_bf16, draw):
    """Ours in bfloat16 against the authors' bfloat16, within twice bfloat16's rounding on this network
    (tests/support/allowances.py). Measured: oneDNN's AVX2 kernels against AVX-512 moved these pixels by
    up to 2.0 levels, ``ATEN_CPU_CAPABILITY=default`` by 8.4 (issue 53 saw 2-3 levels on an AVX2 EPYC),
    against 5e-4 on the CPU that recorded them. The float32 path is held to 1e-3 by the tests above;
    this one catches a wrong code or layer (one code changed: 150 levels, 21 on average, test below),
    not a rounding choice."""
    assert_within_bf16_rounding(ours, theirs_bf16, *bf16_rounding(draw))


@pytest.fixture(scope="module")
def model():
    with single_thread():  # a network this small runs fastest on one thread (and contends least)
        yield build_unified("vila_u", pretrained=str(DATA / "vila-u-7b-256"), device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def image():
    return Image.open(DATA / "image.png").convert("RGB")


def test_the_prompt_and_pixels_are_the_authors(model, image):
    assert token_ids(describe_prompt(EXPECTED["describe_prompt"]), model.tokenizer) == EXPECTED["describe_input_ids"]
    pixels = model.pixels([image])
    np.testing.assert_allclose(pixels.flatten()[:64].numpy(), EXPECTED["pixel_values"], atol=1e-6)
    assert float(pixels.double().sum()) == pytest.approx(EXPECTED["pixel_values_sum"], abs=1e-4)


def test_the_pad_preprocessing_is_the_authors(model, image, monkeypatch):
    monkeypatch.setattr(model, "aspect", "pad")  # image_aspect_ratio "pad": squared on the mean colour
    pixels = model.pixels([image])
    np.testing.assert_allclose(pixels.flatten()[:64].numpy(), EXPECTED["pixel_values_pad"], atol=1e-6)
    assert float(pixels.double().sum()) == pytest.approx(EXPECTED["pixel_values_pad_sum"], abs=1e-4)


def test_the_tower_codes_and_the_understanding_logits_match(model, image):
    with torch.no_grad():
        features, codes = model.tower.encode(model.pixels([image]))
        logits = model.llm(inputs_embeds=model.prompt_embeds([image], EXPECTED["describe_prompt"])).logits[0]
    assert codes[0].tolist() == EXPECTED["encoder_codes"]
    np.testing.assert_allclose(features[0, :, :4].flatten().numpy(), EXPECTED["encoder_features"], atol=1e-5)
    np.testing.assert_allclose(logits[-1].numpy(), EXPECTED["logits_last"], atol=LOGITS_ATOL)
    for row, values in EXPECTED["logits_rows"].items():
        np.testing.assert_allclose(logits[int(row), :16].numpy(), values, atol=LOGITS_ATOL)


def test_the_greedy_description_matches(model, image):
    # the authors' generate returns a BOS placeholder before the 20 new ids
    assert model.tokenizer.decode(EXPECTED["greedy_ids"][1:]) == EXPECTED["greedy_text"]
    out = model.describe([image], EXPECTED["describe_prompt"], {"temperature": 0, "max_new_tokens": 20})
    assert out == [EXPECTED["greedy_text"]]


def test_the_image_codes_and_pixels_match_the_authors_seeded_draws(model):
    draws = EXPECTED["draws"]
    with torch.no_grad():
        codes = model.image_codes([d["prompt"] for d in draws], [d["seed"] for d in draws])  # one batch
        for i, draw in enumerate(draws):
            assert codes[i].tolist() == draw["codes"], draw["prompt"]
            pixels = model.decode_codes(torch.tensor([draw["codes"]]))
            np.testing.assert_allclose(pixels.flatten().numpy(), draw["pixels_f32"], atol=PIXELS_ATOL)


def test_the_decoder_in_bfloat16_matches_the_authors_bfloat16_pixels(model):
    # the authors' upsampler casts to bfloat16, so their decoder only runs in bfloat16
    tower = model.tower
    model.tower = copy.deepcopy(tower).to(torch.bfloat16)
    try:
        with torch.no_grad():
            for draw in EXPECTED["draws"]:
                pixels = model.decode_codes(torch.tensor([draw["codes"]]))
                assert_bf16_pixels_match(pixels.float().numpy(), draw["pixels_bf16"], draw)
    finally:
        model.tower = tower


def test_the_bf16_allowance_catches_one_code_changed(model):
    """The decoder in bfloat16 given the draw's codes with the first position's codes moved by one:
    far outside the allowance, though the same codes elsewhere decode as before."""
    draw = EXPECTED["draws"][0]
    codes = [list(draw["codes"][0]), *draw["codes"][1:]]
    codes[0] = [(code + 1) % 1024 for code in codes[0]]
    tower = model.tower
    model.tower = copy.deepcopy(tower).to(torch.bfloat16)
    try:
        with torch.no_grad():
            pixels = model.decode_codes(torch.tensor([codes])).float().numpy()
    finally:
        model.tower = tower
    with pytest.raises(AssertionError):
        assert_bf16_pixels_match(pixels, draw["pixels_bf16"], draw)


def test_generate_returns_the_decoded_image_and_each_depends_on_its_own_seed_only(model):
    draw = EXPECTED["draws"][0]
    alone = model.generate([draw["prompt"]], [draw["seed"]])[0]
    batched = model.generate(["something else", draw["prompt"]], [3, draw["seed"]])[1]
    expected = np.array(draw["pixels_f32"]).reshape(3, 32, 32).transpose(1, 2, 0).astype(np.uint8)
    assert alone.size == (32, 32)
    assert np.abs(np.asarray(alone).astype(int) - expected).max() <= 1  # truncation at a rounded boundary
    assert np.array_equal(np.asarray(alone), np.asarray(batched))


def test_plan_names_the_model_without_loading_it():
    plan = plan_unified("vila_u", {"pretrained": "mit-han-lab/vila-u-7b-256", "device": "cpu"})
    assert plan.name.startswith("vila_u") and plan.batch_size == 4
    with pytest.raises(ValueError, match="image_top_p"):
        plan_unified("vila_u", {"pretrained": "x", "device": "cpu", "image_top_p": 1.5})


BRANCHES = json.loads((DATA / "expected_branches.json").read_text(encoding="utf-8"))


def test_a_quantizer_with_one_codebook_per_level_matches_the_authors():
    from safetensors.torch import load_file

    from lmms_genbench.generators.unified.vila_u.tower import ResidualQuantizer

    state = load_file(str(DATA / "quantizer_unshared.safetensors"))
    quantizer = ResidualQuantizer(64, 16, 3, shared=False)
    quantizer.load_state_dict({k: v for k, v in state.items() if k.endswith(".weight")})
    with torch.no_grad():
        features, codes = quantizer(state["input"])
        summed = quantizer.embed(codes).sum(-2)
    expected = BRANCHES["unshared"]
    assert codes.tolist() == expected["codes"]
    np.testing.assert_allclose(features.flatten().numpy(), expected["features"], atol=1e-5)
    np.testing.assert_allclose(summed.flatten().numpy(), expected["embed_sum"], atol=1e-5)


def test_decoding_through_decoder_latent_shape_matches_the_authors(model):
    expected = BRANCHES["decoder_latent_shape"]
    tower = model.tower
    model.tower = copy.deepcopy(tower).to(torch.bfloat16)
    model.tower.decoder_latent_shape = expected["shape"]
    try:
        with torch.no_grad():
            pixels = model.decode_codes(torch.tensor([EXPECTED["draws"][expected["codes_of"]]["codes"]]))
    finally:
        model.tower = tower
    assert list(pixels.shape) == expected["size"]
    # the same codes' draw gives bfloat16's rounding scale on this decoder
    assert_bf16_pixels_match(pixels.float().numpy(), expected["pixels_bf16"], EXPECTED["draws"][expected["codes_of"]])


def test_image_temperature_zero_takes_the_best_code_whatever_the_seed(model, monkeypatch):
    monkeypatch.setattr(model, "image_temperature", 0.0)
    with torch.no_grad():
        codes = model.image_codes(["a red cat sitting on a table"] * 2, [1, 2])
    assert torch.equal(codes[0], codes[1])
    assert codes[0].tolist() != EXPECTED["draws"][0]["codes"]  # the sampled draw differs
