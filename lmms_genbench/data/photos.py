"""Image sets that need no download: photos shipped inside installed
packages (the offline smoke benchmark) and a user's own folder of images."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")


# (chain_id, category): photos bundled with scikit-image, scikit-learn and
# matplotlib; two are grayscale and one is printed text.
PACKAGE_PHOTOS = (
    ("skimage/astronaut", "scikit-image"),
    ("skimage/coffee", "scikit-image"),
    ("skimage/chelsea", "scikit-image"),
    ("skimage/rocket", "scikit-image"),
    ("skimage/camera", "scikit-image"),
    ("skimage/page", "scikit-image"),
    ("sklearn/china", "scikit-learn"),
    ("sklearn/flower", "scikit-learn"),
    ("matplotlib/grace_hopper", "matplotlib"),
)


def load_package_photo(chain_id: str):
    """The PIL image behind one of :data:`PACKAGE_PHOTOS`' ids (no download)."""
    from PIL import Image

    source, _, name = chain_id.partition("/")
    if source == "skimage":
        import skimage.data

        return Image.fromarray(getattr(skimage.data, name)())
    if source == "sklearn":
        from sklearn.datasets import load_sample_image

        return Image.fromarray(load_sample_image(f"{name}.jpg"))
    if source == "matplotlib":
        import matplotlib.cbook

        with matplotlib.cbook.get_sample_data(f"{name}.jpg") as fh:
            image = Image.open(fh)
            image.load()
        return image
    raise ValueError(f"unknown package photo {chain_id!r}; known: {[p[0] for p in PACKAGE_PHOTOS]}")


def folder_records(root: str | os.PathLike) -> list[dict[str, Any]]:
    """Every image file under ``root`` (recursively, sorted) as
    ``{"chain_id", "category", "image_path"}``. The category is the first
    sub-folder (``images`` for files directly in ``root``). Files are not
    opened here: a bad file fails its own doc later, not the listing."""
    base = Path(root).expanduser()
    if not base.is_dir():
        raise FileNotFoundError(f"image folder {str(base)!r} does not exist or is not a folder")
    records = []
    for path in sorted(p for p in base.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES):
        rel = path.relative_to(base)
        category = rel.parts[0] if len(rel.parts) > 1 else "images"
        records.append({"chain_id": rel.as_posix(), "category": category, "image_path": str(path)})
    if not records:
        raise ValueError(f"no image files ({', '.join(IMAGE_SUFFIXES)}) found under {str(base)!r}")
    return records
