"""networks/loading.py: the spec grammar, "a name, a model or a loader", and the one cache."""

from pathlib import Path

import pytest

from lmms_genbench.metrics.networks.loading import (
    cached_network,
    cached_view,
    clear_networks,
    parse_spec,
    ready_or_loaded,
    resolve_model,
)


def test_a_spec_names_its_family_or_the_name_picks_one():
    infer = lambda name: "clip" if "clip" in name else "vit"  # noqa: E731
    assert parse_spec("dino:org/m", ("vit", "dino", "clip"), infer) == ("dino", "org/m")
    assert parse_spec("org/clip-b", ("vit", "dino", "clip"), infer) == ("clip", "org/clip-b")
    assert parse_spec(Path("weights/vit"), ("vit",), infer) == ("vit", "weights/vit")
    for empty in ("clip:", ""):
        with pytest.raises(ValueError, match="names no model after its prefix"):
            parse_spec(empty, ("clip",), infer)


class Net:
    def __call__(self, x):
        return x


def test_a_name_is_loaded_and_a_model_needs_its_companion():
    loads = []
    name, model, companion = resolve_model("org/m", lambda n: loads.append(n) or "loaded")
    assert (name, model, companion, loads) == ("org/m", "loaded", "org/m", ["org/m"])
    net = Net()
    assert resolve_model(net, None, companion="tok") == ("Net", net, "tok")
    assert resolve_model(net, None, default_companion=lambda: "pre")[2] == "pre"
    assert resolve_model(net, None) == ("Net", net, None)  # no companion_name: it needs none
    with pytest.raises(ValueError, match=r"^tokenizer is required when model is a loaded instance \(hint\)$"):
        resolve_model(net, None, companion_name="tokenizer", hint=" (hint)")
    with pytest.raises(ValueError, match="non-empty model name"):
        resolve_model("", None)
    with pytest.raises(TypeError, match="got int"):
        resolve_model(3, None)


class Encoder:
    def encode(self, items):
        return items


class Module:
    def parameters(self):
        return iter(())

    def forward(self, x):
        return x

    __call__ = forward


def test_an_object_is_used_a_loader_called_and_checked_a_name_left_to_build():
    ready = lambda obj: hasattr(obj, "encode") and not isinstance(obj, str)  # noqa: E731
    enc = Encoder()
    assert ready_or_loaded("org/m", ready, "text encoder", "encode") is None
    assert ready_or_loaded(enc, ready, "text encoder", "encode") is enc
    assert ready_or_loaded(lambda: enc, ready, "text encoder", "encode") is enc
    assert ready_or_loaded(Module(), ready, "detector", "detect", modules=True) is None
    with pytest.raises(TypeError, match=r"the detector loader returned int, which has no detect\(\)"):
        ready_or_loaded(lambda: 3, ready, "detector", "detect")
    with pytest.raises(TypeError, match="spec must be a model name/path, an image encoder object"):
        ready_or_loaded(3.5, ready, "image encoder", "encode")


def test_one_cache_loads_once_hands_out_views_and_clears_by_family():
    loads = []
    key_a, key_b = ("test-a", "m", "cpu"), ("test-b", "m", "cpu")
    a = cached_network(key_a, lambda: loads.append("a") or object())
    assert cached_network(key_a, lambda: loads.append("again") or object()) is a and loads == ["a"]
    view = cached_view(key_a, (8,), lambda: [a, 8])
    assert cached_view(key_a, (8,), lambda: [a, 8]) is view
    assert cached_view(key_a, (2,), lambda: [a, 2]) is not view
    b = cached_network(key_b, object)
    clear_networks("test-a")
    assert cached_network(key_b, object) is b
    assert cached_network(key_a, object) is not a
    assert cached_view(key_a, (8,), lambda: [a, 8]) is not view
    clear_networks("test-a", "test-b")
    assert cached_network(key_b, object) is not b
    clear_networks("test-a", "test-b")


def test_a_cached_load_may_look_up_other_cached_networks():
    """A colour classifier is built from the cached CLIP encoders inside its own cached load: the
    cache must let the loading thread look up other keys (one plain Lock hung MGG scoring)."""
    import threading

    from lmms_genbench.metrics.networks.detection import clear_geneval_cache, get_color_classifier

    found = []
    worker = threading.Thread(target=lambda: found.append(get_color_classifier("tiny-clip")), daemon=True)
    worker.start()
    worker.join(timeout=120)
    try:
        assert not worker.is_alive(), "get_color_classifier('tiny-clip') did not return: the cache deadlocked"
        assert hasattr(found[0], "classify")
        assert get_color_classifier("tiny-clip") is found[0]  # cached
    finally:
        clear_geneval_cache()


def test_a_slow_load_holds_up_its_own_key_only_and_loads_once():
    """Loading OWLv2-large takes minutes: other keys are looked up and loaded meanwhile, and a
    second caller of the loading key waits for that load instead of loading again."""
    import threading

    from lmms_genbench.metrics.networks.common import ModelCache

    cache, started, release, loads = ModelCache(), threading.Event(), threading.Event(), []

    def slow():
        loads.append("slow")
        started.set()
        assert release.wait(timeout=60)
        return "big"

    got = []
    first = threading.Thread(target=lambda: got.append(cache.get(("slow",), slow)), daemon=True)
    second = threading.Thread(target=lambda: got.append(cache.get(("slow",), slow)), daemon=True)
    first.start()
    assert started.wait(timeout=60)
    second.start()
    other = threading.Thread(target=lambda: got.append(cache.get(("fast",), lambda: "small")), daemon=True)
    other.start()
    other.join(timeout=10)
    assert not other.is_alive() and got == ["small"]  # not held up by the slow load
    release.set()
    first.join(timeout=60)
    second.join(timeout=60)
    assert got[1:] == ["big", "big"] and loads == ["slow"]
