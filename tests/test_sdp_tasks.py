"""Semantic drift task functions (the end-to-end run is in test_integration)."""

import datasets
import pytest
from PIL import Image

from lmms_genbench.data.sdp import join_nd400
from lmms_genbench.metrics.scorers.mcd import MCD
from lmms_genbench.tasks.sdp import utils


def test_each_pair_becomes_a_text_first_and_an_image_first_chain():
    pairs = datasets.Dataset.from_dict({"pair_id": ["a", "b"], "source": ["x", "y"], "caption": ["c1", "c2"]})
    docs = utils.both_directions(pairs)
    assert docs["chain_id"] == ["a#text_first", "b#text_first", "a#image_first", "b#image_first"]
    assert docs["direction"] == ["text_first", "text_first", "image_first", "image_first"]
    assert docs["caption"] == ["c1", "c2", "c1", "c2"]


def test_metric_names_follow_the_generations_each_mapping_uses():
    names = MCD.metric_names(4, {"sources": ["s1"]})
    assert [n for n in names if n.startswith("s_text->text")] == ["s_text->text@2", "s_text->text@4"]
    assert [n for n in names if n.startswith("s_image->text")] == ["s_image->text@1", "s_image->text@3"]
    assert "mcd_avg_s1" in names and len(MCD.metric_names(20, {"sources": ["nocaps", "docci"]})) == 7 + 40 + 2


class _Table(list):
    def __getitem__(self, key):
        if isinstance(key, str):
            return [row[key] for row in self]
        return super().__getitem__(key)

    def select(self, indices):
        return _Table(self[i] for i in indices)


def test_nd400_join_keeps_list_order_and_first_nocaps_caption():
    img = Image.new("RGB", (2, 2))
    tables = {
        "google/docci": _Table([{"example_id": "d1", "description": "a long docci caption", "image": img},
                                {"example_id": "d2", "description": "unused", "image": img}]),
        "HuggingFaceM4/NoCaps": _Table([{"image_id": 7, "annotations_captions": ["first", "second"], "image": img}]),
    }
    load = lambda path, split, revision=None: tables[path]  # noqa: E731
    rows = join_nd400([{"source": "nocaps", "image_id": 7}, {"source": "docci", "image_id": "d1"}], load=load)
    assert [(r["pair_id"], r["caption"]) for r in rows] == [("nocaps/7", "first"), ("docci/d1", "a long docci caption")]
    with pytest.raises(ValueError, match="1 nd400 pairs were not found"):
        join_nd400([{"source": "docci", "image_id": "nope"}], load=load)
    with pytest.raises(ValueError, match="source must be 'docci' or 'nocaps'"):
        join_nd400([{"source": "coco", "image_id": 1}], load=load)


def test_script_datasets_fall_back_to_a_parquet_copy_and_say_why(caplog):
    img = Image.new("RGB", (2, 2))
    calls = []

    def load(path, split, revision=None):
        calls.append((path, revision))
        if path == "google/docci":
            raise RuntimeError("Dataset scripts are no longer supported, but found docci.py")
        return _Table([{"example_id": "d1", "description": "from the mirror", "image": img}])

    rows = join_nd400([{"source": "docci", "image_id": "d1"}], load=load)
    assert rows[0]["caption"] == "from the mirror"
    assert calls == [("google/docci", "refs/convert/parquet"), ("not-lain/docci", None)]
    assert "scripts are no longer supported" in caplog.text

    def offline(path, split, revision=None):
        raise ConnectionError(f"no hub for {path}")

    with pytest.raises(RuntimeError, match="google/docci@refs/convert/parquet.*not-lain/docci@main"):
        join_nd400([{"source": "docci", "image_id": "d1"}], load=offline)


def test_sdp_resample_command_writes_a_list_sdp_nocaps_reads(tmp_path, monkeypatch, capsys):
    import datasets

    from lmms_genbench import cli
    from lmms_genbench.data import sdp as sdp_data

    ids = {"google/docci": [f"d{i}" for i in range(9)], "HuggingFaceM4/NoCaps": [str(i) for i in range(9)]}
    monkeypatch.setattr(datasets, "load_dataset", lambda path, split, revision=None: {"example_id": ids[path], "image_id": ids[path]})
    out = tmp_path / "pairs.jsonl"
    assert cli.main(["sdp", "resample", "--seed", "1", "--per-source", "3", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    pairs = sdp_data.load_pair_list(out)
    assert len(pairs) == 6 and pairs == sdp_data.resample_nd400(1, 3, load=datasets.load_dataset)

    # sdp_nocaps joins that list instead of the hub's nd400 when the variable is set
    seen = []
    monkeypatch.setattr(sdp_data, "join_nd400", lambda p: seen.append(list(p)) or [
        {"pair_id": f"{r['source']}/{r['image_id']}", "source": r["source"], "caption": "c", "image": None} for r in p
    ])
    monkeypatch.setenv(utils.PAIRS_ENV, str(out))
    docs = utils.nd400_docs(datasets.Dataset.from_list([{"source": "docci", "image_id": "hub"}]))
    assert seen == [pairs] and len(docs) == 12


def test_geneval_docs_name_the_missing_file(tmp_path, monkeypatch):
    monkeypatch.setenv(utils.GENEVAL_ENV, str(tmp_path / "absent.jsonl"))
    with pytest.raises(FileNotFoundError, match="lmms-genbench sdp fetch-geneval"):
        utils.geneval_docs(None)
    smoke = utils.geneval_smoke_docs(None)
    assert sorted(smoke["tag"]) == sorted(
        ["single_object", "two_object", "counting", "colors", "position", "color_attr"]
    )
    assert utils.doc_to_visual(smoke[0]) == []
