"""ChEF corruptions: deterministic for a seed, different across seeds and docs."""

import numpy as np
import pytest
from PIL import Image

from lmms_genbench.chef.corruptions import (
    IMAGE_CORRUPTIONS,
    TEXT_CORRUPTIONS,
    corrupt_image,
    corrupt_text,
    shuffle_options,
)


@pytest.fixture(scope="module")
def photo():
    rng = np.random.default_rng(0)
    return Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8))


@pytest.mark.parametrize("name", sorted(IMAGE_CORRUPTIONS))
def test_image_corruption_is_deterministic_and_changes_the_image(photo, name):
    a = np.asarray(corrupt_image(photo, name, 3, seed=7, key="doc-1"))
    b = np.asarray(corrupt_image(photo, name, 3, seed=7, key="doc-1"))
    assert a.shape == (48, 64, 3) and a.dtype == np.uint8
    assert np.array_equal(a, b)
    assert not np.array_equal(a, np.asarray(photo))
    if name in ("gaussian_noise", "fog"):  # the random ones depend on seed and doc
        assert not np.array_equal(a, np.asarray(corrupt_image(photo, name, 3, seed=8, key="doc-1")))
        assert not np.array_equal(a, np.asarray(corrupt_image(photo, name, 3, seed=7, key="doc-2")))


def test_severity_is_checked(photo):
    with pytest.raises(ValueError, match="severity"):
        corrupt_image(photo, "fog", 0, seed=0, key="x")
    with pytest.raises(ValueError, match="image corruption"):
        corrupt_image(photo, "snow", 1, seed=0, key="x")


TEXT = "Which of these states is farthest north in the United States of America today"


@pytest.mark.parametrize("level", sorted(TEXT_CORRUPTIONS))
def test_text_corruption_is_deterministic(level):
    a = corrupt_text(TEXT, level, 5, seed=3, key="q1")
    assert a == corrupt_text(TEXT, level, 5, seed=3, key="q1")
    assert a != TEXT
    outs = {corrupt_text(TEXT, level, 5, seed=s, key="q1") for s in range(6)}
    assert len(outs) > 1


def test_text_corruption_pinned_value():
    # pins the generator: a numpy or code change that alters corrupted sets fails here
    assert corrupt_text("the cat sat", "sentence", 1, seed=0, key="k").startswith("the cat sat ")


def test_shuffle_options_moves_gold():
    opts = ["red", "green", "blue", "yellow"]
    new, gold, perm = shuffle_options(opts, 2, seed=1, key="q")
    assert sorted(new) == sorted(opts) and new[gold] == "blue"
    assert [opts[i] for i in perm] == new
    assert shuffle_options(opts, 2, seed=1, key="q") == (new, gold, perm)
    assert len({tuple(shuffle_options(opts, 0, seed=s, key="q")[0]) for s in range(10)}) > 1
    with pytest.raises(ValueError, match="gold"):
        shuffle_options(opts, 4, seed=1, key="q")
