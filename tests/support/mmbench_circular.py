"""An MMBench-shaped dataset with circular groups (copy k of a question rotates its options by
k), for ChEF's circular rules in-process (tests/unit/chef/test_chef_circular.py) and through
the lmms-eval command (tests/e2e/test_chef_circular_e2e.py). Columns and types are those of
lmms-lab/MMBench (DATASET_SCHEMAS.md)."""

from pathlib import Path

import datasets
from PIL import Image

import lmms_genbench.chef.recipe as R

TASKS = Path(R.__file__).resolve().parents[1] / "tasks" / "chef"
LETTERS = "ABCD"
FEATURES = datasets.Features({
    "index": datasets.Value("int64"), "question": datasets.Value("string"), "hint": datasets.Value("string"),
    "answer": datasets.Value("string"), **{c: datasets.Value("string") for c in LETTERS},
    "category": datasets.Value("string"), "image": datasets.Image(), "source": datasets.Value("string"),
    "L2-category": datasets.Value("string"), "comment": datasets.Value("string"), "split": datasets.Value("string"),
})
# (question, options, gold index, image colour): 4, 4, 3 and 2 options -> 4, 4, 3 and 2 copies
QUESTIONS = [
    ("Which colour is the square?", ["red", "green", "blue", "yellow"], 0, (200, 30, 30)),
    ("What shape is drawn in the picture?", ["circle", "square", "triangle", "star"], 1, (30, 200, 30)),
    ("How many objects are in the image?", ["one", "two", "three"], 2, (30, 30, 200)),
    ("Is the background dark or light?", ["dark", "light"], 0, (240, 240, 240)),
]


def mmbench_circular_rows():
    """Copy k of a question rotates its options by k and moves the answer letter with them."""
    rows = []
    for i, (question, options, gold, colour) in enumerate(QUESTIONS):
        image = Image.new("RGB", (24, 24), colour)
        for k in range(len(options)):
            rotated = options[k:] + options[:k]
            cols = {c: (rotated[j] if j < len(rotated) else None) for j, c in enumerate(LETTERS)}
            rows.append({"index": i + k * 1_000_000, "question": question, "hint": None,
                         "answer": LETTERS[(gold - k) % len(options)], **cols,
                         "category": "attribute_recognition", "image": image, "source": "scienceqa",
                         "L2-category": "attribute_reasoning", "comment": None, "split": "dev"})
    return rows
