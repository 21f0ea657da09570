"""Data of the semantic drift tasks: Nocaps+Docci400 and GenEval's prompts.

Nocaps+Docci400, the semantic drift paper's 400 image-caption pairs:

The pair list (``mollahsabbir/nd400``, validation split: ``source``,
``image_id``) names 200 DOCCI and 200 NoCaps images. The images and captions
come from their own datasets: DOCCI's ``description`` (test split) and NoCaps'
first ``annotations_captions`` (validation split), as the authors' release.
The original repositories (``google/docci``, ``HuggingFaceM4/NoCaps``) are
loading scripts, which ``datasets`` 4 and later refuse to run, so each source
is a list of Parquet copies tried in order: the hub's own Parquet export of the
original first, then a Parquet mirror with the same columns (``lmms-lab/NoCaps``,
which lmms-eval's nocaps task loads; ``not-lain/docci``). None of them was
loaded from here (no hub access); the column names come from their dataset cards.
:func:`resample_nd400` draws another such list with a seed.

GenEval (djghosh13/geneval, MIT): ``prompts/evaluation_metadata.jsonl``, 553 entries
``{tag, include, exclude?, prompt}``. It is read from a file (:func:`load_geneval_docs`),
which :func:`fetch_geneval_metadata` downloads; the paper's long rewritten prompts
(GenEval-R) can replace the short ones line by line.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

logger = logging.getLogger(__name__)

DOCCI = {
    "sources": [("google/docci", "refs/convert/parquet"), ("not-lain/docci", None)],
    "split": "test", "id": "example_id", "caption": "description",
}
NOCAPS = {
    "sources": [("HuggingFaceM4/NoCaps", "refs/convert/parquet"), ("lmms-lab/NoCaps", None)],
    "split": "validation", "id": "image_id", "caption": "annotations_captions",
}


def _load_source(load: Callable[..., Any], spec: Mapping[str, Any]) -> Any:
    """The first of ``spec["sources"]`` (``(path, revision)``) that loads; raises
    RuntimeError listing every attempt when none does."""
    errors = []
    for path, revision in spec["sources"]:
        kwargs = {"split": spec["split"]}
        if revision:
            kwargs["revision"] = revision
        try:
            table = load(path, **kwargs)
        except Exception as exc:  # noqa: BLE001 - any failure moves on to the next copy
            errors.append(f"{path}@{revision or 'main'}: {type(exc).__name__}: {exc}")
            continue
        if errors:
            logger.warning("loaded %s after: %s", path, "; ".join(errors))
        return table
    raise RuntimeError("no copy of the dataset could be loaded: " + " | ".join(errors))


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
        table = _load_source(load, spec)
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


def load_pair_list(path: str | os.PathLike) -> list[dict[str, str]]:
    """A pair list as JSON lines ``{"source": "docci"|"nocaps", "image_id": ...}``
    (what :func:`resample_nd400` writes); raises ValueError naming the bad line."""
    rows = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            rows.append({"source": str(row["source"]).lower(), "image_id": str(row["image_id"])})
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"{path} line {number}: expected {{\"source\", \"image_id\"}}, got {line[:80]!r} ({exc})"
            ) from None
    if not rows:
        raise ValueError(f"{path} lists no pairs")
    return rows


def resample_nd400(
    seed: int,
    per_source: int = 200,
    load: Callable[..., Any] | None = None,
    docci: Mapping[str, str] = DOCCI,
    nocaps: Mapping[str, str] = NOCAPS,
) -> list[dict[str, str]]:
    """Draw ``per_source`` DOCCI and ``per_source`` NoCaps ids without replacement.

    The ids of each source are sorted before drawing with ``numpy.random.default_rng(seed)``,
    so a seed gives the same list whatever order the hub serves rows in. Rows come back
    DOCCI first, each source in draw order, as ``{"source", "image_id"}``. The authors'
    own draw is not documented beyond "randomly sample 200"; theirs is ``mollahsabbir/nd400``.
    """
    import numpy as np

    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if isinstance(per_source, bool) or not isinstance(per_source, int) or per_source < 1:
        raise ValueError(f"per_source must be an integer >= 1, got {per_source!r}")
    if load is None:
        import datasets

        load = datasets.load_dataset
    rng = np.random.default_rng(seed)
    rows: list[dict[str, str]] = []
    for name, spec in (("docci", docci), ("nocaps", nocaps)):
        table = _load_source(load, spec)
        ids = sorted({str(i) for i in table[spec["id"]]})
        if len(ids) < per_source:
            raise ValueError(f"{name} has {len(ids)} distinct ids, fewer than per_source={per_source}")
        picked = rng.choice(len(ids), size=per_source, replace=False)
        rows += [{"source": name, "image_id": ids[i]} for i in picked]
    return rows


GENEVAL_URL = "https://raw.githubusercontent.com/djghosh13/geneval/main/prompts/evaluation_metadata.jsonl"
#: tag counts of GenEval's evaluation_metadata.jsonl (553 prompts)
GENEVAL_TAG_COUNTS = {
    "single_object": 80, "two_object": 99, "counting": 80, "colors": 94, "position": 100, "color_attr": 100,
}


def _read_prompts(path: str | os.PathLike) -> list[str]:
    """Prompts one per line: ``.txt`` lines, or JSON lines with a ``prompt`` field."""
    lines = [ln for ln in Path(path).read_text(encoding="utf-8").splitlines() if ln.strip()]
    if str(path).endswith(".txt"):
        return [ln.strip() for ln in lines]
    prompts = []
    for number, line in enumerate(lines, 1):
        try:
            prompts.append(str(json.loads(line)["prompt"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path} line {number}: expected a JSON object with 'prompt' ({exc})") from None
    return prompts


def load_geneval_docs(
    metadata_path: str | os.PathLike,
    prompts_path: str | os.PathLike | None = None,
    warn_if_not_geneval: bool = True,
) -> list[dict[str, Any]]:
    """GenEval entries as text-first chain docs ``{chain_id, prompt, tag, metadata}``.

    Args:
        metadata_path: GenEval's ``evaluation_metadata.jsonl`` (or any file in its format).
        prompts_path: optional rewritten prompts (e.g. GenEval-R), one per metadata line in
            the same order (``.txt`` lines or JSON lines with ``prompt``); they start the
            chains, while every image is still judged against the metadata.

    ``metadata`` is kept as a JSON string: GenEval's ``position`` pairs mix a string and
    an int, which an Arrow column cannot hold. Raises ValueError naming the file and line
    for unreadable or invalid entries, or a prompt count that does not match.
    """
    from ..metrics.functional.geneval import validate_metadata

    docs = []
    lines = Path(metadata_path).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            validate_metadata(entry)
            prompt = str(entry["prompt"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{metadata_path} line {number}: not a GenEval entry: {exc}") from None
        docs.append(
            {
                "chain_id": f"geneval/{len(docs):05d}",
                "prompt": prompt,
                "tag": entry["tag"],
                "metadata": json.dumps(entry, sort_keys=True),
            }
        )
    if not docs:
        raise ValueError(f"{metadata_path} holds no GenEval entries")
    if prompts_path:
        prompts = _read_prompts(prompts_path)
        if len(prompts) != len(docs):
            raise ValueError(
                f"{prompts_path} has {len(prompts)} prompts for {len(docs)} GenEval entries in "
                f"{metadata_path}; rewritten prompts must match the metadata line by line"
            )
        for doc, prompt in zip(docs, prompts):
            doc["prompt"] = prompt
    counts = Counter(d["tag"] for d in docs)
    if warn_if_not_geneval and dict(counts) != GENEVAL_TAG_COUNTS:
        logger.warning(
            "%s is not GenEval's 553-prompt set (tags %s); scores are not comparable to GenEval's",
            metadata_path, dict(counts),
        )
    return docs


def fetch_geneval_metadata(target: str | os.PathLike, url: str = GENEVAL_URL, transport: Any = None) -> Path:
    """Download GenEval's evaluation_metadata.jsonl to ``target`` (atomically) and check it
    parses with 553 entries and GenEval's tag counts. ``transport``: an httpx transport
    (tests)."""
    import httpx

    from ..core.keys import atomic_write

    with httpx.Client(transport=transport, follow_redirects=True, timeout=60) as client:
        response = client.get(url)
    if response.status_code != 200:
        raise RuntimeError(f"GET {url} answered HTTP {response.status_code}")
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".download")
    tmp.write_bytes(response.content)
    try:
        docs = load_geneval_docs(tmp, warn_if_not_geneval=False)
        counts = dict(Counter(d["tag"] for d in docs))
        if counts != GENEVAL_TAG_COUNTS:
            raise ValueError(f"downloaded file has tags {counts}, expected {GENEVAL_TAG_COUNTS}")
        atomic_write(target, lambda fh: fh.write(response.content))
    finally:
        tmp.unlink(missing_ok=True)
    return target


def default_geneval_path() -> Path:
    """Where ``lmms-genbench sdp fetch-geneval`` puts the metadata by default."""
    root = os.environ.get("LMMS_GENBENCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "lmms_genbench")
    return Path(root) / "geneval" / "evaluation_metadata.jsonl"
