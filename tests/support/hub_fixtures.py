"""Schema-true local copies of every hub dataset a task reads, laid out as the hub serves them.

Each fixture is a small ``datasets.Dataset`` built with explicit ``datasets.Features``: the
real column names, dtypes and value shapes, with the public source of the schema (a dataset
card or the loading code) in a comment. Rows are synthetic; ids have the real shapes (NoCaps:
an int32 ``image_id`` running from 0 next to ``image_file_name`` "0013ea2087020901.jpg";
nd400: a string ``image_id``, a DOCCI ``example_id`` or a NoCaps file name). No data file
is committed: :func:`build_hub` writes them under a test's tmp folder.

:class:`LocalHub` keeps one folder per repository and revision and two layouts, as seen in
public hub commits:

* :meth:`LocalHub.export`: the Parquet export of a loading-script dataset on revision
  ``refs/convert/parquet``, ``<config>/<split>/0000.parquet`` (the parquet-converter's
  commits; it deletes the README there);
* :meth:`LocalHub.push`: what ``push_to_hub`` writes, ``<config>/<split>-00000-of-00001.parquet``
  (``data/`` for the default config) and a README whose ``configs:`` name the files.

:meth:`LocalHub.load_dataset` has ``datasets.load_dataset``'s signature: it swaps a hub id
for its local folder and calls the real ``datasets.load_dataset`` with every other argument
unchanged, so config names, ``data_files`` patterns, splits and the Parquet reader run as
against the hub. A repository or revision that was not written raises as the hub does.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

import datasets
from datasets import Features, Image, Sequence, Value
from datasets.exceptions import DatasetNotFoundError
from PIL import Image as PILImage

PARQUET_EXPORT = "refs/convert/parquet"
# the real loader, kept before any test puts LocalHub.load_dataset in its place
_LOAD_DATASET = datasets.load_dataset
_PACKAGED = {"json", "csv", "parquet", "text", "imagefolder"}

# ---------------------------------------------------------------- features, with their sources

# lmms-lab/MME dataset card (config default, split test). lmms-eval 0.7.3's mme task and our
# mmeception read lmms-lab-encoder/MME: that its schema is the same is assumed (unconfirmed).
MME = Features({
    "question_id": Value("string"), "image": Image(), "question": Value("string"),
    "answer": Value("string"), "category": Value("string"),
})

# mollahsabbir/nd400, split validation: the authors' prepare_dataset.py reads only these two;
# its other columns (if any) are unconfirmed (no card found).
ND400 = Features({"source": Value("string"), "image_id": Value("string")})

# google/docci docci.py (the loading script): config docci declares image, example_id,
# description (split and image_file are emitted but undeclared, so not stored); docci_aar
# declares image, example_id.
DOCCI = Features({"image": Image(), "example_id": Value("string"), "description": Value("string")})
DOCCI_AAR = Features({"image": Image(), "example_id": Value("string")})

# HuggingFaceM4/NoCaps README (script NoCaps.py) and the lmms-lab/NoCaps card: eleven columns.
NOCAPS = Features({
    "image": Image(), "image_coco_url": Value("string"), "image_date_captured": Value("string"),
    "image_file_name": Value("string"), "image_height": Value("int32"), "image_width": Value("int32"),
    "image_id": Value("int32"), "image_license": Value("int8"), "image_open_images_id": Value("string"),
    "annotations_ids": Sequence(Value("int32")), "annotations_captions": Sequence(Value("string")),
})

# lmms-lab/MMBench card: cn has index int64 and these names; en has the same names, with
# `index` a string at card revision ac155b9 (en dtypes at main unconfirmed: both are tested).
_MMBENCH_TEXT = ("question", "hint", "answer", "A", "B", "C", "D", "category")


def mmbench_features(index_dtype: str = "string") -> Features:
    cols: dict[str, Any] = {"index": Value(index_dtype)}
    cols.update({name: Value("string") for name in _MMBENCH_TEXT})
    cols.update({"image": Image(), "source": Value("string"), "L2-category": Value("string"),
                 "comment": Value("string"), "split": Value("string")})
    return Features(cols)


# lmms-lab/ScienceQA card, configs ScienceQA-FULL and ScienceQA-IMG: answer is an int8 index
# into choices.
SCIENCEQA = Features({
    "image": Image(), "question": Value("string"), "choices": Sequence(Value("string")),
    "answer": Value("int8"), "hint": Value("string"), "task": Value("string"), "grade": Value("string"),
    "subject": Value("string"), "topic": Value("string"), "category": Value("string"),
    "skill": Value("string"), "lecture": Value("string"), "solution": Value("string"),
})

# POPE: the giobin/POPE mirror card (the lmms-lab/POPE card was not retrieved: unconfirmed);
# configs default (split test) and Full (splits adversarial, popular, random).
POPE = Features({
    "id": Value("string"), "question_id": Value("string"), "question": Value("string"),
    "answer": Value("string"), "image_source": Value("string"), "image": Image(),
    "category": Value("string"),
})


# ---------------------------------------------------------------- the local hub

def _revision_dir(revision: str | None) -> str:
    return (revision or "main").replace("/", "--")


class LocalHub:
    """Hub repositories as local folders ``root/<owner>/<name>/<revision>/``."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.calls: list[tuple[str, str | None, dict[str, Any]]] = []

    def repo(self, path: str, revision: str | None = None) -> Path:
        return self.root / path / _revision_dir(revision)

    def export(self, path: str, tables: dict[str, dict[str, datasets.Dataset]]) -> None:
        """The hub's Parquet export (``refs/convert/parquet``) of a script dataset."""
        for config, splits in tables.items():
            for split, table in splits.items():
                target = self.repo(path, PARQUET_EXPORT) / config / split / "0000.parquet"
                target.parent.mkdir(parents=True, exist_ok=True)
                table.to_parquet(str(target))

    def push(self, path: str, tables: dict[str, dict[str, datasets.Dataset]]) -> None:
        """What ``push_to_hub`` writes: Parquet files and a README naming them per config."""
        repo = self.repo(path)
        lines = ["---", "configs:"]
        for config, splits in tables.items():
            folder = "data" if config == "default" else config
            lines.append(f"- config_name: {json.dumps(config)}")
            lines.append("  data_files:")
            for split, table in splits.items():
                target = repo / folder / f"{split}-00000-of-00001.parquet"
                target.parent.mkdir(parents=True, exist_ok=True)
                table.to_parquet(str(target))
                lines += [f"  - split: {split}", f"    path: {folder}/{split}-*"]
        (repo / "README.md").write_text("\n".join(lines + ["---", ""]), encoding="utf-8")

    def load_dataset(self, path: str, *args: Any, revision: str | None = None, **kwargs: Any):
        """``datasets.load_dataset`` with ``path`` (a hub id) read from its local folder.

        The cache goes under ``root`` whatever ``cache_dir`` came in (lmms-eval passes the
        user's), and ``token`` is dropped; every other argument reaches ``datasets`` as given.
        """
        if path in _PACKAGED or os.path.exists(path):  # a task's own local files: no hub involved
            return _LOAD_DATASET(path, *args, revision=revision, **kwargs)
        local = self.repo(path, revision)
        if not local.is_dir():
            if not (self.root / path).is_dir():
                raise DatasetNotFoundError(f"Dataset '{path}' doesn't exist on the Hub or cannot be accessed.")
            raise DatasetNotFoundError(f"Revision '{revision}' doesn't exist for dataset '{path}' on the Hub.")
        self.calls.append((path, revision, dict(kwargs)))
        kwargs["cache_dir"] = str(self.root / ".cache")
        kwargs.pop("token", None)  # lmms-eval passes token=True for gated hub copies
        return _LOAD_DATASET(str(local), *args, **kwargs)


# ---------------------------------------------------------------- synthetic rows

def tiny_image(seed: int) -> PILImage.Image:
    rng = random.Random(seed)
    return PILImage.new("RGB", (8, 6), tuple(rng.randrange(256) for _ in range(3)))


def _hex16(seed: str) -> str:
    return hashlib.sha1(seed.encode()).hexdigest()[:16]


def docci_rows(split: str, n: int) -> datasets.Dataset:
    # example_id "<split>_<index>", 5-digit padding (3rd-party: "test_01427.jpg")
    rows = [{"image": tiny_image(i), "example_id": f"{split}_{i:05d}",
             "description": f"A long DOCCI paragraph number {i} of the {split} split. It describes every object."}
            for i in range(n)]
    return datasets.Dataset.from_list(rows, features=DOCCI)


def docci_aar_rows(split: str, n: int) -> datasets.Dataset:
    # docci_aar example_id = the image file stem, prefix aar_train / aar_test (docci.py)
    rows = [{"image": tiny_image(1000 + i), "example_id": f"aar_{split}_{i:05d}"} for i in range(n)]
    return datasets.Dataset.from_list(rows, features=DOCCI_AAR)


def nocaps_rows(split: str, n: int) -> datasets.Dataset:
    """``image_id`` runs from 0; the first validation row is the one on the NoCaps card."""
    rows = []
    for i in range(n):
        open_id = "0013ea2087020901" if (split, i) == ("validation", 0) else _hex16(f"{split}{i}")
        captions = [] if split == "test" else [f"NoCaps caption {k} of image {i}." for k in range(10)]
        image = tiny_image(2000 + i)
        rows.append({
            "image": image, "image_coco_url": f"https://s3.amazonaws.com/nocaps/{split[:3]}/{open_id}.jpg",
            "image_date_captured": "2018-11-06 11:04:33", "image_file_name": f"{open_id}.jpg",
            "image_height": image.height, "image_width": image.width, "image_id": i, "image_license": 0,
            "image_open_images_id": open_id,
            # the test split's captions are private (nocaps.org); what the copies hold there is unconfirmed
            "annotations_ids": list(range(10 * i, 10 * i + len(captions))), "annotations_captions": captions,
        })
    return datasets.Dataset.from_list(rows, features=NOCAPS)


def nd400_rows(docci_ids: list[str], nocaps_files: list[str], seed: int = 0) -> datasets.Dataset:
    """200 + 200 pairs from the given ids, in a seeded mixed order."""
    rng = random.Random(seed)
    rows = [{"source": "docci", "image_id": i} for i in rng.sample(docci_ids, 200)]
    rows += [{"source": "nocaps", "image_id": f} for f in rng.sample(nocaps_files, 200)]
    rng.shuffle(rows)
    return datasets.Dataset.from_list(rows, features=ND400)


MME_CATEGORIES = ("existence", "count", "position", "color", "posters", "celebrity", "scene", "landmark",
                  "artwork", "OCR", "commonsense_reasoning", "numerical_calculation", "text_translation",
                  "code_reasoning")


def mme_rows() -> datasets.Dataset:
    """Two yes/no questions per image (lmms-eval's aggregation asserts two per question_id)."""
    rows = []
    for c, category in enumerate(MME_CATEGORIES):
        for n in range(2):
            qid = f"{category}/{n:04d}.png"  # 3rd-party: "code_reasoning/0020.png"
            for answer in ("Yes", "No"):
                rows.append({"question_id": qid, "image": tiny_image(100 * c + n),
                             "question": f"Is this a {category} picture? Please answer yes or no.",
                             "answer": answer, "category": category})
    return datasets.Dataset.from_list(rows, features=MME)


def mmbench_rows(index_dtype: str = "string") -> datasets.Dataset:
    """Dev questions with their circular copies: index i, i + 1e6, ... with the options rotated."""
    questions = [
        ("What colour is the car?", None, ["red", "blue", "green", "white"], 0, "attribute_recognition",
         "finegrained_perception (instance-level)"),
        ("Which is the largest planet?", "Look at the picture.", ["Mars", "Jupiter", "Venus", "Earth"], 1,
         "physical_property_reasoning", "attribute_reasoning"),
        ("Is the lamp left of the sofa?", None, ["yes", "no"], 0, "spatial_relationship", "relation_reasoning"),
        ("What is the man holding?", None, ["a cup", "a phone", "a book"], 2, "action_recognition",
         "finegrained_perception (cross-instance)"),
        ("Which scene is shown?", "A photo taken outdoors.", ["beach", "forest", "city", "desert"], 3,
         "image_scene", "coarse_perception"),
    ]
    rows = []
    for q, (question, hint, options, gold, category, l2) in enumerate(questions):
        for copy in range(len(options)):
            rotated = options[copy:] + options[:copy]
            index = q + copy * 1_000_000
            cells = {letter: (rotated[k] if k < len(rotated) else None) for k, letter in enumerate("ABCD")}
            rows.append({
                "index": str(index) if index_dtype == "string" else index, "question": question, "hint": hint,
                "answer": "ABCD"[rotated.index(options[gold])], **cells, "category": category,
                "image": tiny_image(300 + q), "source": "scienceqa", "L2-category": l2, "comment": None,
                "split": "dev",
            })
    return datasets.Dataset.from_list(rows, features=mmbench_features(index_dtype))


def scienceqa_rows() -> datasets.Dataset:
    items = [
        ("Which of these states is farthest north?", ["Ohio", "Florida", "Texas"], 0, ""),
        ("Which animal's feet are also adapted for swimming?", ["duck", "cat"], 0, "Ducks have webbed feet."),
        ("What is the temperature of a hot bath?", ["40°C", "40°F", "40 K", "4°C"], 0, ""),
        ("Which word would you find on a dictionary page with the guide words bat - bowl?", ["bite", "brush"], 0, ""),
        ("Which material is this spoon made of?", ["wood", "metal"], 1, "Select the best answer."),
        ("Which tense does the sentence use?", ["past tense", "present tense", "future tense"], 2, ""),
    ]
    rows = [{"image": tiny_image(400 + i), "question": q, "choices": choices, "answer": answer, "hint": hint,
             "task": "closed choice", "grade": "grade8", "subject": "natural science", "topic": "geography",
             "category": "Geography", "skill": "Read a map", "lecture": "Maps show places.",
             "solution": f"The answer is {choices[answer]}."}
            for i, (q, choices, answer, hint) in enumerate(items)]
    return datasets.Dataset.from_list(rows, features=SCIENCEQA)


POPE_SPLITS = ("adversarial", "popular", "random")


def pope_rows(category: str, start: int = 0) -> datasets.Dataset:
    rows = [{"id": str(start + i), "question_id": str(start + i + 1),
             "question": f"Is there a {obj} in the image?", "answer": answer,
             "image_source": "COCO_val2014_000000310196", "image": tiny_image(500 + i), "category": category}
            for i, (obj, answer) in enumerate([("snowboard", "no"), ("person", "yes"), ("dog", "no"), ("car", "yes")])]
    return datasets.Dataset.from_list(rows, features=POPE)


# djghosh13/geneval prompts/evaluation_metadata.jsonl: tag counts, key order and value shapes
GENEVAL_TAGS = {"single_object": 80, "two_object": 99, "counting": 80, "colors": 94, "position": 100,
                "color_attr": 100}
_WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}


def geneval_metadata_lines(tags: dict[str, int] = GENEVAL_TAGS) -> str:
    rows = []
    for tag, n in tags.items():
        for i in range(n):
            if tag == "counting":
                count = 2 + i % 3
                row = {"tag": tag, "include": [{"class": "clock", "count": count}],
                       "exclude": [{"class": "clock", "count": count + 1}],
                       "prompt": f"a photo of {_WORDS[count]} clocks"}
            elif tag == "position":
                row = {"tag": tag, "include": [{"class": "teddy bear", "count": 1},
                                               {"class": "dog", "count": 1, "position": ["right of", 0]}],
                       "prompt": "a photo of a dog right of a teddy bear"}
            elif tag in ("colors", "color_attr"):
                inc = [{"class": "car", "count": 1, "color": "red"}]
                if tag == "color_attr":
                    inc.append({"class": "bench", "count": 1, "color": "blue"})
                prompt = "a photo of a red car" + (" and a blue bench" if tag == "color_attr" else "")
                row = {"tag": tag, "include": inc, "prompt": prompt}
            else:
                inc = [{"class": "cat", "count": 1}] + ([{"class": "dog", "count": 1}] if tag == "two_object" else [])
                row = {"tag": tag, "include": inc, "prompt": "a photo of a cat"}
            rows.append(json.dumps(row))
    return "\n".join(rows) + "\n"


# ---------------------------------------------------------------- everything, in one call

N_DOCCI_TEST, N_NOCAPS_VALIDATION = 220, 230


def build_hub(root: str | os.PathLike, *, nocaps_export: bool = True, mmbench_index: str = "string") -> LocalHub:
    """Every dataset our task YAMLs and the nd400 join read, under ``root``."""
    hub = LocalHub(root)
    docci_test = docci_rows("test", N_DOCCI_TEST)
    hub.export("google/docci", {
        "docci": {"train": docci_rows("train", 3), "test": docci_test,
                  "qual_dev": docci_rows("qual_dev", 2), "qual_test": docci_rows("qual_test", 2)},
        "docci_aar": {"train": docci_aar_rows("train", 2), "test": docci_aar_rows("test", 3)},
    })
    nocaps = {"validation": nocaps_rows("validation", N_NOCAPS_VALIDATION), "test": nocaps_rows("test", 4)}
    if nocaps_export:
        hub.export("HuggingFaceM4/NoCaps", {"default": nocaps})
    hub.push("lmms-lab/NoCaps", {"default": nocaps})
    # lmms-eval 0.7.3's nocaps task reads this copy (same schema assumed): to check our fixture
    # against upstream's own reader
    hub.push("lmms-lab-encoder/NoCaps", {"default": nocaps})
    hub.push("mollahsabbir/nd400", {"default": {"validation": nd400_rows(
        list(docci_test["example_id"]), list(nocaps["validation"]["image_file_name"]))}})
    hub.push("lmms-lab-encoder/MME", {"default": {"test": mme_rows()}})
    hub.push("lmms-lab-encoder/MMBench", {"en": {"dev": mmbench_rows(mmbench_index)}})
    hub.push("lmms-lab-encoder/ScienceQA", {"ScienceQA-IMG": {"test": scienceqa_rows()}})
    pope = {s: pope_rows(s, 10 * k) for k, s in enumerate(POPE_SPLITS)}
    hub.push("lmms-lab-encoder/POPE", {"default": {"test": datasets.concatenate_datasets(list(pope.values()))},
                                       "Full": pope})
    (hub.root / "geneval").mkdir(parents=True, exist_ok=True)
    (hub.root / "geneval" / "evaluation_metadata.jsonl").write_text(geneval_metadata_lines(), encoding="utf-8")
    return hub
