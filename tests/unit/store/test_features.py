"""The store's feature cache (store/features.py): a hit returns the very bytes stored, another
identity misses, a damaged file is a miss (never trusted) and is rewritten, a file is trusted only
whole (its header too: issue 43) and of the dtype and shape its reader expects, `store verify`
finds bad files and --repair removes them, writers racing on one file leave a whole one."""

import multiprocessing
import threading

import numpy as np
import pytest

from lmms_genbench.store import FEATURES, STORE_FORMAT, FeatureStore, feature_root, network_key, verify_features
from lmms_genbench.store.features import decode, encode

IDENTITY = {"role": "image", "spec": "tiny-vit", "weights": {"seeded": "tiny-vit"}, "device": "cpu",
            "dtype": "float32", "options": {}}
ITEM = "ab" + "0" * 62


def _row(seed=0, dim=32):
    return np.random.default_rng(seed).standard_normal(dim).astype(np.float32)


def test_a_stored_row_comes_back_bit_for_bit_with_its_extras(tmp_path):
    store = FeatureStore(tmp_path, IDENTITY)
    assert store.get(ITEM) is None
    row = _row()
    assert store.put(ITEM, row, {"kind": "truncated", "cut": True})
    again = FeatureStore(tmp_path, dict(IDENTITY))  # another process's view: same key, same file
    array, extras = again.get(ITEM)
    assert array.dtype == np.float32 and array.tobytes() == row.tobytes()
    assert extras == {"kind": "truncated", "cut": True}
    assert store.path(ITEM) == tmp_path / store.key / "ab" / f"{ITEM}.feat"
    assert (tmp_path / store.key / "identity.json").is_file()


@pytest.mark.parametrize("change", [
    {"dtype": "bfloat16"}, {"device": "cuda"}, {"spec": "tiny-clip"}, {"options": {"long_text": "chunk_mean"}},
    {"weights": {"hub": "google/vit-base-patch16-224-in21k", "commit": "abc"}}, {"role": "fid"},
])
def test_another_network_or_setting_misses(tmp_path, change):
    FeatureStore(tmp_path, IDENTITY).put(ITEM, _row())
    other = FeatureStore(tmp_path, {**IDENTITY, **change})
    assert other.key != network_key(IDENTITY)
    assert other.get(ITEM) is None


def _damage(path, how):
    blob = path.read_bytes()
    if how == "truncated":
        path.write_bytes(blob[:-7])
    elif how == "flipped":
        path.write_bytes(blob[:-1] + bytes([blob[-1] ^ 1]))
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "header":
        path.write_bytes(blob.replace(b'"item"', b'"iten"', 1))
    elif how == "other item":  # a whole, valid file copied under another item's name
        array, extras = decode(blob, ITEM, None)
        path.write_bytes(encode("cd" + "0" * 62, path.parent.parent.name, array, extras))
    elif how == "dtype bit":  # one bit of the header: '<' (0x3c) -> '>' (0x3e)
        assert blob.count(b'"<f4"') == 1
        path.write_bytes(blob.replace(b'"<f4"', b'">f4"'))
    elif how == "shape":
        path.write_bytes(blob.replace(b'"shape": [32]', b'"shape": [1, 32]'))


@pytest.mark.parametrize("how", ["truncated", "flipped", "empty", "header", "other item", "dtype bit", "shape"])
def test_a_damaged_file_is_a_miss_and_is_rewritten(tmp_path, how):
    store = FeatureStore(tmp_path, IDENTITY)
    store.put(ITEM, _row())
    _damage(store.path(ITEM), how)
    assert store.get(ITEM) is None and store.corrupt == 1
    store.put(ITEM, _row(1))
    assert store.get(ITEM)[0].tobytes() == _row(1).tobytes()


@pytest.mark.parametrize("forged", [{"dtype": ">f4"}, {"shape": (1, 32)}, {"dtype": "<f8"}])
def test_a_whole_file_of_another_dtype_or_shape_than_expected_is_a_counted_miss_and_is_replaced(tmp_path, forged):
    """A file whose checksum holds (rewritten by hand, or by other code) but whose header's dtype
    or shape is not what the reader expects is never served: counted, then replaced by the row
    computed again (not taken for an unstable item)."""
    store = FeatureStore(tmp_path, IDENTITY)
    row = _row()
    bad = row.astype(forged.get("dtype", "<f4")).reshape(forged.get("shape", (32,)))
    store.path(ITEM).parent.mkdir(parents=True)
    store.path(ITEM).write_bytes(encode(ITEM, store.key, bad))
    assert store.get(ITEM, np.float32, (None,)) is None and store.corrupt == 1
    assert store.put(ITEM, row)
    array, _ = store.get(ITEM, np.float32, (None,))
    assert array.tobytes() == row.tobytes() and store.corrupt == 1


def test_store_verify_finds_bad_feature_files_and_repair_removes_them(tmp_path):
    store = FeatureStore(tmp_path / FEATURES, IDENTITY)
    items = [f"{k:02d}" + "0" * 62 for k in range(3)]
    for k, item in enumerate(items):
        store.put(item, _row(k))
    _damage(store.path(items[1]), "dtype bit")
    old = tmp_path / FEATURES / "0123456789abcdef"
    (old / "ab").mkdir(parents=True)
    (old / "identity.json").write_text('{"format": 1}')
    (old / "ab" / f"{ITEM}.feat").write_bytes(b"LGBFEAT1\n{}\n")
    report = verify_features(tmp_path)
    assert report["files"] == 3 and [p for p, _ in report["bad"]] == [store.path(items[1])]
    assert report["outdated"] == [old] and report["removed"] == 0
    assert verify_features(tmp_path, repair=True)["removed"] == 1
    assert not store.path(items[1]).exists() and store.path(items[0]).exists()
    assert verify_features(tmp_path)["bad"] == []


def test_an_unwritable_store_says_so_and_scoring_goes_on(tmp_path):
    (tmp_path / "ro").write_text("a file where the folder would go")
    store = FeatureStore(tmp_path / "ro", IDENTITY)
    assert store.put(ITEM, _row()) is False
    assert store.unwritable  # why, for the report's cache field


def _hammer(root, rounds):
    store = FeatureStore(root, IDENTITY)
    for r in range(rounds):
        for k in range(8):  # every writer computes the same rows, as two runs on one store do
            item = f"{k:02d}" + "0" * 62
            if r % 2:
                store.path(item).unlink(missing_ok=True)  # and rewrites them, racing the others
            store.put(item, _row(k))


def test_writers_racing_on_one_store_leave_whole_files(tmp_path):
    """Two processes and two threads write the same items while a reader reads: every read is
    absent or the whole row, never a part, and nothing is found corrupt."""
    rows = [_row(k).tobytes() for k in range(8)]
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_hammer, args=(tmp_path, 100)) for _ in range(2)]
    threads = [threading.Thread(target=_hammer, args=(tmp_path, 100)) for _ in range(2)]
    for worker in procs + threads:
        worker.start()
    reader = FeatureStore(tmp_path, IDENTITY)
    seen = 0
    while any(p.is_alive() for p in procs) or any(t.is_alive() for t in threads):
        for k in range(8):
            found = reader.get(f"{k:02d}" + "0" * 62)
            if found is not None:
                assert found[0].tobytes() == rows[k]
                seen += 1
    for worker in procs + threads:
        worker.join()
    assert all(p.exitcode == 0 for p in procs)
    assert reader.corrupt == 0 and seen > 0
    assert not [p for p in reader.folder.rglob("*.tmp")]  # no temporary file left behind


def test_an_item_computed_with_other_bytes_is_never_served_again(tmp_path):
    """A network whose row for an item depends on the rest of its batch: the item is marked
    unstable, so every batch holding it is computed as without the cache."""
    store = FeatureStore(tmp_path, IDENTITY)
    store.put(ITEM, _row(0))
    store.put(ITEM, _row(0))  # the same bytes: still served
    assert store.get(ITEM)[0].tobytes() == _row(0).tobytes()
    store.put(ITEM, _row(0) + np.float32(1e-7))
    assert store.get(ITEM) is None and store.corrupt == 0
    store.put(ITEM, _row(0))
    assert store.get(ITEM) is None  # stays unstable


def test_features_live_at_the_store_root_of_an_engine_namespace(tmp_path):
    namespace = tmp_path / "describer" / "generator" / "protocol"
    namespace.mkdir(parents=True)
    assert feature_root(namespace) == namespace / FEATURES  # no format marker: not known to be a store's
    (namespace / STORE_FORMAT).write_text('{"records": 1}\n')
    assert feature_root(namespace) == tmp_path / FEATURES  # shared by every describer x generator pair


@pytest.mark.parametrize("forged", [{"dtype": ">f4"}, {"shape": (1, 32)}, {"dtype": "<f8"}, {"length": 16}])
def test_store_verify_checks_a_re_signed_header_against_what_scoring_reads(tmp_path, forged):
    """Issue 52: a file whose header was changed and its checksum made again passes every
    whole-file check; `store verify` reads it as scoring does (the dtype and shape its network's
    role gives, store.features.LAYOUTS; an embedding's length that of the network's other rows)."""
    store = FeatureStore(tmp_path / FEATURES, IDENTITY)
    items = [f"{k:02d}" + "0" * 62 for k in range(3)]
    for k, item in enumerate(items):
        store.put(item, _row(k))
    row = _row(9, forged.get("length", 32))
    bad = row.astype(forged.get("dtype", "<f4")).reshape(forged.get("shape", row.shape))
    store.path(items[1]).write_bytes(encode(items[1], store.key, bad))
    assert decode(store.path(items[1]).read_bytes(), items[1], store.key) is not None  # whole and signed
    report = verify_features(tmp_path)
    assert report["files"] == 3 and [p for p, _ in report["bad"]] == [store.path(items[1])], report
    assert "its header says" in report["bad"][0][1]
    assert verify_features(tmp_path, repair=True)["removed"] == 1 and verify_features(tmp_path)["bad"] == []
