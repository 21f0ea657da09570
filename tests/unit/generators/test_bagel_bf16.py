"""unified=bagel in bfloat16 against the authors' own bfloat16 run (oscarqjh/Bagel 751db47 as they run
it: bfloat16 weights through accelerate, the float32 autoencoder, autocast; here CPU autocast and the
flash-attn stand-in returning bfloat16) on the tiny parity BAGEL: tests/support/data/parity/bagel/
authors_bf16.json (README.md there, "bfloat16", says how it was made).

The authors' own bfloat16 differs from their float32 (expected.json) by 0.014 in the first-step logits,
0.035 in the notebook drawing's latents and 5 levels in its pixels; the port's bfloat16 differs from
that float32 record by about as much (0.021, 0.034, 5), and from the authors' bfloat16 by 0.023, 0.049
and 7: two bfloat16 roundings of the same float32 result, each about one rounding away from it (the
port's autoencoder holds bfloat16 weights, theirs float32 ones under autocast: on the same latents
their decoders' pixels differ by up to 5). So the allowance is tests/support/allowances.py's: twice
the authors' own bfloat16-versus-float32 difference. Greedy ids are compared exactly up to the first
pick the authors' bfloat16 made at a margin within that allowance (their 6th pick is an exact tie).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from PIL import Image

from lmms_genbench.generators.unified import build_unified
from lmms_genbench.generators.unified.bagel.network import FlowSettings
from tests.support.allowances import assert_within_bf16_rounding
from tests.support.threads import single_thread

PARITY = Path(__file__).resolve().parents[2] / "support" / "data" / "parity" / "bagel"
AUTHORS = json.loads((PARITY / "authors_bf16.json").read_text(encoding="utf-8"))
ROUNDING = AUTHORS["authors_bf16_vs_f32"]  # their bfloat16 against their float32 (expected.json)


@pytest.fixture(scope="module")
def bagel():
    # what unified=bagel,unified.pretrained=<folder>,unified.device=cpu,unified.dtype=bfloat16 builds
    with single_thread():
        yield build_unified("bagel", pretrained=str(PARITY / "BAGEL-7B-MoT-tiny"), device="cpu", dtype="bfloat16")


def test_bf16_understanding_is_the_authors_bf16(bagel):
    und = AUTHORS["understanding"]
    logits = []
    with single_thread():
        bagel.describe_one(Image.open(PARITY / "input.png"), und["prompt"], und["max_length"], on_logits=logits.append)
    assert_within_bf16_rounding(logits[0].float().numpy(), und["first_logits"], ROUNDING["first_logits"])
    ours = [bagel.special.bos] + [int(torch.argmax(step)) for step in logits[:-1]]
    # a pick is certain while its margin exceeds what the two runs' logits may differ by on both sides
    certain = next(i for i, margin in enumerate(und["step_margins"]) if margin <= 4 * ROUNDING["first_logits"])
    assert certain == 5  # the 6th pick: a tie in the authors' bfloat16 (their float32 margin 0.0076)
    assert ours[:certain + 1] == und["token_ids"][:certain + 1]


def test_bf16_notebook_drawing_is_the_authors_bf16(bagel):
    spec = AUTHORS["drawing"]
    s = spec["settings"]
    flow = FlowSettings(s["cfg_text_scale"], s["cfg_img_scale"], tuple(s["cfg_interval"]), s["timestep_shift"],
                        s["num_timesteps"], s["cfg_renorm_min"], s["cfg_renorm_type"])
    with single_thread():
        tokens, image = bagel.draw_one(spec["prompt"], spec["seed"], *spec["image_shape"], flow)
    assert list(tokens.shape) == spec["latent_shape"]
    assert_within_bf16_rounding(tokens.float().numpy(), spec["latent"], ROUNDING["latent"], ROUNDING["latent_mean"])
    pixels = np.asarray(image)
    assert list(pixels.shape) == spec["pixels_shape"]
    assert_within_bf16_rounding(pixels, spec["pixels"], ROUNDING["pixels"], ROUNDING["pixels_mean"])
