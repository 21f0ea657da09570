"""``generator=lmms:<model type>``: lmms-eval's own image-generating model types as our generator.

Driven with a tiny stand-in (``lmms_genbench.smoke.host_image``) that answers as
``bagel``/``ovis_u1``/``mmada`` do in lmms-eval 0.7.3; no real generation class of
lmms-eval was run (each needs its own multi-GB checkpoint)."""


import pytest
from PIL import Image

from lmms_genbench.core.args import ArgumentError
from lmms_genbench.core.errors import ActionableError
from lmms_genbench.generators import GenerationFailure, build_generator
from lmms_genbench.generators.lmms_backend import read_answer
from lmms_genbench.smoke.host_image import register_tiny_image_model


@pytest.fixture(scope="module")
def model_type():
    return register_tiny_image_model()


def test_lmms_generator_reads_the_images_the_host_model_saved(model_type, tmp_path):
    gen = build_generator(f"lmms:{model_type}", output_dir=str(tmp_path), seed=3, batch_size=2)
    out = gen.generate(["a red cat", "a blue dog", "a red cat"], [0, 1, 2])
    assert all(isinstance(o, Image.Image) and o.size == (32, 32) for o in out)
    assert out[0].tobytes() == out[2].tobytes() != out[1].tobytes()
    assert gen.name.startswith(f"lmms-{model_type}-")
    # the saved files are the model's: one per prompt, in its own run folder
    assert len(list(tmp_path.rglob("*.png"))) == 3
    # where it saves does not key the store; its seed does
    assert build_generator(f"lmms:{model_type}", output_dir=str(tmp_path / "b"), seed=3).name == gen.name
    assert build_generator(f"lmms:{model_type}", output_dir=str(tmp_path), seed=4).name != gen.name


@pytest.mark.parametrize("answer, reason", [
    ("missing", "does not exist"),
    ("undecodable", "does not decode"),
    ("text", "answered text, not an image: '[GENERATION_FAILED] out of memory'"),
    ("no_images", "answered no image paths"),
])
def test_a_missing_or_broken_image_is_a_failure_with_its_reason(model_type, tmp_path, answer, reason):
    gen = build_generator(f"lmms:{model_type}", output_dir=str(tmp_path), answer=answer)
    [out] = gen.generate(["a cat"], [0])
    assert isinstance(out, GenerationFailure) and reason in out.reason


def test_read_answer_takes_wan_folders_and_plain_paths(tmp_path):
    Image.new("RGB", (8, 8), (9, 9, 9)).save(tmp_path / "0001_s0.png")
    assert read_answer(str(tmp_path), doc_id=1).size == (8, 8)
    assert read_answer(str(tmp_path / "0001_s0.png")).size == (8, 8)
    assert "holds no 0002_s*.png" in read_answer(str(tmp_path), doc_id=2).reason
    assert "does not parse" in read_answer("{not json").reason
    assert isinstance(read_answer(None), GenerationFailure)


def test_lmms_prefix_needs_a_registered_model_type():
    for bare in ("lmms:", "lmms"):
        with pytest.raises(ArgumentError, match="generator=lmms:<model type>"):
            build_generator(bare)
    with pytest.raises(ActionableError, match="not a registered lmms-eval model"):
        build_generator("lmms:no_such_model_type")
