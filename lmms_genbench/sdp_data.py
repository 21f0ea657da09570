"""Nocaps+Docci400: the semantic drift paper's 400 image-caption pairs.

The pair list (``mollahsabbir/nd400``, validation split: ``source``,
``image_id``) names 200 DOCCI and 200 NoCaps images. The images and captions
come from their own datasets: DOCCI's ``description`` (``google/docci``, test
split) and NoCaps' first ``annotations_captions`` (``HuggingFaceM4/NoCaps``,
validation split). The id columns of those two datasets are arguments,
because this join has not been run against the hub from here.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

DOCCI = {"path": "google/docci", "split": "test", "id": "example_id", "caption": "description"}
NOCAPS = {"path": "HuggingFaceM4/NoCaps", "split": "validation", "id": "image_id", "caption": "annotations_captions"}


def _caption(value: Any) -> str:
    # NoCaps keeps ten reference captions per image: the authors use the first
    if isinstance(value, (list, tuple)):
        return str(value[0]) if value else ""
    return str(value or "")


def join_nd400(
    pairs: Iterable[Mapping[str, Any]],
    load: Callable[..., Any] | None = None,
    docci: Mapping[str, str] = DOCCI,
    nocaps: Mapping[str, str] = NOCAPS,
) -> list[dict[str, Any]]:
    """Rows ``{pair_id, source, caption, image}`` for each listed pair, in list order.

    Args:
        pairs: the nd400 rows (``source`` is "docci" or "nocaps", ``image_id``).
        load: ``datasets.load_dataset`` (injectable for tests).
        docci, nocaps: where each source lives and which columns hold the id and caption.

    Raises:
        ValueError: a pair names an unknown source or an id missing from its source,
            saying which; a silently shorter benchmark would not be Nocaps+Docci400.
    """
    if load is None:
        import datasets

        load = datasets.load_dataset
    pairs = list(pairs)
    sources = {"docci": docci, "nocaps": nocaps}
    wanted: dict[str, set[str]] = {name: set() for name in sources}
    for row in pairs:
        source = str(row["source"]).lower()
        if source not in sources:
            raise ValueError(f"nd400 row {row!r}: source must be 'docci' or 'nocaps', got {row['source']!r}")
        wanted[source].add(str(row["image_id"]))
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for name, spec in sources.items():
        if not wanted[name]:
            continue
        table = load(spec["path"], split=spec["split"])
        ids = [str(i) for i in table[spec["id"]]]
        keep = [i for i, ident in enumerate(ids) if ident in wanted[name]]
        for row in table.select(keep):
            found[(name, str(row[spec["id"]]))] = {"caption": _caption(row[spec["caption"]]), "image": row["image"]}
    rows, missing = [], []
    for row in pairs:
        key = (str(row["source"]).lower(), str(row["image_id"]))
        if key not in found:
            missing.append(key)
            continue
        rows.append({"pair_id": f"{key[0]}/{key[1]}", "source": key[0], **found[key]})
    if missing:
        raise ValueError(f"{len(missing)} nd400 pairs were not found in their source datasets, e.g. {missing[:3]}")
    return rows
