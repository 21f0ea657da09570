"""Semantic drift task functions (the end-to-end runs: tests/smoke/test_smoke_results.py and tests/e2e/test_runs_e2e.py)."""

import datasets
import pytest
from PIL import Image

from lmms_genbench.data import sdp as sdp_data
from lmms_genbench.data.hub import PARQUET_EXPORT, HubCopy, HubTable, load_table
from lmms_genbench.data.sdp import join_nd400
from lmms_genbench.metrics.scorers.mcd import MCD
from lmms_genbench.tasks.sdp import utils

from tests.support import hub_fixtures as H


def test_each_pair_becomes_a_text_first_and_an_image_first_chain_side_by_side():
    """Neighbours, so that ``--limit N`` runs both directions (it drew text-first chains only)."""
    pairs = datasets.Dataset.from_dict({"pair_id": ["a", "b"], "source": ["x", "y"], "caption": ["c1", "c2"]})
    docs = utils.both_directions(pairs)
    assert docs["chain_id"] == ["a#text_first", "a#image_first", "b#text_first", "b#image_first"]
    assert docs["direction"] == ["text_first", "image_first", "text_first", "image_first"]
    assert docs["caption"] == ["c1", "c1", "c2", "c2"]


def test_metric_names_follow_the_generations_each_mapping_uses():
    names = MCD.metric_names(4, {"sources": ["s1"]})
    assert [n for n in names if n.startswith("s_text->text")] == ["s_text->text@2", "s_text->text@4"]
    assert [n for n in names if n.startswith("s_image->text")] == ["s_image->text@1", "s_image->text@3"]
    assert "mcd_avg_s1" in names and len(MCD.metric_names(20, {"sources": ["nocaps", "docci"]})) == 7 + 40 + 2 + 7 + 36
    # each MCD, MCD_avg and per-source MCD_avg is followed by its bootstrap stderr (lmms-eval's ±)
    assert names[names.index("mcd_avg_s1") + 1] == "mcd_avg_s1_stderr"
    assert names[names.index("mcd_text->text") + 1] == "mcd_text->text_stderr"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    return H.build_hub(tmp_path_factory.mktemp("hub"))


def test_nd400_join_keys_nocaps_by_file_name_and_keeps_list_order(hub):
    pairs = [{"source": "nocaps", "image_id": "0013ea2087020901.jpg"}, {"source": "docci", "image_id": "test_00003"}]
    rows = join_nd400(pairs, load=hub.load_dataset)
    assert [(r["pair_id"], r["source"], r["caption"]) for r in rows] == [
        ("nocaps/0013ea2087020901.jpg", "nocaps", "NoCaps caption 0 of image 0."),
        ("docci/test_00003", "docci", "A long DOCCI paragraph number 3 of the test split. It describes every object."),
    ]
    assert all(isinstance(r["image"], Image.Image) for r in rows)


def test_a_pair_that_does_not_join_is_reported_with_its_id(hub, caplog):
    # "7" is a NoCaps image_id (the old, wrong key); "aar_test_00000" is in DOCCI's other config
    pairs = [{"source": "nocaps", "image_id": "7"}, {"source": "docci", "image_id": "aar_test_00000"},
             {"source": "docci", "image_id": "test_00001"}]
    with pytest.raises(sdp_data.MissingPairsError) as caught:
        join_nd400(pairs, load=hub.load_dataset)
    message = str(caught.value)
    assert caught.value.missing == {"nocaps": ["7"], "docci": ["aar_test_00000"]}
    assert message.startswith("2 of 3 nd400 pairs are not in their source dataset")
    assert "matched on 'image_file_name' of split 'validation' of HuggingFaceM4/NoCaps@refs/convert/parquet" in message
    assert "matched on 'example_id' of split 'test' of google/docci@refs/convert/parquet (config docci)" in message
    assert "not by NoCaps' integer image_id" in message
    rows = join_nd400(pairs, load=hub.load_dataset, allow_missing=True)
    assert [r["pair_id"] for r in rows] == ["docci/test_00001"]
    assert "2 of 3 nd400 pairs" in caplog.text and "'aar_test_00000'" in caplog.text
    with pytest.raises(sdp_data.MissingPairsError):  # nothing joins: nothing to run
        join_nd400(pairs[:2], load=hub.load_dataset, allow_missing=True)


def test_sdp_nocaps_stops_on_a_missing_pair_unless_allowed(hub, monkeypatch, caplog):
    monkeypatch.setattr(datasets, "load_dataset", hub.load_dataset)
    nd400 = datasets.Dataset.from_list([{"source": "nocaps", "image_id": "0013ea2087020901.jpg"},
                                        {"source": "nocaps", "image_id": "absent.jpg"}])
    with pytest.raises(sdp_data.MissingPairsError, match=f"'absent.jpg'.*{utils.ALLOW_MISSING_ENV}=1 runs"):
        utils.nd400_docs(nd400)
    monkeypatch.setenv(utils.ALLOW_MISSING_ENV, "1")
    docs = utils.nd400_docs(nd400)
    assert docs["chain_id"] == ["nocaps/0013ea2087020901.jpg#text_first", "nocaps/0013ea2087020901.jpg#image_first"]
    assert "1 of 2 nd400 pairs" in caplog.text
    monkeypatch.setenv(utils.ALLOW_MISSING_ENV, "yes")
    with pytest.raises(ValueError, match=f"{utils.ALLOW_MISSING_ENV}: expected one of '0', '1'; got 'yes'"):
        utils.nd400_docs(nd400)


def test_source_values_route_as_the_authors_do(hub, caplog):
    assert [sdp_data.source_of(v) for v in ("docci", "DOCCI", "nocaps", "NoCaps", "openimages")] == [
        "docci", "docci", "nocaps", "nocaps", "nocaps"]
    rows = join_nd400([{"source": "NoCaps", "image_id": "0013ea2087020901.jpg"}], load=hub.load_dataset)
    assert rows[0]["source"] == "nocaps" and "{'NoCaps': 1}" in caplog.text


def test_the_export_merges_configs_unless_their_files_are_named(hub):
    # why HubCopy names <config>/<split> files: datasets globs every config's "test" folder
    merged = hub.load_dataset("google/docci", revision=PARQUET_EXPORT, split="test")
    assert any(i.startswith("aar_test_") for i in merged["example_id"])
    table, copy = load_table(sdp_data.DOCCI.table, hub.load_dataset)
    assert copy.config == "docci" and all(i.startswith("test_") for i in table["example_id"])
    assert len(table) == H.N_DOCCI_TEST


def test_nocaps_falls_back_to_a_copy_with_the_same_columns_and_says_why(tmp_path, caplog):
    hub = H.build_hub(tmp_path, nocaps_export=False)
    rows = join_nd400([{"source": "nocaps", "image_id": "0013ea2087020901.jpg"}], load=hub.load_dataset)
    assert rows[0]["caption"] == "NoCaps caption 0 of image 0."
    assert "loaded lmms-lab/NoCaps@main (config default) after: HuggingFaceM4/NoCaps@refs/convert/parquet" in caplog.text
    wrong = HubTable((HubCopy("lmms-lab-encoder/MME", "default"),), "test", ("image", "example_id"))
    with pytest.raises(RuntimeError, match=r"split 'test' has no column \['example_id'\]"):
        load_table(wrong, hub.load_dataset)


def test_resample_draws_nocaps_file_names_seeded_and_order_independent(hub, tmp_path):
    first = sdp_data.resample_nd400(seed=3, per_source=5, load=hub.load_dataset)
    assert first == sdp_data.resample_nd400(seed=3, per_source=5, load=hub.load_dataset)
    assert first != sdp_data.resample_nd400(seed=4, per_source=5, load=hub.load_dataset)
    assert [r["source"] for r in first] == ["docci"] * 5 + ["nocaps"] * 5
    assert all(r["image_id"].startswith("test_") for r in first[:5])
    assert all(r["image_id"].endswith(".jpg") for r in first[5:])
    # the hub serving rows in another order draws the same list
    reversed_hub = H.LocalHub(tmp_path)
    docci = hub.load_dataset("google/docci", **sdp_data.DOCCI.table.copies[0].load_kwargs("test"))
    nocaps = hub.load_dataset("lmms-lab/NoCaps", name="default", split="validation")
    reversed_hub.export("google/docci", {"docci": {"test": docci.select(range(len(docci) - 1, -1, -1))}})
    reversed_hub.export("HuggingFaceM4/NoCaps", {"default": {"validation": nocaps.select(range(len(nocaps) - 1, -1, -1))}})
    assert first == sdp_data.resample_nd400(seed=3, per_source=5, load=reversed_hub.load_dataset)
    with pytest.raises(ValueError, match="fewer than per_source=300"):
        sdp_data.resample_nd400(seed=3, per_source=300, load=hub.load_dataset)


def test_sdp_resample_command_writes_a_list_sdp_nocaps_joins(hub, tmp_path, monkeypatch, capsys):
    from lmms_genbench import cli

    monkeypatch.setattr(datasets, "load_dataset", hub.load_dataset)
    out = tmp_path / "pairs.jsonl"
    assert cli.main(["sdp", "resample", "--seed", "1", "--per-source", "3", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    pairs = sdp_data.load_pair_list(out)
    assert len(pairs) == 6 and pairs == sdp_data.resample_nd400(1, 3, load=hub.load_dataset)
    # sdp_nocaps joins that list instead of the hub's nd400 when the variable is set
    monkeypatch.setenv(utils.PAIRS_ENV, str(out))
    docs = utils.nd400_docs(datasets.Dataset.from_list([{"source": "docci", "image_id": "not in the list"}]))
    assert docs["pair_id"][::2] == [f"{p['source']}/{p['image_id']}" for p in pairs] and len(docs) == 12


def test_geneval_docs_name_the_missing_file(tmp_path, monkeypatch):
    monkeypatch.setenv(utils.GENEVAL_ENV, str(tmp_path / "absent.jsonl"))
    with pytest.raises(FileNotFoundError, match="lmms-genbench sdp fetch-geneval"):
        utils.geneval_docs(None)
    smoke = utils.geneval_smoke_docs(None)
    assert sorted(smoke["tag"]) == sorted(
        ["single_object", "two_object", "counting", "colors", "position", "color_attr"]
    )
    assert utils.doc_to_visual(smoke[0]) == []
