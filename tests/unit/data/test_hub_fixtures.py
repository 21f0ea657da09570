"""Every task that reads a hub dataset, loaded from schema-true local copies (hub_fixtures.py).

Only the hub's address is replaced: lmms-eval builds each task from its YAML and loads the
data with ``datasets`` as it would from the hub, ``process_docs`` runs, and every doc goes
through the task's ``doc_to_text`` and ``doc_to_visual``. lmms-eval's own tasks on the same
datasets read the fixtures too, a check of the fixtures against upstream's readers.
"""

import json
from pathlib import Path

import datasets
import pytest
from lmms_eval.utils import load_yaml_config
from PIL import Image

from lmms_genbench.data import sdp as sdp_data
from lmms_genbench.data.hub import PARQUET_EXPORT, HubCopy
from lmms_genbench.plugin import TASKS_DIR

from tests.support import hub_fixtures as H


def _hub_tasks():
    """{task name: hub dataset id} for our task YAMLs that read the hub."""
    found = {}
    for path in sorted(Path(TASKS_DIR).glob("*/*.yaml")):
        cfg = load_yaml_config(str(path), mode="simple")
        source = cfg.get("dataset_path")
        if cfg.get("task") and source and source.count("/") == 1 and not (path.parent / source).exists():
            found[cfg["task"]] = source
    return found


HUB_TASKS = _hub_tasks()


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    return H.build_hub(tmp_path_factory.mktemp("hub"))


@pytest.fixture
def on_hub(hub, monkeypatch):
    monkeypatch.setattr(datasets, "load_dataset", hub.load_dataset)
    hub.calls.clear()
    return hub


@pytest.fixture(scope="module")
def task_manager():
    from lmms_eval.tasks import TaskManager

    return TaskManager(include_path=TASKS_DIR)  # built-in tasks too: upstream's readers check the fixtures


def _tasks(task_manager, names):
    from lmms_eval.tasks import get_task_dict

    return get_task_dict(list(names), task_manager)


def test_every_hub_dataset_a_task_reads_has_a_fixture(hub):
    assert {"mmeception", "sdp_nocaps", "chef_icl_mmbench", "chef_hallucination_random"} <= set(HUB_TASKS)
    read = set(HUB_TASKS.values()) | {c.path for s in sdp_data.SOURCES.values() for c in s.table.copies}
    written = {f"{o.name}/{r.name}" for o in hub.root.iterdir() if o.is_dir() for r in o.iterdir() if r.is_dir()}
    assert read <= written, f"no fixture for {sorted(read - written)}"


@pytest.mark.parametrize("path, kwargs, features", [
    ("lmms-lab-encoder/MME", {"split": "test"}, H.MME),
    ("mollahsabbir/nd400", {"split": "validation"}, H.ND400),
    ("google/docci", sdp_data.DOCCI.table.copies[0].load_kwargs("test"), H.DOCCI),
    ("google/docci", HubCopy("google/docci", "docci_aar", PARQUET_EXPORT).load_kwargs("test"), H.DOCCI_AAR),
    ("HuggingFaceM4/NoCaps", sdp_data.NOCAPS.table.copies[0].load_kwargs("validation"), H.NOCAPS),
    ("lmms-lab/NoCaps", {"name": "default", "split": "validation"}, H.NOCAPS),
    ("lmms-lab-encoder/MMBench", {"name": "en", "split": "dev"}, H.mmbench_features("string")),
    ("lmms-lab-encoder/ScienceQA", {"name": "ScienceQA-IMG", "split": "test"}, H.SCIENCEQA),
    ("lmms-lab-encoder/POPE", {"name": "Full", "split": "adversarial"}, H.POPE),
    ("lmms-lab-encoder/POPE", {"split": "test"}, H.POPE),
])
def test_fixtures_read_back_with_the_declared_features(hub, path, kwargs, features):
    table = hub.load_dataset(path, **kwargs)
    assert table.features == features and len(table) > 0


def test_nocaps_ids_have_the_real_shapes(hub):
    nocaps = hub.load_dataset("lmms-lab/NoCaps", name="default", split="validation")
    first = nocaps[0]
    assert first["image_id"] == 0 and first["image_file_name"] == "0013ea2087020901.jpg"
    assert first["image_open_images_id"] == "0013ea2087020901" and len(first["annotations_captions"]) == 10
    assert nocaps["image_id"][:3] == [0, 1, 2]
    assert all(f == f"{o}.jpg" for f, o in zip(nocaps["image_file_name"], nocaps["image_open_images_id"]))
    nd400 = hub.load_dataset("mollahsabbir/nd400", split="validation")
    assert {type(i) for i in nd400["image_id"]} == {str}
    ids = {s: {i for src, i in zip(nd400["source"], nd400["image_id"]) if src == s} for s in ("docci", "nocaps")}
    assert all(i.startswith("test_") for i in ids["docci"]) and all(i.endswith(".jpg") for i in ids["nocaps"])


def _gold_text(source, doc):
    if source.endswith("MMBench"):
        return doc[doc["answer"]]
    if source.endswith("ScienceQA"):
        return doc["choices"][doc["answer"]]
    return {"yes": "Yes", "no": "No"}[doc["answer"]]


def test_our_tasks_map_every_doc_of_their_fixtures(on_hub, task_manager):
    tasks = _tasks(task_manager, HUB_TASKS)
    for name, source in HUB_TASKS.items():
        task = tasks[name]
        docs = task.test_docs()
        assert len(docs) > 0, name
        for doc in docs:
            text, visuals = task.doc_to_text(doc), task.doc_to_visual(doc)
            assert visuals and all(isinstance(v, Image.Image) for v in visuals), name
            if name.startswith("chef_"):
                payload = json.loads(text)
                assert payload["gold_text"] == _gold_text(source, doc), (name, doc)
                if source.endswith("MMBench"):
                    assert payload["key"] == str(doc["index"])
                elif source.endswith("POPE"):
                    assert payload["key"] == doc["question_id"] and doc["category"] == task.config.test_split
        if name == "mmeception":  # each MME image once: two questions per question_id
            assert len(docs) == len(set(docs["question_id"])) == 28 and docs["chain_id"] == docs["question_id"]


def test_chef_mmbench_scenario_reads_an_integer_index_too(tmp_path, monkeypatch, task_manager):
    hub = H.build_hub(tmp_path, mmbench_index="int64")  # en `index` dtype at main is unconfirmed
    monkeypatch.setattr(datasets, "load_dataset", hub.load_dataset)
    task = _tasks(task_manager, ["chef_calibration_mmbench"])["chef_calibration_mmbench"]
    docs = task.test_docs()
    assert docs.features["index"] == datasets.Value("int64")
    keys = [json.loads(task.doc_to_text(doc))["key"] for doc in docs]
    assert keys == [str(i) for i in docs["index"]] and "1000000" in keys


def test_sdp_nocaps_loads_its_400_pairs_from_all_three_sources(on_hub, task_manager):
    docs = _tasks(task_manager, ["sdp_nocaps"])["sdp_nocaps"].test_docs()
    nd400 = on_hub.load_dataset("mollahsabbir/nd400", split="validation")
    docci = on_hub.load_dataset("google/docci", **sdp_data.DOCCI.table.copies[0].load_kwargs("test"))
    nocaps = on_hub.load_dataset("HuggingFaceM4/NoCaps", **sdp_data.NOCAPS.table.copies[0].load_kwargs("validation"))
    by_id = {"docci": {r["example_id"]: r for r in docci}, "nocaps": {r["image_file_name"]: r for r in nocaps}}
    # each pair's two chains side by side (--limit N samples both directions)
    assert len(docs) == 800 and docs["direction"] == ["text_first", "image_first"] * 400
    first = docs.select(range(0, 800, 2))
    assert first["pair_id"] == [f"{s}/{i}" for s, i in zip(nd400["source"], nd400["image_id"])]
    assert sorted(first["source"]) == ["docci"] * 200 + ["nocaps"] * 200
    for doc, pair in zip(first, nd400):
        row = by_id[pair["source"]][pair["image_id"]]
        want = row["description"] if pair["source"] == "docci" else row["annotations_captions"][0]
        assert doc["caption"] == want
        assert doc["image"].getpixel((0, 0)) == row["image"].getpixel((0, 0))
    # the join named DOCCI's config and split, and read NoCaps from the original's export
    join_calls = {path: kwargs for path, revision, kwargs in on_hub.calls if revision == PARQUET_EXPORT}
    assert join_calls["google/docci"]["data_files"] == {"test": ["docci/test/*.parquet", "docci/partial-test/*.parquet"]}
    assert set(join_calls) == {"google/docci", "HuggingFaceM4/NoCaps"}


def test_geneval_metadata_fixture_loads_as_genevals_553_prompts(hub, monkeypatch, task_manager, caplog):
    path = hub.root / "geneval" / "evaluation_metadata.jsonl"
    docs = sdp_data.load_geneval_docs(path)
    assert len(docs) == 553 and "not GenEval's" not in caplog.text
    counting = [json.loads(d["metadata"]) for d in docs if d["tag"] == "counting"]
    assert all(m["exclude"][0]["count"] == m["include"][0]["count"] + 1 for m in counting)
    monkeypatch.setenv("LMMS_GENBENCH_GENEVAL_METADATA", str(path))
    task = _tasks(task_manager, ["sdp_geneval"])["sdp_geneval"]
    assert len(task.test_docs()) == 553 and task.doc_to_visual(task.test_docs()[0]) == []


def test_lmms_evals_own_tasks_read_the_same_fixtures(on_hub, task_manager):
    names = ["mme", "mmbench_en_dev", "scienceqa_img", "pope_adv", "pope_pop", "pope_random", "nocaps_val"]
    tasks = _tasks(task_manager, names)
    for name in names:
        task = tasks[name]
        plain = task.dataset_no_image[task.config.test_split]
        results = []
        for doc, bare in zip(task.test_docs(), plain):
            assert isinstance(task.doc_to_text(doc), str) and task.doc_to_visual(doc), name
            results.append(task.process_results(bare, ["yes"]))
        if name == "mme":  # its aggregation asserts two questions per question_id and category
            items = [r["mme_perception_score"] for r in results if "mme_perception_score" in r]
            assert task.aggregation()["mme_perception_score"](items) >= 0
