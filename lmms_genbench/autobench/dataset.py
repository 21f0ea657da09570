"""The built benchmark as a Hugging Face dataset, plus its manifest.

Layout of a build's output folder::

    <out>/dataset/        datasets.Dataset.save_to_disk (split "test" rows)
    <out>/manifest.json   every setting, model, count and dropped item
    <out>/cache/          the call cache (default; reused on resume)

The evaluation task accepts ``<out>``, ``<out>/dataset`` or a hub id.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.keys import atomic_write

DATASET_DIR = "dataset"
MANIFEST = "manifest.json"


def features():
    import datasets

    s = datasets.Value("string")
    return datasets.Features({
        "item_id": s,
        "image": datasets.Image(),
        "question": s,
        "options": datasets.Sequence(s),  # A, B, C, D in order
        "answer": s,                      # the correct letter
        "capability": s,
        "general_aspect": s,
        "aspect": s,
        "level": s,
        "description": s,
        "topic": s,
        "keywords": datasets.Sequence(s),
        "alignment_score": datasets.Value("float32"),
        "defects": datasets.Sequence(s),
        "draws": datasets.Value("int32"),
    })


def to_dataset(items: Sequence[Any]):
    import datasets

    names = list(features())
    rows = {name: [getattr(it, name) for it in items] for name in names}
    return datasets.Dataset.from_dict(rows, features=features(), split="test")


def save(items, manifest: dict, out_dir: str | Path, push_to_hub: str | None = None,
         private: bool = True) -> Path:
    """Write ``<out>/dataset`` and ``<out>/manifest.json``; push when asked.

    With no item (everything dropped) only the manifest is written: it says why.
    """
    out = Path(out_dir)
    if not items:
        blob = json.dumps(manifest, indent=2, ensure_ascii=False, default=str).encode("utf-8")
        atomic_write(out / MANIFEST, lambda fh: fh.write(blob))
        return out / DATASET_DIR
    ds = to_dataset(items)
    ds.save_to_disk(str(out / DATASET_DIR))
    if push_to_hub:
        ds.push_to_hub(push_to_hub, split="test", private=private)
        manifest = {**manifest, "hub_id": push_to_hub}
    blob = json.dumps(manifest, indent=2, ensure_ascii=False, default=str).encode("utf-8")
    atomic_write(out / MANIFEST, lambda fh: fh.write(blob))
    return out / DATASET_DIR


def load(source: str):
    """A built benchmark from a build folder, a save_to_disk folder or a hub id."""
    import datasets

    path = Path(source).expanduser()
    if path.is_dir():
        if (path / DATASET_DIR).is_dir():
            path = path / DATASET_DIR
        elif (path / MANIFEST).is_file():
            raise FileNotFoundError(
                f"AutoBench dataset: {source!r} holds a manifest but no dataset (every item was "
                "dropped; see dropped_by_reason in manifest.json)"
            )
        return datasets.load_from_disk(str(path))
    if path.exists() or source.startswith((".", "/", "~")):
        raise FileNotFoundError(f"AutoBench dataset: {source!r} is not a build or save_to_disk folder")
    return datasets.load_dataset(source, split="test")
