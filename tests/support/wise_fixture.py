"""A local copy of the hub dataset ``Yuwei-Niu/WISE``, laid out as the hub serves it.

Schema source: the dataset card, huggingface.co/datasets/Yuwei-Niu/WISE README.md
(commit 5084d26, "Upload dataset"): config ``default`` with one split ``test`` of
1,000 rows in ``data/test-*`` Parquet files; features ``Prompt`` string,
``Explanation`` string, ``Category`` string, ``Subcategory`` string, ``prompt_id``
int64, ``Hint`` string. lmms-eval 0.7.3's ``tasks/WISE/utils.py`` reads exactly these
and takes the category from ``prompt_id`` ranges (1-400 culture, 401-567 time,
568-700 space, 701-800 biology, 801-900 physics, 901-1000 chemistry).

The rows are made up, one per category; the real rows' ``Category`` and
``Subcategory`` strings are unconfirmed (no source found), the task does not read
them for scoring.
"""

from pathlib import Path

# The dataset card's YAML header as published, less its split sizes (1,000 rows,
# 299,556 bytes), which `datasets` checks against the data: this copy has 6 rows.
CARD = """---
dataset_info:
  features:
  - name: Prompt
    dtype: string
  - name: Explanation
    dtype: string
  - name: Category
    dtype: string
  - name: Subcategory
    dtype: string
  - name: prompt_id
    dtype: int64
  - name: Hint
    dtype: string
configs:
- config_name: default
  data_files:
  - split: test
    path: data/test-*
---
"""

ROWS = [
    (1, "Cultural knowledge", "Festival", "The traditional food eaten at the Mid-Autumn Festival",
     "Mooncakes: round pastries with a stamped top."),
    (401, "Spatio-temporal reasoning", "Time", "A sunflower field at midnight", "Dark sky; flower heads drooping."),
    (568, "Spatio-temporal reasoning", "Space", "The view of a city street from a drone straight above",
     "A top-down view: roofs, cars seen from above."),
    (701, "Natural science", "Biology", "A caterpillar's final life stage", "A butterfly with open wings."),
    (801, "Natural science", "Physics", "A glass of water with ice after an hour on a hot day",
     "No ice left; condensation on the glass."),
    (901, "Natural science", "Chemistry", "An iron nail left in salt water for a month", "A nail covered in reddish rust."),
]


def write_wise_hub_copy(root: Path, rows: list[tuple] = ROWS) -> Path:
    """Write the card and one Parquet shard of ``rows`` under ``root``;
    ``datasets.load_dataset(root)`` then reads it as it reads the hub repository."""
    import datasets

    features = datasets.Features({
        "Prompt": datasets.Value("string"), "Explanation": datasets.Value("string"),
        "Category": datasets.Value("string"), "Subcategory": datasets.Value("string"),
        "prompt_id": datasets.Value("int64"), "Hint": datasets.Value("string"),
    })
    columns = {"Prompt": [r[3] for r in rows], "Explanation": [r[4] for r in rows], "Category": [r[1] for r in rows],
               "Subcategory": [r[2] for r in rows], "prompt_id": [r[0] for r in rows], "Hint": [r[4] for r in rows]}
    (root / "data").mkdir(parents=True)
    (root / "README.md").write_text(CARD)
    datasets.Dataset.from_dict(columns, features=features).to_parquet(str(root / "data" / "test-00000-of-00001.parquet"))
    return root
